import type * as protobuf from 'protobufjs';
import { transportType } from './schema';

/**
 * Plain-object shapes of the transport messages as protobufjs decodes them with
 * `keepCase` (snake_case field names, bytes as Buffer, 64-bit ints as numbers).
 */
export interface Any {
  type_url: string;
  value: Uint8Array;
}

export interface Duration {
  seconds?: number | string;
  nanos?: number;
}

export interface RpcStatus {
  code?: number;
  message?: string;
  details?: Any[];
}

export interface Locality {
  region?: string;
  zone?: string;
  sub_zone?: string;
}

export interface Node {
  id?: string;
  cluster?: string;
  /** google.protobuf.Struct in protobufjs' object form. */
  metadata?: { fields?: Record<string, unknown> };
  locality?: Locality;
  user_agent_name?: string;
  user_agent_version?: string;
  /** envoy.config.core.v3.BuildVersion in protobufjs' object form. */
  user_agent_build_version?: object;
  /** envoy.config.core.v3.Extension in protobufjs' object form, one per extension. */
  extensions?: readonly object[];
  client_features?: readonly string[];
}

export interface DeltaDiscoveryRequest {
  node?: Node;
  type_url?: string;
  resource_names_subscribe?: string[];
  resource_names_unsubscribe?: string[];
  initial_resource_versions?: Record<string, string>;
  response_nonce?: string;
  error_detail?: RpcStatus;
}

export interface Resource {
  version?: string;
  resource?: Any;
  name?: string;
  aliases?: string[];
  ttl?: Duration;
  cache_control?: { do_not_cache?: boolean };
}

export interface DeltaDiscoveryResponse {
  system_version_info?: string;
  resources?: Resource[];
  type_url?: string;
  nonce?: string;
  removed_resources?: string[];
  control_plane?: { identifier?: string };
  removed_resource_names?: ResourceName[];
  resource_errors?: ResourceError[];
}

export interface ResourceName {
  name?: string;
}

export interface ResourceError {
  resource_name?: ResourceName;
  error_detail?: RpcStatus;
}

export interface Codec<T> {
  encode(message: T): Buffer;
  /** Throws on bytes that are not a valid encoding of the message. */
  decode(bytes: Uint8Array): T;
}

export const CONVERSION: protobuf.IConversionOptions = {
  longs: Number,
  defaults: false,
  arrays: true,
  objects: true,
};

/** A codec over a protobufjs type resolved on first use (`conversion` shapes decoded objects). */
export function lazyCodec<T>(resolve: () => protobuf.Type, conversion: protobuf.IConversionOptions = CONVERSION): Codec<T> {
  let type: protobuf.Type | undefined;
  const lookup = (): protobuf.Type => (type ??= resolve());
  return {
    encode(message: T): Buffer {
      const t = lookup();
      const bytes = t.encode(t.fromObject(message as Record<string, unknown>)).finish();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    decode(bytes: Uint8Array): T {
      const t = lookup();
      return t.toObject(t.decode(bytes), conversion) as T;
    },
  };
}

function codecFor<T>(fullName: string): Codec<T> {
  return lazyCodec<T>(() => transportType(fullName));
}

export const deltaRequestCodec = codecFor<DeltaDiscoveryRequest>(
  'envoy.service.discovery.v3.DeltaDiscoveryRequest',
);
export const deltaResponseCodec = codecFor<DeltaDiscoveryResponse>(
  'envoy.service.discovery.v3.DeltaDiscoveryResponse',
);
export const resourceCodec = codecFor<Resource>('envoy.service.discovery.v3.Resource');
export const nodeCodec = codecFor<Node>('envoy.config.core.v3.Node');

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
  control_plane?: { identifier?: string };
  resource_errors?: ResourceError[];
}

export const discoveryRequestCodec = codecFor<DiscoveryRequest>('envoy.service.discovery.v3.DiscoveryRequest');
export const discoveryResponseCodec = codecFor<DiscoveryResponse>('envoy.service.discovery.v3.DiscoveryResponse');
