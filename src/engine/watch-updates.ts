/**
 * The updates the engine tells watchers that are the same for every watcher
 * (built once and shared), and the check every delivery of a collection
 * member passes: whether the watcher may be told of that member at all.
 */
import type { CacheEntry } from '../cache/memory-cache';
import type { Subscription, WatchUpdate, Watcher } from './subscription';
import type { JoinAuthorizer } from './types';

/** Does-not-exist of a singleton, or of a collection's whole content. */
export const ABSENT: WatchUpdate = { kind: 'does-not-exist', member: undefined, keepHeld: false };
export const ABSENT_KEEP_HELD: WatchUpdate = { kind: 'does-not-exist', member: undefined, keepHeld: true };

/**
 * `entry`'s content as an update. Without keepHeld it is one object per
 * cached entry, kept on the entry and shared by every watcher and round that
 * hands it on (a storm answers one member to thousands of clients).
 */
export function changed(entry: CacheEntry, keepHeld: boolean): WatchUpdate {
  if (keepHeld) return { kind: 'changed', entry, keepHeld };
  // Only this function sets the entry's engineShared, always to this update.
  return (entry.engineShared ??= { kind: 'changed', entry, keepHeld: false }) as WatchUpdate;
}

/**
 * The update for an entry the upstream just sent, told to its watchers once,
 * as it arrives. Not memoized: under churn every upstream change is a new
 * entry, and a weak-map entry each would cost more than the object it
 * shares (clients joining later share theirs through `changed`).
 */
export function arrived(entry: CacheEntry): WatchUpdate {
  return { kind: 'changed', entry, keepHeld: false };
}

/**
 * A policy's name prefixes can be narrower than a glob the client was
 * allowed to join: each member is checked before it is delivered, so no
 * byte of a denied resource reaches the client. No authorizer: everything.
 */
export function allowsMember(authorizer: JoinAuthorizer | undefined, watcher: Watcher, coll: Subscription, name: string): boolean {
  return !authorizer || authorizer.allows(watcher.identity, coll.typeUrl, coll.authority, name);
}
