import { putRepeatedBytes, putString, repeatedBytesSize } from './field-writers';
import { allocPrefixed } from './message-frame';
import { WIRE_LEN, WIRE_VARINT, WireError, decodeUtf8Strict, lenFieldSize, scanFields } from './wire';

/** Field numbers of envoy.service.discovery.v3.DeltaDiscoveryResponse. */
const RESOURCES = 2;
const TYPE_URL = 4;
const NONCE = 5;
const REMOVED_RESOURCES = 6;
const REMOVED_RESOURCE_NAMES = 8;
const RESOURCE_ERRORS = 9;
/** ResourceName.name; ResourceError.resource_name / error_detail; google.rpc.Status.code / message. */
const RESOURCE_NAME_NAME = 1;
const ERROR_RESOURCE_NAME = 1;
const ERROR_DETAIL = 2;
const STATUS_CODE = 1;
const STATUS_MESSAGE = 2;
/** google.rpc.Code UNKNOWN, for a status code outside int32. */
const CODE_UNKNOWN = 2;

/** One `resource_errors` entry: a resource the control plane reports it cannot serve. */
export interface ScannedResourceError {
  name: string;
  code: number;
  message: string;
}
const NONE: readonly Buffer[] = [];

/** An upstream response with each `Resource` kept as its own copy of the original bytes. */
export interface ScannedDeltaResponse {
  typeUrl: string;
  nonce: string;
  resources: Buffer[];
  /** `removed_resources` (6). */
  removed: string[];
  /** The names of `removed_resource_names` (8). */
  removedNames: string[];
  /** `resource_errors` (9). */
  errors: ScannedResourceError[];
}

/**
 * A response whose top level (or a removal/error entry) is malformed. Carries
 * what was read before the fault, so the response can still be NACKed by nonce.
 */
export class DeltaResponseError extends WireError {
  constructor(
    message: string,
    readonly typeUrl: string,
    readonly nonce: string,
  ) {
    super(message);
  }
}

function lenOnly(field: number, wireType: number): void {
  if (wireType !== WIRE_LEN) throw new WireError(`DeltaDiscoveryResponse field ${field} has the wrong wire type`);
}

function readResourceName(buf: Uint8Array, start: number, end: number, what: string): string {
  let name = '';
  scanFields(buf.subarray(start, end), (f) => {
    if (f.field !== RESOURCE_NAME_NAME) return;
    if (f.wireType !== WIRE_LEN) throw new WireError(`${what}.name has the wrong wire type`);
    name = decodeUtf8Strict(buf, start + f.valueStart, start + f.valueEnd, `${what}.name`);
  });
  return name;
}

function readStatus(buf: Uint8Array, start: number, end: number): { code: number; message: string } {
  const status = { code: 0, message: '' };
  scanFields(buf.subarray(start, end), (f) => {
    if (f.field === STATUS_CODE) {
      if (f.wireType !== WIRE_VARINT) throw new WireError('ResourceError.error_detail.code has the wrong wire type');
      // int32: a negative value arrives as a 10-byte varint; any code outside 0..2^31 is no known code.
      status.code = f.varint <= 0x7fffffff ? f.varint : CODE_UNKNOWN;
    } else if (f.field === STATUS_MESSAGE) {
      if (f.wireType !== WIRE_LEN) throw new WireError('ResourceError.error_detail.message has the wrong wire type');
      status.message = decodeUtf8Strict(buf, start + f.valueStart, start + f.valueEnd, 'ResourceError.error_detail.message');
    }
  });
  return status;
}

