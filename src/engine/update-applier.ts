/**
 * Applies what upstreams say to the engine's subscriptions: one checked
 * update (resources, removals, resource errors) or a TTL expiry goes into the
 * store first, then to exactly the watchers of the keys it touches, inside
 * one fan-out round (a large one in several, see apply). The resources arrive
 * split and checked (upstream/response-check.ts); here it is only decided
 * where each belongs, who hears of it, and which collections it answers.
 */
import { CacheEntry } from '../cache/memory-cache';
import type { ResourceStore } from '../cache/resource-store';
import type { StoredResource } from '../cache/types';
import type { Logger } from '../log';
import type { DropReason, RelayMetrics } from '../metrics';
import type { SplitResource } from '../proto/resource-bytes';
import type { ResourceErrorInfo } from '../proto/resource-error';
import { WILDCARD } from '../proto/xds-names';
import type { UpstreamPort, UpstreamUpdate } from '../upstream/types';
import { FanOut } from './fan-out';
import { legacyKey, type Router } from './routing';
import type { Subscription, WatchUpdate, Watcher } from './subscription';
import type { JoinAuthorizer } from './types';
import { ABSENT, allowsMember, arrived } from './watch-updates';

/**
 * Time one turn of the event loop may spend applying upstream updates (ms);
 * the rest waits for the next turn. More than one client's request work gets
 * (8 ms, downstream/request-scheduler.ts): every client waits on updates, and
 * one arriving behind a large update waits until that one is applied.
 */
export const APPLY_BUDGET_MS = 20;

/** Items applied between two looks at the clock. */
const ITEMS_PER_CLOCK_READ = 32;

/** A queued update or expiry: applies a slice until `deadline` (performance.now() ms), true once it is all applied. */
type ApplyTask = (deadline: number) => boolean;

/** google.rpc.Code values the engine treats specially in upstream resource_errors. */
const NOT_FOUND = 5;
const TRANSIENT_CODES = new Set([2 /* UNKNOWN */, 13 /* INTERNAL */, 14 /* UNAVAILABLE */]);

export interface UpdateApplierOptions {
  store: ResourceStore;
  router: Router;
  metrics: RelayMetrics;
  logger: Logger;
  authorizer?: JoinAuthorizer;
  /** The engine's live subscriptions by canonical key; only read here. */
  index: ReadonlyMap<string, Subscription>;
  /** Resource errors by key, shared with the engine, which tells them to later subscribers. */
  errors: Map<string, ResourceErrorInfo>;
}

export class UpdateApplier {
  private readonly index: ReadonlyMap<string, Subscription>;
  private readonly errors: Map<string, ResourceErrorInfo>;

  constructor(private readonly opts: UpdateApplierOptions) {
    this.index = opts.index;
    this.errors = opts.errors;
  }

  /**
   * Updates and expiries not yet applied, in arrival order. A large one is
   * applied a slice at a time (about APPLY_BUDGET_MS per turn of the event
   * loop); whatever arrives meanwhile waits its turn behind it.
   */
  private readonly queue: ApplyTask[] = [];
  private turnScheduled = false;

  /**
   * Resources, removals and errors from one upstream response; `first` runs
   * just before the update's first item is applied (when its turn comes).
   *
   * Applying a large update in slices is what a control plane splitting it
   * into several responses would cause: each slice is a fan-out round of its
   * own, in the update's order (resources, then removals, then errors). What
   * the update answers — a collection's first content, which lets a
   * state-of-the-world client be sent a state without waiting and tells
   * reconnecting clients which of their claims are gone — is marked only
   * after its last slice, so no client is sent a partial answer as complete.
   */
  apply(upstream: UpstreamPort, update: UpstreamUpdate, first?: () => void): void {
    const items = update.resources.length + update.removed.length + update.errors.length;
    const answered = new Set<Subscription>();
    let next = 0;
    let touched = false;
    this.enqueue((deadline) => {
      if (next === 0) first?.();
      const { store, metrics } = this.opts;
      const fan = new FanOut(update.receivedAt);
      store.begin();
      try {
        for (let n = 1; next < items; n++) {
          this.applyItem(upstream, update, next++, fan, answered);
          if (n % ITEMS_PER_CLOCK_READ === 0 && performance.now() >= deadline) break;
        }
        if (next === items) {
          // An empty response from the default upstream can only be its answer to
          // the wildcard (an explicit name would be answered with a removal).
          if (upstream.authority === null && items === 0) {
            const wildcard = this.index.get(legacyKey(update.typeUrl, WILDCARD));
            if (wildcard && !wildcard.answered) answered.add(wildcard);
          }
          for (const sub of answered) {
            // A response that crossed the subscription on the wire was sent before the control plane read it.
            if (this.index.get(sub.key) === sub && upstream.canAnswer(sub.typeUrl, sub.upstreamName, update.receivedAt)) this.markAnswered(sub, fan);
          }
        }
      } finally {
        store.commit();
      }
      touched ||= fan.size > 0;
      fan.finish();
      if (next < items) return false;
      if (touched || update.resources.length > 0) metrics.pushLatency.observe(Number(process.hrtime.bigint() - update.receivedAt) / 1e9);
      return true;
    });
  }

