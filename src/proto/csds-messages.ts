/**
 * The CSDS (envoy.service.status.v3) messages as plain objects, their codecs
 * and the service's method definitions. The protos (protos/envoy/service/status)
 * load on first use, so a relay nobody asks for status never parses them.
 */
import * as grpc from '@grpc/grpc-js';
import { rawMethod } from './ads-service';
import { CONVERSION, lazyCodec, type Any, type Codec, type Node } from './messages';
import { statusRoot } from './schema';

export const CSDS_SERVICE = 'envoy.service.status.v3.ClientStatusDiscoveryService';
export const FETCH_CLIENT_STATUS_PATH = `/${CSDS_SERVICE}/FetchClientStatus`;
export const STREAM_CLIENT_STATUS_PATH = `/${CSDS_SERVICE}/StreamClientStatus`;

export interface RegexMatcherMsg {
  regex?: string;
}

export interface StringMatcherMsg {
  exact?: string;
  prefix?: string;
  suffix?: string;
  safe_regex?: RegexMatcherMsg;
  contains?: string;
  ignore_case?: boolean;
}

export interface DoubleMatcherMsg {
  range?: { start?: number; end?: number };
  exact?: number;
}

export interface ValueMatcherMsg {
  null_match?: Record<string, never>;
  double_match?: DoubleMatcherMsg;
  string_match?: StringMatcherMsg;
  bool_match?: boolean;
  present_match?: boolean;
  list_match?: { one_of?: ValueMatcherMsg };
  or_match?: { value_matchers?: ValueMatcherMsg[] };
}

export interface StructMatcherMsg {
  path?: Array<{ key?: string }>;
  value?: ValueMatcherMsg;
}

export interface NodeMatcherMsg {
  node_id?: StringMatcherMsg;
  node_metadatas?: StructMatcherMsg[];
}

export interface ClientStatusRequest {
  node_matchers?: NodeMatcherMsg[];
  node?: Node;
  exclude_resource_contents?: boolean;
}

export interface Timestamp {
  seconds?: number;
  nanos?: number;
}

/** envoy.service.status.v3.ConfigStatus by name. */
export type ConfigStatusName = 'UNKNOWN' | 'SYNCED' | 'NOT_SENT' | 'STALE' | 'ERROR';
/** envoy.admin.v3.ClientResourceStatus by name. */
export type ClientResourceStatusName = 'UNKNOWN' | 'REQUESTED' | 'DOES_NOT_EXIST' | 'ACKED' | 'NACKED';

export interface UpdateFailureStateMsg {
  failed_configuration?: Any;
  last_update_attempt?: Timestamp;
  details?: string;
  version_info?: string;
}

export interface GenericXdsConfig {
  type_url?: string;
  name?: string;
  version_info?: string;
  xds_config?: Any;
  last_updated?: Timestamp;
  config_status?: ConfigStatusName;
  client_status?: ClientResourceStatusName;
  error_state?: UpdateFailureStateMsg;
  is_static_resource?: boolean;
}

export interface ClientConfig {
  node?: Node;
  generic_xds_configs?: GenericXdsConfig[];
  client_scope?: string;
}

export interface ClientStatusResponse {
  config?: ClientConfig[];
}

function statusCodec<T>(fullName: string): Codec<T> {
  // Enums as their names (SYNCED, ACKED…), which is what callers compare against.
  return lazyCodec<T>(() => statusRoot().lookupType(fullName), { ...CONVERSION, enums: String });
}

export const clientStatusRequestCodec = statusCodec<ClientStatusRequest>('envoy.service.status.v3.ClientStatusRequest');
export const clientStatusResponseCodec = statusCodec<ClientStatusResponse>('envoy.service.status.v3.ClientStatusResponse');

/**
 * Server side: raw bytes in and out, so the handler decodes the request itself
 * and answers a malformed one with INVALID_ARGUMENT instead of a generic error.
 */
export const csdsServiceDefinition: grpc.ServiceDefinition = {
  FetchClientStatus: rawMethod(FETCH_CLIENT_STATUS_PATH, false),
  StreamClientStatus: rawMethod(STREAM_CLIENT_STATUS_PATH, true),
};

/** Client side: typed messages through the codecs above. */
const csdsClientDefinition: grpc.ServiceDefinition = {
  FetchClientStatus: {
    path: FETCH_CLIENT_STATUS_PATH,
    requestStream: false,
    responseStream: false,
    requestSerialize: (m: ClientStatusRequest) => clientStatusRequestCodec.encode(m),
    requestDeserialize: (b: Buffer) => clientStatusRequestCodec.decode(b),
    responseSerialize: (m: ClientStatusResponse) => clientStatusResponseCodec.encode(m),
    responseDeserialize: (b: Buffer) => clientStatusResponseCodec.decode(b),
  },
  StreamClientStatus: {
    path: STREAM_CLIENT_STATUS_PATH,
    requestStream: true,
    responseStream: true,
    requestSerialize: (m: ClientStatusRequest) => clientStatusRequestCodec.encode(m),
    requestDeserialize: (b: Buffer) => clientStatusRequestCodec.decode(b),
    responseSerialize: (m: ClientStatusResponse) => clientStatusResponseCodec.encode(m),
    responseDeserialize: (b: Buffer) => clientStatusResponseCodec.decode(b),
  },
};

/** A CSDS client: `FetchClientStatus(request, callback)` and `StreamClientStatus()`. */
export interface CsdsClient extends grpc.Client {
  FetchClientStatus(
    request: ClientStatusRequest,
    options: grpc.CallOptions,
    callback: (err: grpc.ServiceError | null, response?: ClientStatusResponse) => void,
  ): grpc.ClientUnaryCall;
  StreamClientStatus(options?: grpc.CallOptions): grpc.ClientDuplexStream<ClientStatusRequest, ClientStatusResponse>;
}

const CsdsClientConstructor = grpc.makeGenericClientConstructor(csdsClientDefinition, CSDS_SERVICE);

export function createCsdsClient(target: string, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}): CsdsClient {
  // Status of a large fleet can exceed grpc-js' default 4 MiB receive limit.
  return new CsdsClientConstructor(target, credentials, { 'grpc.max_receive_message_length': 256 * 1024 * 1024, ...options }) as unknown as CsdsClient;
}
