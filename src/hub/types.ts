import type { CacheEntry } from '../cache/memory-cache';
import type { ResourceErrorInfo } from '../proto/resource-error';
import type { FanOut } from './fan-out';
import type { Subscription } from './subscription';

/** The spellings one watcher used for one key: usually one string, an array when it used several. */
export type Spellings = string | readonly string[];

/**
 * A party interested in keys (one client stream's state for one type URL).
 * The engine hands it entry changes — never bytes or nonces; what to send
 * and how to encode it is the watcher's business.
 */
export interface Watcher {
  readonly typeUrl: string;
  /** Who the client is, for authorization on join (undefined = unknown). */
  readonly identity: string | undefined;
  /**
   * `entry` is the current content of a singleton `sub` (send it under each of
   * `spellings`) or of a member of collection `sub` (send it under entry.name).
   * `keepHeld`: the content may be older than what the client holds (fleet
   * mode, upstream away): a client holding another version keeps it — return
   * false then, so the engine asks the upstream for the current version.
   */
  resource(sub: Subscription, spellings: Spellings, entry: CacheEntry, fan: FanOut, keepHeld: boolean): boolean;
  /** Resource `name` — the singleton (then name is the key) or a member of collection `sub` — no longer exists. */
  removed(sub: Subscription, spellings: Spellings, name: string, fan: FanOut): void;
  /** The singleton does not exist, or the collection is empty (`keepHeld` as for `resource`). */
  absent(sub: Subscription, spellings: Spellings, fan: FanOut, keepHeld: boolean): void;
  /** A collection's content is now fully known (the upstream answered it). */
  collectionKnown(sub: Subscription, spellings: Spellings, fan: FanOut): void;
  /** The control plane reported an error for `name` (a singleton or a member of `sub`). */
  error(sub: Subscription, spellings: Spellings, name: string, error: ResourceErrorInfo, fan: FanOut): void;
  /** A TTL heartbeat of the singleton's current version. */
  heartbeat(sub: Subscription, spellings: Spellings, entry: CacheEntry, fan: FanOut): void;
  /**
   * The engine dropped the watcher from `sub` (policy change, or a name the
   * control plane cannot take): its spellings are no longer subscribed.
   */
  withdrawn(sub: Subscription, spellings: Spellings, fan: FanOut): void;
}

/** Decides whether a client may join a key; the authorization policy implements it. */
export interface JoinAuthorizer {
  /** `authority`: the xdstp authority, or null for legacy names (the default upstream). */
  allows(identity: string | undefined, typeUrl: string, authority: string | null, name: string): boolean;
}

export function forEachSpelling(spellings: Spellings, fn: (s: string) => void): void {
  if (typeof spellings === 'string') fn(spellings);
  else for (const s of spellings) fn(s);
}
