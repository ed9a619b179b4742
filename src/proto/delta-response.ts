import { WIRE_LEN, WireError, decodeUtf8, lenFieldSize, putLen, scanFields } from './wire';

/** Field numbers of envoy.service.discovery.v3.DeltaDiscoveryResponse. */
const RESOURCES = 2;
const TYPE_URL = 4;
const NONCE = 5;
const REMOVED_RESOURCES = 6;
const RESOURCE_ERRORS = 9;
const NONE: readonly Buffer[] = [];

/** An upstream response with each `Resource` kept as its own copy of the original bytes. */
export interface ScannedDeltaResponse {
  typeUrl: string;
  nonce: string;
  resources: Buffer[];
  removed: string[];
}

export function scanDeltaResponse(bytes: Buffer): ScannedDeltaResponse {
  const out: ScannedDeltaResponse = { typeUrl: '', nonce: '', resources: [], removed: [] };
  scanFields(bytes, (f) => {
    if (f.wireType !== WIRE_LEN) {
      if (f.field === RESOURCES || f.field === TYPE_URL || f.field === NONCE || f.field === REMOVED_RESOURCES) {
        throw new WireError(`DeltaDiscoveryResponse field ${f.field} has the wrong wire type`);
      }
      return;
    }
    switch (f.field) {
      case RESOURCES:
        // A copy, so one retained resource doesn't pin the whole response buffer.
        out.resources.push(Buffer.from(bytes.subarray(f.valueStart, f.valueEnd)));
        break;
      case TYPE_URL:
        out.typeUrl = decodeUtf8(bytes, f.valueStart, f.valueEnd);
        break;
      case NONCE:
        out.nonce = decodeUtf8(bytes, f.valueStart, f.valueEnd);
        break;
      case REMOVED_RESOURCES:
        out.removed.push(decodeUtf8(bytes, f.valueStart, f.valueEnd));
        break;
    }
  });
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
  for (const r of resources) size += lenFieldSize(RESOURCES, r.length);
  const removedLens = removed.map((n) => Buffer.byteLength(n, 'utf8'));
  for (const len of removedLens) size += lenFieldSize(REMOVED_RESOURCES, len);
  for (const e of errors) size += lenFieldSize(RESOURCE_ERRORS, e.length);
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const r of resources) {
    pos = putLen(out, pos, RESOURCES, r.length);
    pos += r.copy(out, pos);
  }
  pos = putLen(out, pos, TYPE_URL, typeLen);
  pos += out.write(typeUrl, pos, 'utf8');
  pos = putLen(out, pos, NONCE, nonceLen);
  pos += out.write(nonce, pos, 'utf8');
  removed.forEach((name, i) => {
    pos = putLen(out, pos, REMOVED_RESOURCES, removedLens[i]);
    pos += out.write(name, pos, 'utf8');
  });
  for (const e of errors) {
    pos = putLen(out, pos, RESOURCE_ERRORS, e.length);
    pos += e.copy(out, pos);
  }
  return out;
}
