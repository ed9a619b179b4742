import { CacheEntry } from '../cache/memory-cache';
import type { ResourceStore } from '../cache/resource-store';
import type { StoredResource } from '../cache/types';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import type { SplitResource } from '../proto/resource-bytes';
import type { ResourceErrorInfo } from '../proto/resource-error';
import { WILDCARD } from '../proto/xds-names';
import type { UpstreamPort, UpstreamSink, UpstreamUpdate } from '../upstream/types';
import { FanOut } from './fan-out';
import type { DropReason } from '../metrics';
import { isRejection, legacyKey, type ResourceKey, type Router } from './routing';
import { forEachSpelling, Subscription, type Spellings, type WatchUpdate, type Watcher } from './subscription';
import type { JoinAuthorizer, JoinRefusal, SubscriptionPort } from './types';

/** google.rpc.Code values the engine treats specially in upstream resource_errors. */
const NOT_FOUND = 5;
const TRANSIENT_CODES = new Set([2 /* UNKNOWN */, 13 /* INTERNAL */, 14 /* UNAVAILABLE */]);

export interface EngineOptions {
  store: ResourceStore;
  router: Router;
  /** Upstream per authority; the `null` key is the default upstream for legacy names. */
  upstreams: ReadonlyMap<string | null, UpstreamPort>;
  metrics: RelayMetrics;
  logger: Logger;
  unsubscribeGraceMs: number;
  /** The one place a join can be refused; absent = everything allowed. */
  authorizer?: JoinAuthorizer;
  /** Counts a refused join (by the authority it named; null = the default upstream). */
  onDenied?(authority: string | null): void;
}

/** Does-not-exist of a singleton, or of a collection's whole content. */
const ABSENT: WatchUpdate = { kind: 'does-not-exist', member: undefined, keepHeld: false };
const ABSENT_KEEP_HELD: WatchUpdate = { kind: 'does-not-exist', member: undefined, keepHeld: true };

/** One 'changed' update per cached entry, shared by every watcher and round that hands it on (a storm answers one member to thousands of clients). */
const changedUpdates = new WeakMap<CacheEntry, WatchUpdate>();

function changed(entry: CacheEntry, keepHeld: boolean): WatchUpdate {
  if (keepHeld) return { kind: 'changed', entry, keepHeld };
  let update = changedUpdates.get(entry);
  if (!update) changedUpdates.set(entry, (update = { kind: 'changed', entry, keepHeld: false }));
  return update;
}


function addSpelling(spellings: Spellings | undefined, spelling: string): Spellings {
  if (spellings === undefined) return spelling;
  if (typeof spellings === 'string') return spellings === spelling ? spellings : [spellings, spelling];
  return spellings.includes(spelling) ? spellings : [...spellings, spelling];
}

function removeSpelling(spellings: Spellings, spelling: string): Spellings | undefined {
  if (typeof spellings === 'string') return spellings === spelling ? undefined : spellings;
  const rest = spellings.filter((s) => s !== spelling);
  return rest.length === 0 ? undefined : rest.length === 1 ? rest[0] : rest;
}

/**
 * The subscription engine, protocol-neutral: canonical key → watchers with
 * refcounts and grace timers; the first watcher of a key subscribes upstream,
 * the last one leaving starts the grace timer. Upstream changes go into the
 * store first, then to exactly the watchers whose keys match, as entry
 * changes inside one fan-out round.
 */
export class SubscriptionEngine implements UpstreamSink, SubscriptionPort {
  private readonly index = new Map<string, Subscription>();
  /** Resource errors the upstream reported, by key, for later subscribers; they die with the subscription. */
  private readonly errors = new Map<string, ResourceErrorInfo>();
  private clientSubscriptions = 0;
  /**
   * Keys released while their upstream was away, their cached content kept:
   * nothing else could give it back to a client that subscribes again before
   * the upstream returns (an unreachable control plane takes nothing away).
   */
  private readonly leftovers = new Map<string, Subscription>();

  constructor(private readonly opts: EngineOptions) {}

  get store(): ResourceStore {
    return this.opts.store;
  }

  /** Spellings subscribed across all watchers. */
  get clientSubscriptionCount(): number {
    return this.clientSubscriptions;
  }

  subscriptions(): IterableIterator<Subscription> {
    return this.index.values();
  }

  subscription(key: string): Subscription | undefined {
    return this.index.get(key);
  }

