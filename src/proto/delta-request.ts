import { putString } from './field-writers';
import { DELTA_COMMON } from './requests';
import { lenFieldSize } from './wire';

const { typeUrl: TYPE_URL, nonce: RESPONSE_NONCE } = DELTA_COMMON;

/**
 * The DeltaDiscoveryRequest that ACKs an upstream response: `type_url` and
 * `response_nonce`, nothing else. Written by hand into one allocation,
 * without protobufjs' object conversion: the relay sends one per upstream
 * response.
 */
export function encodeDeltaAck(typeUrl: string, nonce: string): Buffer {
  const typeLen = Buffer.byteLength(typeUrl, 'utf8');
  const nonceLen = Buffer.byteLength(nonce, 'utf8');
  const out = Buffer.allocUnsafe(lenFieldSize(TYPE_URL, typeLen) + lenFieldSize(RESPONSE_NONCE, nonceLen));
  putString(out, putString(out, 0, TYPE_URL, typeUrl, typeLen), RESPONSE_NONCE, nonce, nonceLen);
  return out;
}
