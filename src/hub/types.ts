import type { CacheEntry } from '../cache/memory-cache';
import type { ResourceErrorInfo } from '../proto/resource-error';
import type { FanOut } from './fan-out';
import type { Rejection, ResourceKey } from './routing';
import type { Subscription } from './subscription';

/** The spellings one watcher used for one key: usually one string, an array when it used several. */
export type Spellings = string | readonly string[];

/**
 * What the engine tells a watcher about one of its subscriptions: a few
 * tagged updates, each one rule of what the client holds. Never bytes or
 * nonces: what to send and how to encode it is the watcher's business.
 *
 * `keepHeld` (on changed and does-not-exist): the news may be older than what
 * the client holds (fleet mode, upstream away) — a client holding another
 * version keeps it.
 */
export type WatchUpdate =
  /** `entry` is the current content of the singleton (sent under each spelling), or of a member of the collection (sent under entry.name). */
  | { readonly kind: 'changed'; readonly entry: CacheEntry; readonly keepHeld: boolean }
  /** Does not exist: the singleton; `member` of the collection; or, without a member, the collection is empty. */
  | { readonly kind: 'does-not-exist'; readonly member: string | undefined; readonly keepHeld: boolean }
  /** The control plane reported an error for `name` (the singleton, or a member of the collection). */
  | { readonly kind: 'error'; readonly name: string; readonly error: ResourceErrorInfo }
  /** A TTL heartbeat of the singleton's current version (no payload). */
  | { readonly kind: 'heartbeat'; readonly entry: CacheEntry }
  /** The collection's content is now complete (the upstream answered it): `members` is all of it. */
  | { readonly kind: 'complete'; readonly members: readonly CacheEntry[] }
  /** The engine dropped the watcher's spellings (policy change, a name the control plane cannot take); `members`: the collection's, if any. */
  | { readonly kind: 'withdrawn'; readonly members: readonly CacheEntry[] };

/** A party interested in keys (one client stream's state for one type URL). */
export interface Watcher {
  readonly typeUrl: string;
  /** Who the client is, for authorization on join (undefined = unknown). */
  readonly identity: string | undefined;
  /**
   * One update of `sub`, whose spellings this watcher used are `spellings`.
   * Returns false only for a `changed` with `keepHeld` that the client does
   * not take (it holds another version): the engine then asks the upstream.
   */
  update(sub: Subscription, spellings: Spellings, update: WatchUpdate, fan: FanOut): boolean;
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

/** A join the engine refused: unroutable, or not allowed for the client's identity. */
export type JoinRefusal = Rejection | { reason: 'denied'; message: string };

/** What a watcher asks of the engine; everything else it is told through `update`. */
export interface SubscriptionPort {
  /** Joins the key of `spelling` and delivers what is known of it (see SubscriptionEngine.subscribe). */
  subscribe(watcher: Watcher, spelling: string, fan: FanOut): Subscription | JoinRefusal;
  /** Delivers again what is known of `sub` (a client asking again for what it subscribes). */
  answer(watcher: Watcher, sub: Subscription, spellings: Spellings, fan: FanOut): void;
  leave(watcher: Watcher, sub: Subscription, spelling: string): void;
  /** Key and collection of a resource name a client holds (see Router.heldKey). */
  heldKey(typeUrl: string, name: string): ResourceKey | undefined;
  /** The cached content of `key`, if any. */
  current(key: string): CacheEntry | undefined;
}