  /** Key and collection of a resource name a client holds (see Router.heldKey). */
  heldKey(typeUrl: string, name: string): ResourceKey | undefined {
    return this.opts.router.heldKey(typeUrl, name);
  }

  current(key: string): CacheEntry | undefined {
    return this.opts.store.get(key);
  }

  /** Cancels timers; subscriptions are left to die with the process. */
  close(): void {
    for (const sub of this.index.values()) if (sub.graceTimer) clearTimeout(sub.graceTimer);
  }

  // --- watchers ------------------------------------------------------------

  /**
   * `watcher` subscribes `spelling`: it joins the key's subscription and is
   * told at once, through its callbacks and inside `fan`, what is known of it
   * (on a miss the shared tier or the upstream answers later). Returns the
   * subscription, or why it was refused.
   */
  subscribe(watcher: Watcher, spelling: string, fan: FanOut): Subscription | JoinRefusal {
    const joined = this.join(watcher, spelling);
    if (joined instanceof Subscription) this.answer(watcher, joined, spelling, fan);
    return joined;
  }

  private join(watcher: Watcher, spelling: string): Subscription | JoinRefusal {
    const { router, metrics, logger, authorizer } = this.opts;
    const route = router.route(watcher.typeUrl, spelling);
    if (isRejection(route)) {
      metrics.rejectedSubscriptions.inc({ reason: route.reason });
      // Debug only: the client's stream warns about its refusals, rate-limited (a client controls how many there are).
      logger.debug({ typeUrl: watcher.typeUrl, name: spelling, reason: route.reason, detail: route.message }, 'subscription cannot be routed');
      return route;
    }
    if (authorizer && !authorizer.allows(watcher.identity, watcher.typeUrl, route.authority, spelling)) {
      this.opts.onDenied?.(route.authority);
      return { reason: 'denied', message: `${watcher.identity ?? 'an unidentified client'} may not subscribe to ${spelling}` };
    }
    let sub = this.index.get(route.key);
    if (!sub) {
      const upstream = this.opts.upstreams.get(route.authority);
      if (!upstream) throw new Error(`router accepted ${spelling} but no upstream serves ${String(route.authority)}`);
      sub = new Subscription(route.key, route.kind, watcher.typeUrl, upstream, route.upstreamName, route.authority);
      this.index.set(route.key, sub);
      const leftover = this.leftovers.delete(route.key);
      // Leftovers nobody kept fresh (warm start, or released while the
      // upstream was away): let the upstream answer instead (it would never
      // retract a glob member it deleted meanwhile).
      if ((this.opts.store.fleet || leftover) && upstream.connected) this.evictUnclaimed(sub);
      upstream.subscribe(watcher.typeUrl, route.upstreamName);
    } else if (sub.graceTimer) {
      clearTimeout(sub.graceTimer);
      sub.graceTimer = undefined;
    }
    const before = sub.watchers.get(watcher);
    const after = addSpelling(before, spelling);
    if (after !== before) {
      sub.watchers.set(watcher, after);
      this.clientSubscriptions++;
      metrics.forType(watcher.typeUrl).subscriptions++;
    }
    return sub;
  }

  /** `watcher` no longer subscribes `spelling` of `sub`. */
  leave(watcher: Watcher, sub: Subscription, spelling: string): void {
    const spellings = sub.watchers.get(watcher);
    if (spellings === undefined) return;
    const rest = removeSpelling(spellings, spelling);
    if (rest === spellings) return;
    this.clientSubscriptions--;
    this.opts.metrics.forType(watcher.typeUrl).subscriptions--;
    if (rest !== undefined) {
      sub.watchers.set(watcher, rest);
      return;
    }
    sub.watchers.delete(watcher);
    if (sub.watchers.size === 0) this.scheduleRelease(sub);
  }