  /** TTLs ran out: the resources are gone until the upstream sends them again. */
  expire(keys: string[]): void {
    let next = 0;
    this.enqueue((deadline) => {
      const fan = new FanOut();
      const answered = new Set<Subscription>();
      this.opts.store.begin();
      try {
        for (let n = 1; next < keys.length; n++) {
          const key = keys[next++]!;
          const entry = this.opts.store.get(key);
          if (entry) this.removeResource(key, entry.name, entry.stored.glob, fan, answered);
          if (n % ITEMS_PER_CLOCK_READ === 0 && performance.now() >= deadline) break;
        }
      } finally {
        this.opts.store.commit();
      }
      fan.finish();
      return next === keys.length;
    });
  }

  /** Drops what is still waiting to be applied (the engine is closing). */
  close(): void {
    this.queue.length = 0;
  }

  /** Item `i` of `update`: its resources, then its removals, then its errors. */
  private applyItem(upstream: UpstreamPort, update: UpstreamUpdate, i: number, fan: FanOut, answered: Set<Subscription>): void {
    const { resources, removed, errors, typeUrl } = update;
    if (i < resources.length) this.applyResource(upstream, typeUrl, resources[i]!, fan, answered);
    else if (i < resources.length + removed.length) this.applyRemoval(upstream, typeUrl, removed[i - resources.length]!, fan, answered);
    else this.applyError(upstream, typeUrl, errors[i - resources.length - removed.length]!, fan, answered);
  }

  /** Queues `task`; with nothing queued before it, its first slice runs now. */
  private enqueue(task: ApplyTask): void {
    this.queue.push(task);
    // A task stays first in the queue while it runs: one queued from inside it waits for a turn.
    if (this.queue.length === 1 && !this.turnScheduled) this.runTurn();
  }

  /**
   * Runs queued tasks in order until the budget is spent, then yields to the
   * event loop. A task that throws is dropped with an error line, as one
   * update that fails to apply is: the relay keeps what it had and goes on.
   */
  private runTurn(): void {
    const deadline = performance.now() + APPLY_BUDGET_MS;
    while (this.queue.length > 0) {
      let done: boolean;
      try {
        done = this.queue[0]!(deadline);
      } catch (err) {
        this.opts.logger.error({ err }, 'failed to apply upstream update; the rest of it is dropped');
        done = true;
      }
      if (!done) break;
      this.queue.shift();
      if (performance.now() >= deadline) break;
    }
    if (this.queue.length > 0 && !this.turnScheduled) {
      this.turnScheduled = true;
      setImmediate(() => {
        this.turnScheduled = false;
        if (this.queue.length > 0) this.runTurn();
      });
    }
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
    const update = arrived(entry);
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
   * glob's own removal, an empty answer to the wildcard), and only once the
   * collection's subscription had gone out when it arrived: a removal that
   * reconciliation sends on a guess would take configuration away.
   */
  private markAnswered(sub: Subscription, fan: FanOut): void {
    sub.answered = true;
    const { store } = this.opts;
    if (store.memberCount(sub.key) === 0 && !store.isAbsent(sub.key)) this.announceEmpty(sub.key, fan);
    const complete: WatchUpdate = { kind: 'complete', members: store.members(sub.key) };
    for (const [w, spellings] of sub.watchers) w.update(sub, spellings, complete, fan);
  }

  private memberAllowed(watcher: Watcher, coll: Subscription, name: string): boolean {
    return allowsMember(this.opts.authorizer, watcher, coll, name);
  }
}
