/**
 * Where the two client protocols differ in how a request is read. A
 * SubscriptionState is built with its protocol's rules (chosen by its
 * response builder) and applies them itself, so the streams only decode
 * requests, hand them to the state and send what it produces.
 */

export type Protocol = 'delta' | 'sotw';

export const LISTENER_TYPE = 'type.googleapis.com/envoy.config.listener.v3.Listener';
export const CLUSTER_TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';

/** Types whose initial request without names means "everything" (legacy wildcard), and whose SotW responses carry the full state. */
export const LEGACY_WILDCARD_TYPES: ReadonlySet<string> = new Set([LISTENER_TYPE, CLUSTER_TYPE]);

export interface ProtocolRules {
  /** Whether every response for `typeUrl` carries the client's whole state of the world (not only what changed). */
  sendsWholeWorld(typeUrl: string): boolean;
  /** Whether a request answering the response `nonce` is acted on, `lastNonce` being the last one sent. */
  answerCounts(nonce: string, lastNonce: string): boolean;
  /**
   * Whether a request for `typeUrl` that names nothing (and unsubscribes
   * nothing) is the legacy wildcard: `first`, it is the first request for
   * the type; `namedBefore`, an earlier request named a resource.
   */
  readsAsWildcard(typeUrl: string, first: boolean, namedBefore: boolean): boolean;
  /**
   * Whether a name the client stops asking for while one of its collections
   * still covers it is answered: sent again if it exists, else reported
   * removed, so the client knows whether to keep it.
   */
  readonly answersDroppedCoveredName: boolean;
}

/**
 * Incremental (delta) xDS: an ACK or NACK counts whatever response it
 * answers, and only the first request of a Listener or Cluster stream naming
 * nothing is the legacy wildcard. It lasts until `*` is explicitly
 * unsubscribed; naming more resources later adds to it
 * (docs/subscription-semantics.md).
 */
export const DELTA_RULES: ProtocolRules = {
  sendsWholeWorld: () => false,
  answerCounts: () => true,
  readsAsWildcard: (typeUrl, first) => first && LEGACY_WILDCARD_TYPES.has(typeUrl),
  answersDroppedCoveredName: true,
};

/**
 * State of the world: a request answering an older response is stale (a
 * newer response is on its way, and the client's answer to that carries its
 * current list); an empty list is the legacy wildcard only on a Listener or
 * Cluster type that never named anything; Listener and Cluster responses
 * carry the whole state. A list that only drops names gets no answer: the
 * client keeps what its collections still cover, as it holds it (a state it
 * rejected stands).
 */
export const SOTW_RULES: ProtocolRules = {
  sendsWholeWorld: (typeUrl) => LEGACY_WILDCARD_TYPES.has(typeUrl),
  answerCounts: (nonce, lastNonce) => nonce === lastNonce,
  readsAsWildcard: (typeUrl, _first, namedBefore) => !namedBefore && LEGACY_WILDCARD_TYPES.has(typeUrl),
  answersDroppedCoveredName: false,
};

export function rulesFor(protocol: Protocol): ProtocolRules {
  return protocol === 'delta' ? DELTA_RULES : SOTW_RULES;
}
