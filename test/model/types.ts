/**
 * The vocabulary shared by the reference model (model.ts) and the checker that
 * drives the real relay (checker/). A run is a list of Steps: plain data, so a
 * failing run can be printed, shrunk and pasted into a regression test.
 *
 * Names are spelled exactly as the client sends them (any parameter order,
 * percent-encoding, …); the model canonicalizes with test/support/names.ts,
 * never with the relay's own code.
 */

export type Protocol = 'delta' | 'sotw';

/** The control plane an upstream resource lives on: an xdstp authority, or null for the default upstream (legacy names). */
export type Authority = string | null;

export type Step =
  /** A client opens a stream (node id = `client`). */
  | { op: 'connect'; client: string; protocol: Protocol }
  /**
   * One request changing subscriptions of one type. Delta: resource_names_subscribe /
   * _unsubscribe in one request. SotW: the client's list becomes (list ∪ subscribe) ∖ unsubscribe.
   * Both empty on a client's first request of a Listener/Cluster type = the legacy wildcard.
   */
  | { op: 'request'; client: string; typeUrl: string; subscribe: string[]; unsubscribe: string[] }
  /** The client rejects (NACKs) the next response of `typeUrl` it receives; see Model.noteNack. */
  | { op: 'nackNext'; client: string; typeUrl: string }
  /** The client stops reading (flow control) / reads again. */
  | { op: 'stall'; client: string }
  | { op: 'resume'; client: string }
  /**
   * The client's stream ends and a new one opens with the same node id and the
   * same subscriptions; delta clients send initial_resource_versions of what
   * they hold (`omitGlobMembers`: like Envoy, leave out names held through a glob).
   */
  | { op: 'reconnect'; client: string; omitGlobMembers: boolean }
  /** The client goes away for good. */
  | { op: 'disconnect'; client: string }
  /** The control plane creates or updates a resource (versions only grow per name). */
  | { op: 'put'; authority: Authority; typeUrl: string; name: string; version: string }
  | { op: 'delete'; authority: Authority; typeUrl: string; name: string }
  /** Control-plane process faults: stop, start, a restart (`times` restarts `gapMs` apart), failover to the authority's other server. */
  | { op: 'cpStop'; authority: Authority }
  | { op: 'cpStart'; authority: Authority }
  | { op: 'cpRestart'; authority: Authority; times: number; gapMs: number }
  | { op: 'failover'; authority: Authority }
  /**
   * Relay and shared tier faults (runs with Redis only). Such runs have two
   * relays on one Redis; a client connects to relay 0. `moveClient` moves a
   * client to the other relay (a new stream there, same subscriptions);
   * `relayRestart` restarts relay 0, and each client on it opens a new stream
   * with the same subscriptions (clients on relay 1 are untouched).
   */
  | { op: 'relayRestart'; upstreamDownFirst: boolean }
  | { op: 'moveClient'; client: string }
  | { op: 'redisRestartEmpty' }
  /** Let time pass (e.g. past the unsubscribe grace). */
  | { op: 'wait'; ms: number };

export interface ModelOptions {
  /** Listener/Cluster in SotW carry the full state of the world; every other type is per name. */
  fullStateTypes: ReadonlySet<string>;
  /** Types whose empty first request means the legacy wildcard. */
  legacyWildcardTypes: ReadonlySet<string>;
  /** Authorities the relay has an upstream for (others are refused); whether a default upstream exists. */
  authorities: ReadonlySet<string>;
  hasDefaultUpstream: boolean;
}

/**
 * What the relay owes each client, computed from the steps alone.
 * Only these members are part of the contract between the model and the checker.
 */
export interface ReferenceModel {
  apply(step: Step): void;
  /**
   * A NACK the checker observed: `client` rejected `version` of `name`; it keeps
   * `kept` (undefined: nothing) until the control plane changes that resource.
   */
  noteNack(client: string, typeUrl: string, name: string, version: string, kept: string | undefined): void;
  /** Clients with an open stream. */
  clients(): string[];
  /** Types `client` has sent a request for. */
  typesOf(client: string): string[];
  /** What `client` must hold of `typeUrl` at a quiet point: name as the client knows it → version. */
  expected(client: string, typeUrl: string): Map<string, string>;
  /**
   * Whether `client` may be told `name` was removed now: true only if it does not
   * exist upstream or none of the client's subscriptions covers it.
   */
  mayRemove(client: string, typeUrl: string, name: string): boolean;
  /** Whether one of the client's subscriptions covers `name` (the relay may send it). */
  covers(client: string, typeUrl: string, name: string): boolean;
  /**
   * SotW per-name types (not Listener/Cluster): whether `name` may stay in the
   * client's view although `expected()` lacks it — received earlier, since
   * deleted or no longer asked for; SotW cannot say "removed". Always false for
   * delta clients and full-state types, whose views must equal `expected()`.
   */
  mayLinger(client: string, typeUrl: string, name: string): boolean;
  /**
   * What the relay must hold subscribed upstream once the grace has passed:
   * `${typeUrl}\n${name}` with xdstp names canonical and legacy names verbatim.
   */
  upstreamKeys(authority: Authority): Set<string>;
}