  /**
   * Tells `watcher` what is known of `sub` now, under `spellings`, through the
   * same callbacks as a fan-out (a client asking again for what it
   * subscribes); on a miss, the shared tier is read and the upstream answers.
   * `fromShared`: the content came from the shared tier, which never replaces
   * a version the client holds.
   */
  answer(watcher: Watcher, sub: Subscription, spellings: Spellings, fan: FanOut, fromShared = false): void {
    const { store, metrics } = this.opts;
    const keepHeld = fromShared || this.keepsHeld(sub);
    const error = this.errors.get(sub.key);
    if (error) watcher.update(sub, spellings, { kind: 'error', name: error.name, error }, fan);
    const absent = keepHeld ? ABSENT_KEEP_HELD : ABSENT;
    if (!sub.isCollection) {
      const entry = store.get(sub.key);
      if (entry) {
        if (!watcher.update(sub, spellings, changed(entry, keepHeld), fan)) store.markDivergent(entry.key);
      } else if (store.isAbsent(sub.key)) {
        watcher.update(sub, spellings, absent, fan);
      } else {
        if (!fromShared && !error) this.miss(watcher, sub);
        return;
      }
    } else {
      const members = store.members(sub.key);
      if (members.length > 0) {
        for (const m of members) {
          if (!this.memberAllowed(watcher, sub, m.name)) continue;
          if (!watcher.update(sub, spellings, changed(m, keepHeld), fan)) store.markDivergent(m.key);
        }
      } else if (store.isAbsent(sub.key)) {
        watcher.update(sub, spellings, absent, fan);
      } else {
        if (!fromShared) this.miss(watcher, sub);
        return;
      }
      if (sub.answered && !keepHeld) watcher.update(sub, spellings, { kind: 'complete', members }, fan);
    }
    if (fromShared) metrics.tally.cacheHitsShared++;
    else metrics.tally.cacheHitsMemory++;
  }

  /**
   * A policy's name prefixes can be narrower than a glob the client was
   * allowed to join: each member is checked before it is delivered, so no
   * byte of a denied resource reaches the client.
   */
  private memberAllowed(watcher: Watcher, coll: Subscription, name: string): boolean {
    const authorizer = this.opts.authorizer;
    return !authorizer || authorizer.allows(watcher.identity, coll.typeUrl, coll.authority, name);
  }

  /**
   * Fleet mode (a shared tier is configured) with the subscription's upstream
   * away: the cached copy may be older than what a client got from another
   * relay, and versions are opaque, so the client keeps what it holds; the
   * upstream settles it on reconnect.
   */
  private keepsHeld(sub: Subscription): boolean {
    return this.opts.store.fleet && !sub.upstream.connected;
  }

  private miss(watcher: Watcher, sub: Subscription): void {
    const { store, metrics, logger } = this.opts;
    metrics.tally.cacheMisses++;
    if (sub.refetch) sub.upstream.refetch(sub.typeUrl, sub.upstreamName);
    // A glob is read through only while its upstream is away: the upstream
    // would never retract a member the shared tier still holds but it deleted.
    if (!store.shared?.healthy || (sub.isCollection && sub.upstream.connected)) return;
    const stillWanted = (): boolean =>
      this.index.get(sub.key) === sub && sub.watchers.has(watcher) && !(sub.isCollection && sub.upstream.connected);
    store
      .readThrough(sub.key, sub.isCollection, stillWanted)
      .then((known) => {
        const spellings = sub.watchers.get(watcher);
        if (!known || spellings === undefined || this.index.get(sub.key) !== sub) return;
        const fan = new FanOut();
        this.answer(watcher, sub, spellings, fan, true);
        fan.finish();
      })
      .catch((err: unknown) => logger.error({ err, key: sub.key }, 'read-through failed'));
  }

  private scheduleRelease(sub: Subscription): void {
    const grace = this.opts.unsubscribeGraceMs;
    if (grace <= 0) {
      this.release(sub);
      return;
    }
    sub.graceTimer = setTimeout(() => this.release(sub), grace);
    sub.graceTimer.unref();
  }

  /** Nobody wants the key any more: unsubscribe upstream and drop what only it kept fresh. */
  private release(sub: Subscription): void {
    sub.graceTimer = undefined;
    if (sub.watchers.size > 0 || this.index.get(sub.key) !== sub) return;
    this.index.delete(sub.key);
    sub.upstream.unsubscribe(sub.typeUrl, sub.upstreamName);
    this.forgetKey(sub.key);
    if (sub.upstream.connected) this.evictUnclaimed(sub);
    else this.leftovers.set(sub.key, sub);
  }

  /** The upstream is back: what was kept for its released keys goes, unless someone subscribed again. */
  private dropLeftovers(upstream: UpstreamPort): void {
    for (const [key, sub] of this.leftovers) {
      if (sub.upstream !== upstream) continue;
      this.leftovers.delete(key);
      if (!this.index.has(key)) this.evictUnclaimed(sub);
    }
  }

  /** Does-not-exist markers and errors never outlive the subscription that learned them. */
  private forgetKey(key: string): void {
    this.opts.store.clearAbsent(key);
    this.errors.delete(key);
  }

