/**
 * Asking a relay for client status (CSDS) from tests, over real gRPC.
 */
import {
  createCsdsClient,
  type ClientConfig,
  type ClientStatusRequest,
  type ClientStatusResponse,
  type GenericXdsConfig,
} from '../../src/proto/csds-messages';
import * as grpc from '@grpc/grpc-js';
import { pollUntil } from './admin';

/** FetchClientStatus once; rejects with the gRPC error. */
export function fetchStatus(address: string, request: ClientStatusRequest = {}): Promise<ClientStatusResponse> {
  const client = createCsdsClient(address);
  return new Promise<ClientStatusResponse>((resolve, reject) => {
    client.FetchClientStatus(request, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res ?? {})));
  }).finally(() => client.close());
}

/** The gRPC status a FetchClientStatus call fails with. */
export async function fetchStatusError(address: string, request: ClientStatusRequest): Promise<grpc.ServiceError> {
  try {
    await fetchStatus(address, request);
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error('FetchClientStatus succeeded; expected an error');
}

/** The client streams (not upstream entries) of a node id. */
export function streamsOf(res: ClientStatusResponse, nodeId: string): ClientConfig[] {
  return (res.config ?? []).filter((c) => c.node?.id === nodeId && (c.client_scope ?? '').startsWith('stream/'));
}

/** The one GenericXdsConfig of `name` in the one stream of `nodeId`. */
export function entryOf(res: ClientStatusResponse, nodeId: string, typeUrl: string, name: string): GenericXdsConfig | undefined {
  const streams = streamsOf(res, nodeId);
  if (streams.length !== 1) return undefined;
  const found = (streams[0]!.generic_xds_configs ?? []).filter((g) => g.type_url === typeUrl && g.name === name);
  if (found.length > 1) throw new Error(`${nodeId}: ${found.length} entries for ${name}`);
  return found[0];
}

/** Asks again until `check` returns something (ACKs travel asynchronously); bounded. */
export function statusUntil<T>(
  address: string,
  check: (res: ClientStatusResponse) => T | undefined | false | null,
  what: string,
  request: ClientStatusRequest = {},
): Promise<T> {
  let last: ClientStatusResponse | undefined;
  return pollUntil(async () => check((last = await fetchStatus(address, request))), what, 5000).catch((err: Error) => {
    throw new Error(`${err.message}\nlast answer: ${JSON.stringify(summary(last))}`);
  });
}

/** A compact view for failure messages: scope → [name, version, config/client status]. */
export function summary(res: ClientStatusResponse | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of res?.config ?? []) {
    out[`${c.client_scope} (${c.node?.id ?? ''})`] = (c.generic_xds_configs ?? []).map(
      (g) => `${g.name}@${g.version_info ?? ''} ${g.config_status}/${g.client_status}${g.error_state ? ` error ${g.error_state.version_info}: ${g.error_state.details}` : ''}`,
    );
  }
  return out;
}
