import type { CacheEntry } from '../cache/memory-cache';
import type { ResourceStore } from '../cache/resource-store';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import type { ResourceErrorInfo } from '../proto/resource-error';
import type { UpstreamPort, UpstreamSink, UpstreamUpdate } from '../upstream/types';
import { FanOut } from './fan-out';
import { isRejection, type ResourceKey, type Router } from './routing';
import {
  addSpelling,
  forEachSpelling,
  removeSpelling,
  Subscription,
  type Spellings,
  type WatchUpdate,
  type Watcher,
} from './subscription';
import type { JoinAuthorizer, JoinRefusal, SubscriptionPort } from './types';
import { UpdateApplier } from './update-applier';
import { ABSENT, ABSENT_KEEP_HELD, allowsMember, changed } from './watch-updates';

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

/**
 * The subscription engine, protocol-neutral: canonical key → watchers with
 * refcounts and grace timers; the first watcher of a key subscribes upstream,
 * the last one leaving starts the grace timer. What upstreams send is applied
 * by update-applier.ts: into the store first, then to exactly the watchers
 * whose keys match, as entry changes inside one fan-out round.
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

  private readonly updates: UpdateApplier;

  constructor(private readonly opts: EngineOptions) {
    const { store, router, metrics, logger, authorizer } = opts;
    this.updates = new UpdateApplier({ store, router, metrics, logger, authorizer, index: this.index, errors: this.errors });
  }

  get store(): ResourceStore {
    return this.opts.store;
  }

  /** Spellings subscribed across all watchers. */
  get clientSubscriptionCount(): number {
    return this.clientSubscriptions;
  }

  /** Live subscriptions (also those in their grace period; not those released). */
  *subscriptions(): IterableIterator<Subscription> {
    for (const sub of this.index.values()) if (!sub.unsubscribing) yield sub;
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
    this.updates.close();
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
      metrics.rejected[route.reason]++;
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
    } else if (sub.unsubscribing) {
      // Released, but the control plane never stopped serving it: what the
      // relay holds is still its answer. Taking the unsubscribe back asks again.
      sub.unsubscribing = false;
      sub.upstream.subscribe(sub.typeUrl, sub.upstreamName);
    }
    const before = sub.watchers.get(watcher);
    const after = addSpelling(before, sub.sharedSpelling(spelling));
    if (after !== before) {
      sub.watchers.set(watcher, after);
      this.countSubscription(watcher, 1);
    }
    return sub;
  }

  /** A client's subscriptions (names and globs) counted as they come and go; the relay's own watchers are not. */
  private countSubscription(watcher: Watcher, by: 1 | -1): void {
    if (watcher.relaysOwn) return;
    this.clientSubscriptions += by;
    this.opts.metrics.forType(watcher.typeUrl).subscriptions += by;
  }

  /** `watcher` no longer subscribes `spelling` of `sub`. */
  leave(watcher: Watcher, sub: Subscription, spelling: string): void {
    const spellings = sub.watchers.get(watcher);
    if (spellings === undefined) return;
    const rest = removeSpelling(spellings, spelling);
    if (rest === spellings) return;
    this.countSubscription(watcher, -1);
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

  /** Whether `watcher` may be told of member `name` of `coll` (see allowsMember). */
  private memberAllowed(watcher: Watcher, coll: Subscription, name: string): boolean {
    return allowsMember(this.opts.authorizer, watcher, coll, name);
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

  /**
   * Nobody wants the key any more: unsubscribe upstream and drop what only it
   * kept fresh — once the unsubscribe has gone out, when the upstream defers
   * it (see onUnsubscribed).
   */
  private release(sub: Subscription): void {
    sub.graceTimer = undefined;
    if (sub.watchers.size > 0 || this.index.get(sub.key) !== sub) return;
    const connected = sub.upstream.connected;
    // Until the unsubscribe has gone out the control plane still serves the
    // key: the subscription stays indexed, its content true (see onUnsubscribed).
    if (sub.upstream.unsubscribe(sub.typeUrl, sub.upstreamName) && connected) {
      sub.unsubscribing = true;
      return;
    }
    this.forget(sub);
  }

  /** The released key leaves the index; its content goes, or waits for its upstream's return (leftovers). */
  private forget(sub: Subscription): void {
    this.index.delete(sub.key);
    this.forgetKey(sub.key);
    if (sub.upstream.connected) this.evictUnclaimed(sub);
    else this.leftovers.set(sub.key, sub);
  }

  /** The upstream has sent the unsubscribes it deferred: the released keys go. */
  onUnsubscribed(upstream: UpstreamPort, typeUrl: string, names: readonly string[]): void {
    for (const name of names) {
      const route = this.opts.router.route(typeUrl, name);
      if (isRejection(route)) continue;
      const sub = this.index.get(route.key);
      if (!sub?.unsubscribing || sub.upstream !== upstream) continue;
      sub.unsubscribing = false;
      this.forget(sub);
    }
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

  /**
   * `keys` (resources and globs) reached memory from the shared tier without
   * a fan-out (a warm start that finished after clients had asked for them):
   * their subscribers are answered from memory now, as a read-through would
   * have answered them. A glob whose upstream is connected waits for the
   * upstream, as on a miss.
   */
  answerFromMemory(keys: Iterable<string>): void {
    const fan = new FanOut();
    for (const key of keys) {
      const sub = this.index.get(key);
      if (!sub || sub.watchers.size === 0 || (sub.isCollection && sub.upstream.connected)) continue;
      for (const [watcher, spellings] of sub.watchers) this.answer(watcher, sub, spellings, fan, true);
    }
    fan.finish();
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
    // Leftovers are judged when the update's turn comes, right before it is applied, as if it had just arrived.
    this.updates.apply(upstream, update, () => {
      if (this.leftovers.size > 0) this.dropLeftovers(upstream);
    });
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
    this.updates.expire(keys);
  }
}
