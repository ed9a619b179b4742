/**
 * State-of-the-world ADS messages (DiscoveryRequest / DiscoveryResponse) for
 * the test-only SotW server, encoded with protobufjs from the repository's own
 * transport protos (src/proto/schema.ts), the way src/proto/messages.ts does
 * it for delta.
 */
import * as grpc from '@grpc/grpc-js';
import { SOTW_ADS_PATH } from '../../src/proto/ads-service';
import type { Any, Node, RpcStatus } from '../../src/proto/messages';
import { transportType } from '../../src/proto/schema';

export interface DiscoveryRequest {
  version_info?: string;
  node?: Node;
  resource_names?: string[];
  type_url?: string;
  response_nonce?: string;
  error_detail?: RpcStatus;
}

export interface DiscoveryResponse {
  version_info?: string;
  resources?: Any[];
  type_url?: string;
  nonce?: string;
}

const CONVERSION = { longs: Number, defaults: false, arrays: true, objects: true };

function codec<T extends object>(fullName: string): { encode(m: T): Buffer; decode(b: Uint8Array): T } {
  return {
    encode(m: T): Buffer {
      const t = transportType(fullName);
      const bytes = t.encode(t.fromObject(m as Record<string, unknown>)).finish();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    decode(b: Uint8Array): T {
      const t = transportType(fullName);
      return t.toObject(t.decode(b), CONVERSION) as T;
    },
  };
}

export const sotwRequestCodec = codec<DiscoveryRequest>('envoy.service.discovery.v3.DiscoveryRequest');
export const sotwResponseCodec = codec<DiscoveryResponse>('envoy.service.discovery.v3.DiscoveryResponse');

const passBytes = (b: Buffer): Buffer => b;

/** StreamAggregatedResources with raw-bytes (de)serializers. */
export const sotwAdsServiceDefinition: grpc.ServiceDefinition = {
  StreamAggregatedResources: {
    path: SOTW_ADS_PATH,
    requestStream: true,
    responseStream: true,
    requestSerialize: passBytes,
    requestDeserialize: passBytes,
    responseSerialize: passBytes,
    responseDeserialize: passBytes,
  },
};
