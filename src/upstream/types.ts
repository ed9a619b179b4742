import type { SplitResource } from '../proto/resource-bytes';

/** What an upstream reports of itself (admin /debug/upstreams, readiness). */
export interface UpstreamStatus {
  /** idle, connecting, ready, backoff, closed (a gRPC upstream); loading, ready, closed… (a file origin). */
  state: string;
  /** Subscribed names per type URL. */
  types: Record<string, number>;
  /** The server it talks to (gRPC upstreams). */
  target?: string;
  /** gRPC upstreams: names under suspicion of ending the stream, and names given up on (poison). */
  suspectNames?: number;
  rejectedNames?: number;
  /** gRPC upstreams: each configured server in failover order, with how it last fared. */
  servers?: UpstreamServerStatus[];
  /** File origins: the directory, its files and resources, files rejected with why. */
  dir?: string;
  files?: number;
  resources?: number;
  rejected?: Array<{ file: string; error: string }>;
}

/** Why a server last failed: a gRPC status code (UNAVAILABLE for a connection that never opened) and its message. */
export interface UpstreamError {
  code: number;
  /** The code's name, e.g. UNAVAILABLE. */
  codeName: string;
  message: string;
  /** ISO 8601. */
  at: string;
}

/** One server of an upstream, as /debug/upstreams shows it. */
export interface UpstreamServerStatus {
  target: string;
  /** The upstream's state for the server it is on; `standby` for the others. */
  state: string;
  lastError: UpstreamError | null;
  /** When a stream to it last opened (ISO 8601), or null. */
  lastConnected: string | null;
  /** When it last sent a response (ISO 8601), or null. */
  lastResponse: string | null;
}

/** What the subscription engine needs from an upstream: named subscriptions, batched by the upstream itself. */
export interface UpstreamPort {
  /** The authority it speaks for; null for the default upstream (legacy names). */
  readonly authority: string | null;
  /** Human-readable name for logs and metric labels. */
  readonly label: string;
  readonly connected: boolean;
  subscribe(typeUrl: string, name: string): void;
  /**
   * True when the unsubscribe goes out later (with the upstream's next
   * batch, or as a new stream starts without the name): the sink's
   * onUnsubscribed says when. Until then the control plane still serves the
   * name, and a subscribe takes the unsubscribe back.
   */
  unsubscribe(typeUrl: string, name: string): boolean;
  /** Asks again for a name already subscribed (its content was not cacheable). */
  refetch(typeUrl: string, name: string): void;
  /**
   * Whether a response received at `receivedAt` (process.hrtime.bigint())
   * can be the answer to collection `name`: its subscription had gone out,
   * on the stream that is still open, before it arrived. A response that
   * crossed the request on the wire was sent for something else.
   */
  canAnswer(typeUrl: string, name: string, receivedAt: bigint): boolean;
  subscriptionCount(): number;
}

/** A resource the control plane reported it cannot serve (`resource_errors`). */
export interface UpstreamResourceError {
  name: string;
  /** google.rpc.Code */
  code: number;
  message: string;
}

/** One upstream response that passed the checks (see response-check.ts), as the relay applies it. */
export interface UpstreamUpdate {
  typeUrl: string;
  /** Each an envoy `Resource` the checks split (its bytes untouched): the engine uses them as they are. */
  resources: SplitResource[];
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
   * the engine answers their clients as removed.
   */
  onRejectedNames(upstream: UpstreamPort, typeUrl: string, names: string[]): void;
  /** Unsubscribes the upstream deferred (see UpstreamPort.unsubscribe) have gone out: the control plane no longer serves these names. */
  onUnsubscribed(upstream: UpstreamPort, typeUrl: string, names: readonly string[]): void;
  /**
   * Whether a control plane has answered `name` (its content, or that it does
   * not exist, is known): such a name is never rejected as poison.
   */
  hasServed(typeUrl: string, name: string): boolean;
}