  private evictUnclaimed(sub: Subscription): void {
    this.opts.store.evictUnclaimed(sub.key, sub.isCollection, (k) => this.index.has(k));
  }

  /** Warm-start leftovers no subscription claims, once every upstream is connected. */
  evictAllUnclaimed(): number {
    return this.opts.store.evictAllUnclaimed((k) => this.index.has(k));
  }

  /**
   * The authorization policy changed: every watcher's spellings are checked
   * again, and those now denied are withdrawn (the client gets removals).
   * Returns how many spellings were withdrawn.
   */
  reauthorize(): number {
    const authorizer = this.opts.authorizer;
    if (!authorizer) return 0;
    const fan = new FanOut();
    let withdrawn = 0;
    for (const sub of [...this.index.values()]) {
      for (const [watcher, spellings] of [...sub.watchers]) {
        const denied: string[] = [];
        forEachSpelling(spellings, (s) => {
          if (!authorizer.allows(watcher.identity, sub.typeUrl, sub.authority, s)) denied.push(s);
        });
        if (denied.length === 0) {
          // Still allowed as a whole: members the new policy denies are taken back.
          if (sub.isCollection) {
            for (const m of this.opts.store.members(sub.key)) {
              if (!this.memberAllowed(watcher, sub, m.name)) watcher.update(sub, spellings, { kind: 'does-not-exist', member: m.name, keepHeld: false }, fan);
            }
          }
          continue;
        }
        for (const s of denied) this.leave(watcher, sub, s);
        watcher.update(sub, denied.length === 1 ? denied[0] : denied, this.withdrawal(sub), fan);
        withdrawn += denied.length;
      }
    }
    fan.finish();
    return withdrawn;
  }

  // --- upstream side -------------------------------------------------------

  /** initial_resource_versions for an upstream (re)subscription of `names`, from the cache. */
  versionsFor(typeUrl: string, names: Iterable<string>): Record<string, string> {
    const { router, store } = this.opts;
    const out: Record<string, string> = {};
    const add = (entry: CacheEntry): void => {
      const v = store.heldVersion(entry);
      if (v !== undefined) out[entry.name] = v;
    };
    for (const name of names) {
      const route = router.route(typeUrl, name);
      if (isRejection(route)) continue;
      if (route.kind === 'glob' || route.kind === 'wildcard') {
        for (const m of store.members(route.key)) add(m);
      } else {
        const entry = store.get(route.key);
        if (entry) add(entry);
      }
    }
    return out;
  }

  /** Resources, removals and errors from one upstream response. */
  onResponse(upstream: UpstreamPort, update: UpstreamUpdate): void {
    const { store, metrics } = this.opts;
    if (this.leftovers.size > 0) this.dropLeftovers(upstream);
    const fan = new FanOut(update.receivedAt);
    const answered = new Set<Subscription>();
    store.begin();
    try {
      for (const resource of update.resources) this.applyResource(upstream, update.typeUrl, resource, fan, answered);
      for (const name of update.removed) this.applyRemoval(upstream, update.typeUrl, name, fan, answered);
      for (const e of update.errors) this.applyError(upstream, update.typeUrl, e, fan, answered);
      // An empty response from the default upstream can only be its answer to
      // the wildcard (an explicit name would be answered with a removal).
      const empty = update.resources.length === 0 && update.removed.length === 0 && update.errors.length === 0;
      if (upstream.authority === null && empty) {
        const wildcard = this.index.get(legacyKey(update.typeUrl, WILDCARD));
        if (wildcard && !wildcard.answered) answered.add(wildcard);
      }
      for (const sub of answered) this.markAnswered(sub, fan);
    } finally {
      store.commit();
    }
    fan.finish();
    if (fan.size > 0 || update.resources.length > 0) {
      metrics.pushLatency.observe(Number(process.hrtime.bigint() - update.receivedAt) / 1e9);
    }
  }

  private withdrawal(sub: Subscription): WatchUpdate {
    return { kind: 'withdrawn', members: sub.isCollection ? this.opts.store.members(sub.key) : [] };
  }

