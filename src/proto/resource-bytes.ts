import { WIRE_LEN, WIRE_VARINT, WireError, decodeUtf8Strict, scanFields, varintSize, writeVarint } from './wire';

/** Field numbers of envoy.service.discovery.v3.Resource that the relay reads or rewrites. */
const RESOURCE_VERSION = 1;
const RESOURCE_ANY = 2;
const RESOURCE_NAME = 3;
const RESOURCE_TTL = 6;
const RESOURCE_CACHE_CONTROL = 7;

/**
 * An upstream `Resource`, read at the wire level. `body` is every field but
 * `name` and `ttl`, byte for byte, so a downstream copy can carry the client's
 * own spelling of the name and drop `ttl` for clients that don't understand it
 * without the payload ever being decoded.
 */
export interface SplitResource {
  /** The whole encoded `Resource`, untouched (what the cache stores and shares). */
  bytes: Buffer;
  name: string;
  version: string;
  /** False for a TTL heartbeat (a Resource with a version but no payload). */
  hasBody: boolean;
  /** type_url of the payload `Any`, '' when absent. */
  payloadType: string;
  /** The payload `Any` message itself (a view into the resource bytes), as SotW responses carry it. */
  payload: Buffer | undefined;
  ttlMs: number | undefined;
  doNotCache: boolean;
  body: Buffer;
  /** The encoded `ttl` field (tag included), kept for clients that support TTLs. */
  ttlField: Buffer | undefined;
}

function readDurationMs(buf: Uint8Array, start: number, end: number): number {
  let seconds = 0;
  let nanos = 0;
  scanFields(buf.subarray(start, end), (f) => {
    if (f.wireType !== WIRE_VARINT) return;
    if (f.field === 1) seconds = f.varint;
    else if (f.field === 2) nanos = f.varint;
  });
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

function readBool(buf: Uint8Array, start: number, end: number, fieldNo: number): boolean {
  let value = false;
  scanFields(buf.subarray(start, end), (f) => {
    if (f.field === fieldNo && f.wireType === WIRE_VARINT) value = f.varint !== 0;
  });
  return value;
}

function readAnyType(buf: Uint8Array, start: number, end: number): string {
  let typeUrl = '';
  scanFields(buf.subarray(start, end), (f) => {
    if (f.field === 1 && f.wireType === WIRE_LEN) typeUrl = decodeUtf8Strict(buf, start + f.valueStart, start + f.valueEnd, 'Resource.resource.type_url');
  });
  return typeUrl;
}

/** Throws WireError when the bytes are not a well-formed Resource (strings included: they must be UTF-8). */
export function splitResource(bytes: Buffer): SplitResource {
  const parts: SplitResource = {
    bytes,
    name: '',
    version: '',
    hasBody: false,
    payloadType: '',
    payload: undefined,
    ttlMs: undefined,
    doNotCache: false,
    body: bytes,
    ttlField: undefined,
  };
  const keep: Array<[number, number]> = [];
  scanFields(bytes, (f) => {
    const isLen = f.wireType === WIRE_LEN;
    switch (f.field) {
      case RESOURCE_NAME:
        if (!isLen) throw new WireError('Resource.name is not length-delimited');
        parts.name = decodeUtf8Strict(bytes, f.valueStart, f.valueEnd, 'Resource.name');
        return;
      case RESOURCE_TTL:
        if (!isLen) throw new WireError('Resource.ttl is not length-delimited');
        parts.ttlMs = readDurationMs(bytes, f.valueStart, f.valueEnd);
        parts.ttlField = Buffer.from(bytes.subarray(f.start, f.end));
        return;
      case RESOURCE_VERSION:
        if (isLen) parts.version = decodeUtf8Strict(bytes, f.valueStart, f.valueEnd, 'Resource.version');
        break;
      case RESOURCE_ANY:
        if (isLen) {
          parts.hasBody = true;
          parts.payload = bytes.subarray(f.valueStart, f.valueEnd);
          parts.payloadType = readAnyType(bytes, f.valueStart, f.valueEnd);
        }
        break;
      case RESOURCE_CACHE_CONTROL:
        if (isLen) parts.doNotCache = readBool(bytes, f.valueStart, f.valueEnd, 1);
        break;
    }
    keep.push([f.start, f.end]);
  });
  parts.body = Buffer.concat(keep.map(([s, e]) => bytes.subarray(s, e)));
  return parts;
}

/** A downstream copy of a resource: `name` (the spelling a client expects) + body [+ ttl]. */
export function assembleResource(name: string, body: Buffer, ttlField: Buffer | undefined): Buffer {
  const nameLen = Buffer.byteLength(name, 'utf8');
  const tag = RESOURCE_NAME * 8 + WIRE_LEN;
  const size = varintSize(tag) + varintSize(nameLen) + nameLen + body.length + (ttlField ? ttlField.length : 0);
  const out = Buffer.allocUnsafe(size);
  let pos = writeVarint(out, 0, tag);
  pos = writeVarint(out, pos, nameLen);
  pos += out.write(name, pos, 'utf8');
  pos += body.copy(out, pos);
  if (ttlField) ttlField.copy(out, pos);
  return out;
}
