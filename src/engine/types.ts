import type { CacheEntry } from '../cache/memory-cache';
import type { FanOut } from './fan-out';
import type { Rejection, ResourceKey } from './routing';
import type { Spellings, Subscription, Watcher } from './subscription';

/** Decides whether a client may join a key; the authorization policy implements it. */
export interface JoinAuthorizer {
  /** `authority`: the xdstp authority, or null for legacy names (the default upstream). */
  allows(identity: string | undefined, typeUrl: string, authority: string | null, name: string): boolean;
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