  /** The control plane cannot take these names: their subscriptions end and their clients hear they are gone. */
  onRejectedNames(_upstream: UpstreamPort, typeUrl: string, names: string[]): void {
    const fan = new FanOut();
    for (const name of names) {
      const route = this.opts.router.route(typeUrl, name);
      if (isRejection(route)) continue;
      const sub = this.index.get(route.key);
      if (!sub) continue;
      const withdrawal = this.withdrawal(sub);
      for (const [watcher, spellings] of [...sub.watchers]) {
        forEachSpelling(spellings, (s) => this.leave(watcher, sub, s));
        watcher.update(sub, spellings, withdrawal, fan);
      }
      if (sub.graceTimer) clearTimeout(sub.graceTimer);
      this.release(sub);
    }
    fan.finish();
  }

  /** Whether the content of upstream name `name` is known: a resource or marker for a singleton, an answer for a collection. */
  hasServed(typeUrl: string, name: string): boolean {
    const route = this.opts.router.route(typeUrl, name);
    if (isRejection(route)) return false;
    const { store } = this.opts;
    if (store.isAbsent(route.key)) return true;
    if (route.kind === 'glob' || route.kind === 'wildcard') {
      return this.index.get(route.key)?.answered === true || store.memberCount(route.key) > 0;
    }
    return store.get(route.key) !== undefined;
  }

  /** TTLs ran out: the resources are gone until the upstream sends them again. */
  onExpired(keys: string[]): void {
    const fan = new FanOut();
    const answered = new Set<Subscription>();
    this.opts.store.begin();
    try {
      for (const key of keys) {
        const entry = this.opts.store.get(key);
        if (entry) this.removeResource(key, entry.name, entry.stored.glob, fan, answered);
      }
    } finally {
      this.opts.store.commit();
    }
    fan.finish();
  }

  private drop(reason: DropReason | 'unsubscribed', upstream: UpstreamPort, name: string): void {
    this.opts.metrics.droppedResources.inc({ reason });
    this.opts.logger.debug({ upstream: upstream.label, name, reason }, 'upstream resource dropped');
  }

  /** `resource` was checked and split at the edge (upstream/response-check.ts): only where it belongs is decided here. */
  private applyResource(upstream: UpstreamPort, typeUrl: string, resource: SplitResource, fan: FanOut, answered: Set<Subscription>): void {
    const rk = this.opts.router.resourceKey(upstream.authority, typeUrl, resource.name);
    if (typeof rk === 'string') {
      this.drop(rk, upstream, resource.name);
      return;
    }
    const single = this.index.get(rk.key);
    const coll = this.index.get(rk.collection);
    if (!single && !coll) {
      this.drop('unsubscribed', upstream, resource.name);
      return;
    }
    if (!resource.hasBody) {
      this.applyHeartbeat(rk.key, resource, single, fan);
      return;
    }
    const { store } = this.opts;
    this.errors.delete(rk.key);
    const stored: StoredResource = { key: rk.key, typeUrl, version: resource.version, resource: resource.bytes, glob: rk.collection };
    if (resource.ttlMs !== undefined && resource.ttlMs > 0) stored.expiresAt = Date.now() + resource.ttlMs;
    let entry: CacheEntry;
    if (resource.doNotCache) {
      if (single) single.refetch = true;
      if (coll) coll.refetch = true;
      entry = store.uncacheable(stored, rk.name, resource);
    } else {
      entry = store.put(stored, rk.name, resource);
      if (single) single.refetch = false;
    }
    const update = changed(entry, false);
    if (single) for (const [w, spellings] of single.watchers) w.update(single, spellings, update, fan);
    if (coll) {
      for (const [w, spellings] of coll.watchers) if (this.memberAllowed(w, coll, entry.name)) w.update(coll, spellings, update, fan);
      // A resource someone also subscribed by itself may answer that subscription, not the collection.
      if (!coll.answered && !single) answered.add(coll);
    }
  }

  /** A TTL refresh: only singleton subscribers hear about it (the watcher checks that the client understands TTLs). */
  private applyHeartbeat(key: string, beat: SplitResource, single: Subscription | undefined, fan: FanOut): void {
    const entry = this.opts.store.heartbeat(key, beat.version, beat.ttlMs);
    if (!entry || !single) return;
    // The heartbeat's own parts: name, version and ttl without a payload.
    const update: WatchUpdate = { kind: 'heartbeat', entry: new CacheEntry(entry.stored, entry.name, beat) };
    for (const [w, spellings] of single.watchers) w.update(single, spellings, update, fan);
  }

