import type { UpstreamPort } from '../hub/types';

/** One entry of a response's `resource_errors`: the control plane cannot serve `name` right now (or at all). */
export interface UpstreamResourceError {
  name: string;
  /** gRPC status code from `error_detail` (google.rpc.Status.code). */
  code: number;
  message: string;
}

/** One upstream response that passed the checks (see response-check.ts), as the relay applies it. */
export interface UpstreamUpdate {
  typeUrl: string;
  /** Each an encoded envoy `Resource`, bytes untouched. */
  resources: Buffer[];
  /** `removed_resources` (6) plus the names of `removed_resource_names` (8), each once. */
  removed: string[];
  /** `resource_errors` (9). */
  errors: UpstreamResourceError[];
  /** process.hrtime.bigint() at receipt. */
  receivedAt: bigint;
}

/** What an upstream hands back to the relay. */
export interface UpstreamSink {
  onResponse(upstream: UpstreamPort, update: UpstreamUpdate): void;
  /** initial_resource_versions for a (re)subscription, from the cache. */
  versionsFor(typeUrl: string, names: Iterable<string>): Record<string, string>;
  /**
   * Names the control plane cannot take (poison): subscribing them ends the
   * stream. The upstream has already dropped them from its subscription set;
   * the hub answers their clients as removed.
   */
  onRejectedNames(upstream: UpstreamPort, typeUrl: string, names: string[]): void;
}
