/**
 * The Client Status Discovery Service (envoy.service.status.v3): what every
 * client of this relay holds, per name, and how that stands against what the
 * relay has — plus the relay's own view of each upstream authority, so a chain
 * of relays can be walked. Reads a StatusSource; changes nothing.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log';
import { WarnLimiter } from '../log-limit';
import {
  clientStatusRequestCodec,
  clientStatusResponseCodec,
  csdsServiceDefinition,
  type ClientConfig,
  type ClientStatusRequest,
  type ClientStatusResponse,
  type GenericXdsConfig,
  type Timestamp,
} from '../proto/csds-messages';
import type { Any } from '../proto/messages';
import { WIRE_LEN, scanFields } from '../proto/wire';
import { compileNodeMatchers, NodeMatcherError } from './node-match';
import type { ResourceStatus, StatusClient, StatusSource } from './status-source';

/** Above this many matched clients, payloads are left out whatever the request says. */
export const MAX_CLIENTS_WITH_CONTENTS = 100;

/** Field numbers: envoy.service.discovery.v3.Resource.resource, google.protobuf.Any.{type_url,value}. */
const RESOURCE_ANY = 2;
const ANY_TYPE_URL = 1;
const ANY_VALUE = 2;

export function timestampOf(ms: number): Timestamp {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** The payload `Any` (field 2) of an encoded Resource; undefined when it has none or is malformed. */
export function payloadOf(resource: Buffer): Any | undefined {
  try {
    let any: Any | undefined;
    scanFields(resource, (f) => {
      if (f.field !== RESOURCE_ANY || f.wireType !== WIRE_LEN) return;
      const body = resource.subarray(f.valueStart, f.valueEnd);
      const out: Any = { type_url: '', value: Buffer.alloc(0) };
      scanFields(body, (g) => {
        if (g.wireType !== WIRE_LEN) return;
        if (g.field === ANY_TYPE_URL) out.type_url = body.toString('utf8', g.valueStart, g.valueEnd);
        else if (g.field === ANY_VALUE) out.value = body.subarray(g.valueStart, g.valueEnd);
      });
      any = out;
    });
    return any;
  } catch {
    return undefined;
  }
}

export function toGenericXdsConfig(r: ResourceStatus): GenericXdsConfig {
  const out: GenericXdsConfig = { type_url: r.typeUrl, name: r.name, config_status: r.configStatus, client_status: r.clientStatus };
  // protobufjs would put an empty string on the wire; proto3 leaves defaults out.
  if (r.version !== '') out.version_info = r.version;
  if (r.resource) {
    const any = payloadOf(r.resource);
    if (any) out.xds_config = any;
  }
  if (r.lastUpdated !== undefined) out.last_updated = timestampOf(r.lastUpdated);
  if (r.error) {
    out.error_state = { version_info: r.error.version, details: r.error.details, last_update_attempt: timestampOf(r.error.at) };
  }
  return out;
}

export function toClientConfig(client: StatusClient, includeContents: boolean): ClientConfig {
  const out: ClientConfig = {
    client_scope: client.scope,
    generic_xds_configs: client.resources(includeContents).map(toGenericXdsConfig),
  };
  if (client.node) out.node = client.node;
  return out;
}

/**
 * One ClientConfig per matched StatusClient, in the source's order.
 * Throws NodeMatcherError for a malformed matcher.
 */
export function buildClientStatusResponse(source: StatusSource, request: ClientStatusRequest): ClientStatusResponse {
  const matches = compileNodeMatchers(request.node_matchers);
  const selected: StatusClient[] = [];
  for (const c of source.clients()) if (matches(c.node)) selected.push(c);
  const includeContents = request.exclude_resource_contents !== true && selected.length <= MAX_CLIENTS_WITH_CONTENTS;
  return { config: selected.map((c) => toClientConfig(c, includeContents)) };
}

export type CsdsCall = grpc.ServerUnaryCall<Buffer, Buffer> | grpc.ServerDuplexStream<Buffer, Buffer>;

export interface CsdsServiceOptions {
  source: StatusSource;
  logger: Logger;
  /** Repeated refusals are summarized at most this often (default 10 s). */
  logRepeatIntervalMs?: number;
  /**
   * The security policy plugs in here: return false to refuse a caller
   * (answered PERMISSION_DENIED). Asked once per request, with the decoded
   * request (its `node` is the caller's own node, for node-id identities).
   * Absent: everyone may call, as without a policy.
   */
  authorize?: (call: CsdsCall, request: ClientStatusRequest) => boolean;
  /**
   * Fleet-wide status (src/fleet/): requests for which `wants` is true are
   * answered by `answer` instead, after the same authorization. Absent: every
   * request is answered by this relay alone.
   */
  fleet?: {
    wants(request: ClientStatusRequest): boolean;
    /** `deadlineMs`: when the caller stops waiting (ms since the epoch), if it said. */
    answer(request: ClientStatusRequest, deadlineMs?: number): Promise<ClientStatusResponse>;
  };
}

interface Failure {
  code: grpc.status;
  details: string;
}

function failureOf(opts: CsdsServiceOptions, call: CsdsCall, err: unknown): Failure {
  if (err instanceof NodeMatcherError) return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
  opts.logger.error({ err, peer: call.getPeer() }, 'failed to build a CSDS response');
  return { code: grpc.status.INTERNAL, details: 'internal error while building the client status' };
}

/** Decodes, authorizes and answers one request: the encoded response, or why not (later, for a fleet request). */
function answer(opts: CsdsServiceOptions, warnings: WarnLimiter, call: CsdsCall, bytes: Buffer): Buffer | Failure | Promise<Buffer | Failure> {
  let request: ClientStatusRequest;
  try {
    request = clientStatusRequestCodec.decode(bytes);
  } catch (err) {
    return { code: grpc.status.INVALID_ARGUMENT, details: `undecodable ClientStatusRequest: ${(err as Error).message}` };
  }
  if (opts.authorize && !opts.authorize(call, request)) {
    warnings.warn('csds refused', { peer: call.getPeer() }, 'CSDS request refused by policy');
    return { code: grpc.status.PERMISSION_DENIED, details: 'not allowed to read client status (CSDS)' };
  }
  if (opts.fleet?.wants(request)) {
    const deadline = call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number.isFinite(deadline) ? deadline : undefined;
    return opts.fleet.answer(request, deadlineMs).then(
      (response) => {
        opts.logger.debug({ peer: call.getPeer(), entries: response.config?.length ?? 0 }, 'fleet CSDS request answered');
        return clientStatusResponseCodec.encode(response);
      },
      (err: unknown) => failureOf(opts, call, err),
    );
  }
  try {
    const response = buildClientStatusResponse(opts.source, request);
    opts.logger.debug({ peer: call.getPeer(), clients: response.config?.length ?? 0 }, 'CSDS request answered');
    return clientStatusResponseCodec.encode(response);
  } catch (err) {
    return failureOf(opts, call, err);
  }
}

/** The CSDS service definition and handlers for grpc.Server#addService. */
export function createCsdsService(opts: CsdsServiceOptions): {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
} {
  // One caller can send any number of refused requests: warnings bounded by time.
  const warnings = new WarnLimiter(opts.logger, opts.logRepeatIntervalMs);
  const fetch = (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>): void => {
    const reply = (out: Buffer | Failure): void => {
      if (Buffer.isBuffer(out)) callback(null, out);
      else callback({ code: out.code, details: out.details, metadata: new grpc.Metadata() });
    };
    const out = answer(opts, warnings, call, call.request);
    if (out instanceof Promise) void out.then(reply);
    else reply(out);
  };
  const stream = (call: grpc.ServerDuplexStream<Buffer, Buffer>): void => {
    let ended = false;
    // Answers leave in request order: a fleet request's answer comes later, and the ones after it wait.
    let previous: Promise<void> | undefined;
    const send = (out: Buffer | Failure): void => {
      if (ended) return;
      if (Buffer.isBuffer(out)) {
        call.write(out);
        return;
      }
      ended = true;
      // grpc-js turns an 'error' emitted on a server stream into the call's final status.
      call.emit('error', { code: out.code, details: out.details, metadata: new grpc.Metadata() });
    };
    call.on('data', (bytes: Buffer) => {
      if (ended) return;
      const out = answer(opts, warnings, call, bytes);
      if (previous === undefined && !(out instanceof Promise)) {
        send(out);
        return;
      }
      const mine: Promise<void> = Promise.all([previous, out]).then(([, o]) => send(o));
      previous = mine;
      void mine.then(() => {
        if (previous === mine) previous = undefined;
      });
    });
    call.on('end', () => {
      const finish = (): void => {
        if (!ended) call.end();
        ended = true;
      };
      if (previous) void previous.then(finish);
      else finish();
    });
    call.on('error', () => {
      ended = true;
    });
  };
  return {
    definition: csdsServiceDefinition,
    implementation: { FetchClientStatus: fetch, StreamClientStatus: stream },
  };
}