function readResourceError(buf: Uint8Array, start: number, end: number): ScannedResourceError {
  const out: ScannedResourceError = { name: '', code: 0, message: '' };
  scanFields(buf.subarray(start, end), (f) => {
    if (f.field === ERROR_RESOURCE_NAME) {
      if (f.wireType !== WIRE_LEN) throw new WireError('ResourceError.resource_name has the wrong wire type');
      out.name = readResourceName(buf, start + f.valueStart, start + f.valueEnd, 'ResourceError.resource_name');
    } else if (f.field === ERROR_DETAIL) {
      if (f.wireType !== WIRE_LEN) throw new WireError('ResourceError.error_detail has the wrong wire type');
      const status = readStatus(buf, start + f.valueStart, start + f.valueEnd);
      out.code = status.code;
      out.message = status.message;
    }
  });
  return out;
}

/**
 * Reads a DeltaDiscoveryResponse at the wire level: every string must be
 * UTF-8, `Resource` payloads stay undecoded. Throws DeltaResponseError.
 */
export function scanDeltaResponse(bytes: Buffer): ScannedDeltaResponse {
  const out: ScannedDeltaResponse = { typeUrl: '', nonce: '', resources: [], removed: [], removedNames: [], errors: [] };
  try {
    scanFields(bytes, (f) => {
      switch (f.field) {
        case RESOURCES:
          lenOnly(f.field, f.wireType);
          // A copy, so one retained resource doesn't pin the whole response buffer.
          out.resources.push(Buffer.from(bytes.subarray(f.valueStart, f.valueEnd)));
          break;
        case TYPE_URL:
          lenOnly(f.field, f.wireType);
          out.typeUrl = decodeUtf8Strict(bytes, f.valueStart, f.valueEnd, 'type_url');
          break;
        case NONCE:
          lenOnly(f.field, f.wireType);
          out.nonce = decodeUtf8Strict(bytes, f.valueStart, f.valueEnd, 'nonce');
          break;
        case REMOVED_RESOURCES:
          lenOnly(f.field, f.wireType);
          out.removed.push(decodeUtf8Strict(bytes, f.valueStart, f.valueEnd, 'removed_resources entry'));
          break;
        case REMOVED_RESOURCE_NAMES:
          lenOnly(f.field, f.wireType);
          out.removedNames.push(readResourceName(bytes, f.valueStart, f.valueEnd, 'removed_resource_names entry'));
          break;
        case RESOURCE_ERRORS:
          lenOnly(f.field, f.wireType);
          out.errors.push(readResourceError(bytes, f.valueStart, f.valueEnd));
          break;
      }
    });
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
    throw new DeltaResponseError(err.message, out.typeUrl, out.nonce);
  }
  return out;
}

/**
 * Encodes a DeltaDiscoveryResponse from already-encoded `Resource`s in one
 * allocation. This is the only serialization on the fan-out path, and it runs
 * once per distinct response, not once per client. `errors` are encoded
 * `ResourceError` messages (field 9), see `encodeResourceError`.
 */
export function encodeDeltaResponse(
  typeUrl: string,
  resources: readonly Buffer[],
  removed: readonly string[],
  nonce: string,
  errors: readonly Buffer[] = NONE,
): Buffer {
  const typeLen = Buffer.byteLength(typeUrl, 'utf8');
  const nonceLen = Buffer.byteLength(nonce, 'utf8');
  let size = lenFieldSize(TYPE_URL, typeLen) + lenFieldSize(NONCE, nonceLen);
  size += repeatedBytesSize(RESOURCES, resources) + repeatedBytesSize(RESOURCE_ERRORS, errors);
  const removedLens = removed.map((n) => Buffer.byteLength(n, 'utf8'));
  for (const len of removedLens) size += lenFieldSize(REMOVED_RESOURCES, len);
  const out = allocPrefixed(size); // framed for the wire without a copy (message-frame.ts)
  let pos = putRepeatedBytes(out, 0, RESOURCES, resources);
  pos = putString(out, pos, TYPE_URL, typeUrl, typeLen);
  pos = putString(out, pos, NONCE, nonce, nonceLen);
  removed.forEach((name, i) => {
    pos = putString(out, pos, REMOVED_RESOURCES, name, removedLens[i]);
  });
  putRepeatedBytes(out, pos, RESOURCE_ERRORS, errors);
  return out;
}
