import { lenFieldSize, putLen } from './wire';

/** Field numbers of envoy.service.discovery.v3.DiscoveryResponse. */
const VERSION_INFO = 1;
const RESOURCES = 2;
const TYPE_URL = 4;
const NONCE = 5;
const RESOURCE_ERRORS = 7;

/**
 * Encodes a state-of-the-world DiscoveryResponse from the payload `Any`s of
 * cached resources (never decoded) in one allocation, once per distinct
 * response. `errors` are encoded `ResourceError` messages.
 */
export function encodeSotwResponse(
  typeUrl: string,
  versionInfo: string,
  payloads: readonly Buffer[],
  nonce: string,
  errors: readonly Buffer[],
): Buffer {
  const versionLen = Buffer.byteLength(versionInfo, 'utf8');
  const typeLen = Buffer.byteLength(typeUrl, 'utf8');
  const nonceLen = Buffer.byteLength(nonce, 'utf8');
  let size = lenFieldSize(VERSION_INFO, versionLen) + lenFieldSize(TYPE_URL, typeLen) + lenFieldSize(NONCE, nonceLen);
  for (const p of payloads) size += lenFieldSize(RESOURCES, p.length);
  for (const e of errors) size += lenFieldSize(RESOURCE_ERRORS, e.length);
  const out = Buffer.allocUnsafe(size);
  let pos = putLen(out, 0, VERSION_INFO, versionLen);
  pos += out.write(versionInfo, pos, 'utf8');
  for (const p of payloads) {
    pos = putLen(out, pos, RESOURCES, p.length);
    pos += p.copy(out, pos);
  }
  pos = putLen(out, pos, TYPE_URL, typeLen);
  pos += out.write(typeUrl, pos, 'utf8');
  pos = putLen(out, pos, NONCE, nonceLen);
  pos += out.write(nonce, pos, 'utf8');
  for (const e of errors) {
    pos = putLen(out, pos, RESOURCE_ERRORS, e.length);
    pos += e.copy(out, pos);
  }
  return out;
}
