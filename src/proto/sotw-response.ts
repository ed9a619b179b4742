import { putRepeatedBytes, putString, repeatedBytesSize } from './field-writers';
import { allocPrefixed } from './message-frame';
import { lenFieldSize } from './wire';

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
  size += repeatedBytesSize(RESOURCES, payloads) + repeatedBytesSize(RESOURCE_ERRORS, errors);
  const out = allocPrefixed(size); // framed for the wire without a copy (message-frame.ts)
  let pos = putString(out, 0, VERSION_INFO, versionInfo, versionLen);
  pos = putRepeatedBytes(out, pos, RESOURCES, payloads);
  pos = putString(out, pos, TYPE_URL, typeUrl, typeLen);
  pos = putString(out, pos, NONCE, nonce, nonceLen);
  putRepeatedBytes(out, pos, RESOURCE_ERRORS, errors);
  return out;
}