  private applyRemoval(upstream: UpstreamPort, typeUrl: string, name: string, fan: FanOut, answered: Set<Subscription>): void {
    const rk = this.opts.router.removalKey(upstream.authority, typeUrl, name);
    if (!rk) {
      this.drop('foreign_authority', upstream, name);
      return;
    }
    if (rk.isCollection) {
      const coll = this.index.get(rk.key);
      const members = this.opts.store.members(rk.key);
      // Removing the last member announces the empty collection itself.
      for (const m of members) this.removeResource(m.key, m.name, rk.key, fan, answered);
      if (members.length === 0) this.announceEmpty(rk.key, fan);
      if (coll && !coll.answered) answered.add(coll);
      return;
    }
    const held = this.opts.router.heldKey(typeUrl, name);
    this.removeResource(rk.key, held?.name ?? name, held?.collection, fan, answered);
  }

  private applyError(upstream: UpstreamPort, typeUrl: string, e: { name: string; code: number; message: string }, fan: FanOut, answered: Set<Subscription>): void {
    if (e.code === NOT_FOUND) {
      this.applyRemoval(upstream, typeUrl, e.name, fan, answered);
      return;
    }
    const rk = this.opts.router.removalKey(upstream.authority, typeUrl, e.name);
    if (!rk) {
      this.drop('foreign_authority', upstream, e.name);
      return;
    }
    const error: ResourceErrorInfo = { name: e.name, code: e.code, message: e.message };
    const single = this.index.get(rk.key);
    const held = rk.isCollection ? undefined : this.opts.router.heldKey(typeUrl, e.name);
    const coll = held ? this.index.get(held.collection) : undefined;
    if (!single && !coll) return;
    if (single) this.errors.set(rk.key, error);
    // A transient failure keeps the last good copy; anything else means the cached one is no longer valid.
    if (!TRANSIENT_CODES.has(e.code) && !rk.isCollection) this.opts.store.remove(rk.key);
    if (single) {
      const update: WatchUpdate = { kind: 'error', name: e.name, error };
      for (const [w, spellings] of single.watchers) w.update(single, spellings, update, fan);
    }
    if (coll) {
      const update: WatchUpdate = { kind: 'error', name: held!.name, error };
      for (const [w, spellings] of coll.watchers) if (this.memberAllowed(w, coll, held!.name)) w.update(coll, spellings, update, fan);
    }
  }

  private announceEmpty(collection: string, fan: FanOut): void {
    const coll = this.index.get(collection);
    // Markers only for what a live subscription asked about.
    if (!coll) return;
    this.opts.store.markAbsent(collection, true);
    for (const [w, spellings] of coll.watchers) w.update(coll, spellings, ABSENT, fan);
  }

  /**
   * `key` no longer exists: drop it, tell its singleton watchers it is absent
   * and its collection's watchers it was removed — even when nothing was
   * cached, since a client may hold it from another relay or an earlier stream.
   */
  private removeResource(key: string, name: string, collection: string | undefined, fan: FanOut, answered: Set<Subscription>): void {
    const { store } = this.opts;
    const entry = store.remove(key);
    this.errors.delete(key);
    const single = this.index.get(key);
    if (single) {
      store.markAbsent(key, false);
      for (const [w, spellings] of single.watchers) w.update(single, spellings, ABSENT, fan);
    }
    const collKey = entry?.stored.glob ?? collection;
    if (collKey === undefined) return;
    const coll = this.index.get(collKey);
    if (!coll) return;
    const gone: WatchUpdate = { kind: 'does-not-exist', member: entry?.name ?? name, keepHeld: false };
    for (const [w, spellings] of coll.watchers) w.update(coll, spellings, gone, fan);
    if (!coll.answered && !single) answered.add(coll);
    if (store.memberCount(collKey) === 0 && entry) this.announceEmpty(collKey, fan);
  }

  /**
   * A collection's content is now known: empty ones are marked, watchers
   * reconcile what their clients listed. Only a response that cannot be the
   * answer to something else counts (a member nobody subscribed to alone, the
   * glob's own removal, an empty answer to the wildcard): a removal that
   * reconciliation sends on a guess would take configuration away.
   */
  private markAnswered(sub: Subscription, fan: FanOut): void {
    sub.answered = true;
    const { store } = this.opts;
    if (store.memberCount(sub.key) === 0 && !store.isAbsent(sub.key)) this.announceEmpty(sub.key, fan);
    const complete: WatchUpdate = { kind: 'complete', members: store.members(sub.key) };
    for (const [w, spellings] of sub.watchers) w.update(sub, spellings, complete, fan);
  }
}
