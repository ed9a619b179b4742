import type { CacheEntry } from '../cache/memory-cache';
import type { ResourceErrorInfo } from '../proto/resource-error';
import type { UpstreamPort } from '../upstream/types';
import type { FanOut } from './fan-out';
import type { SubscriptionKind } from './routing';

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
  /** A watcher of the relay's own on a client's behalf (a reconnecting client's claim check): not one of the client subscriptions counted. */
  readonly relaysOwn?: boolean;
  /**
   * One update of `sub`, whose spellings this watcher used are `spellings`.
   * Returns false only for a `changed` with `keepHeld` that the client does
   * not take (it holds another version): the engine then asks the upstream.
   */
  update(sub: Subscription, spellings: Spellings, update: WatchUpdate, fan: FanOut): boolean;
}

export function forEachSpelling(spellings: Spellings, fn: (s: string) => void): void {
  if (typeof spellings === 'string') fn(spellings);
  else for (const s of spellings) fn(s);
}

/** `spellings` with `spelling` added; the same value when it was there already. */
export function addSpelling(spellings: Spellings | undefined, spelling: string): Spellings {
  if (spellings === undefined) return spelling;
  if (typeof spellings === 'string') return spellings === spelling ? spellings : [spellings, spelling];
  return spellings.includes(spelling) ? spellings : [...spellings, spelling];
}

/** `spellings` without `spelling`: undefined when none is left, a lone string as it was when it is another spelling, else a new list. */
export function removeSpelling(spellings: Spellings, spelling: string): Spellings | undefined {
  if (typeof spellings === 'string') return spellings === spelling ? undefined : spellings;
  const rest = spellings.filter((s) => s !== spelling);
  return rest.length === 0 ? undefined : rest.length === 1 ? rest[0] : rest;
}

/** One deduplicated subscription: every watcher that asked for the same canonical key. */
export class Subscription {
  /** Watcher → the spelling(s) it used (answered back to it for singletons). */
  readonly watchers = new Map<Watcher, Spellings>();
  graceTimer: NodeJS.Timeout | undefined;
  /** Its content was marked do_not_cache: a new subscriber must be fetched upstream again. */
  refetch = false;
  /** A collection whose content the upstream has answered since it was subscribed. */
  answered = false;
  /** Released, its unsubscribe not yet sent upstream: the content stays, a new watcher takes it back. */
  unsubscribing = false;

  constructor(
    readonly key: string,
    readonly kind: SubscriptionKind,
    readonly typeUrl: string,
    readonly upstream: UpstreamPort,
    readonly upstreamName: string,
    /** The authority the route named (null: default upstream). */
    readonly authority: string | null,
  ) {}

  get isCollection(): boolean {
    return this.kind === 'glob' || this.kind === 'wildcard';
  }

  /**
   * `spelling`, as the string this subscription already holds when it is the
   * same (the name it asks upstream for): every client naming it then keeps
   * one shared copy instead of the one decoded from its own request.
   */
  sharedSpelling(spelling: string): string {
    return spelling === this.upstreamName ? this.upstreamName : spelling;
  }
}
