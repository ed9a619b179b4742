import { resourceCodec, type Resource } from '../proto/messages';
import { envoyTypes } from '../typed-json/envoy-types';

/** Turns a payload `Any` into JSON: `{"@type": typeUrl, ...fields}`, or its bytes as base64 when the type is unknown. */
export type PayloadDecoder = (typeUrl: string, value: Uint8Array) => Record<string, unknown>;

/** The payload as bytes, for types no registry knows (or when the registry is not installed). */
export function opaquePayload(typeUrl: string, value: Uint8Array): Record<string, unknown> {
  return { '@type': typeUrl, bytes: value.length, value: Buffer.from(value).toString('base64') };
}

/**
 * Decodes with Envoy's type registry (loaded lazily, on the first debug dump
 * that asks; never on the hot path). Without `@grpc/grpc-js-xds` installed,
 * every payload is shown as type URL, size and base64.
 */
export function envoyPayloadDecoder(): PayloadDecoder {
  return (typeUrl, value) => {
    let decoded: Record<string, unknown>;
    try {
      decoded = envoyTypes().decodeAny(typeUrl, value);
    } catch {
      return opaquePayload(typeUrl, value);
    }
    // Unknown to the registry: it answers base64 `value`; add the size like the fallback does.
    if (typeof decoded.value === 'string' && Object.keys(decoded).every((k) => k === '@type' || k === 'value' || k === 'error')) {
      return { ...decoded, bytes: value.length };
    }
    return decoded;
  };
}

/** What a cached `Resource` says besides its payload, and the payload decoded. */
export interface DecodedResource {
  aliases?: string[];
  ttl?: string;
  payload: Record<string, unknown> | null;
}

export function decodeResource(bytes: Buffer, decode: PayloadDecoder): DecodedResource {
  let r: Resource;
  try {
    r = resourceCodec.decode(bytes);
  } catch (err) {
    return { payload: { error: `undecodable Resource: ${(err as Error).message}`, value: bytes.toString('base64') } };
  }
  const out: DecodedResource = { payload: r.resource ? decode(r.resource.type_url, r.resource.value) : null };
  if (r.aliases && r.aliases.length > 0) out.aliases = r.aliases;
  if (r.ttl) out.ttl = `${Number(r.ttl.seconds ?? 0) + (r.ttl.nanos ?? 0) / 1e9}s`;
  return out;
}
