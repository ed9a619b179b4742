import { CacheEntry, makeVariant, type MemoryCache, type Variant } from '../cache/memory-cache';
import type { SharedStore, StoreBatch, StoredResource } from '../cache/types';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { encodeDeltaResponse } from '../proto/delta-response';
import { assembleResource, splitResource, type ResourceParts } from '../proto/resource-bytes';
import { isRejection, type DropReason, type Router } from './routing';
import { Subscription } from './subscription';
import { TOLD_ABSENT, type ClientView, type OutgoingResponse, type UpstreamPort } from './types';
import type { UpstreamUpdate } from '../upstream/types';

/** google.rpc.Code NOT_FOUND in a resource_errors entry: the resource does not exist. */
const GRPC_NOT_FOUND = 5;

/** Payloads of this type are redirects (glob members may be redirected, spec 000). */
const RESOURCE_LOCATOR_TYPE = 'type.googleapis.com/xds.core.v3.ResourceLocator';
const EXPIRY_SWEEP_MS = 250;

/** What one client is about to be told in one response. */
class Pending {
  readonly adds: Variant[] = [];
  readonly removes: string[] = [];

  get empty(): boolean {
    return this.adds.length === 0 && this.removes.length === 0;
  }
}

type Accumulator = Map<ClientView, Pending>;

function pendingFor(acc: Accumulator, view: ClientView): Pending {
  let p = acc.get(view);
  if (!p) acc.set(view, (p = new Pending()));
  return p;
}

export interface HubOptions {
  cache: MemoryCache;
  shared?: SharedStore;
  router: Router;
  /** Upstream per authority; the `null` key is the default upstream for legacy names. */
  upstreams: ReadonlyMap<string | null, UpstreamPort>;
  metrics: RelayMetrics;
  logger: Logger;
  unsubscribeGraceMs: number;
  /** Share one encoding among clients that get identical responses (off only for benchmarks). */
  shareResponses: boolean;
}

/**
 * The subscription index and fan-out. Clients join subscriptions by canonical
 * key; the first one makes the upstream subscribe, the last one leaving starts
 * the grace timer. Upstream changes land in the cache, then go to exactly the
 * clients whose subscriptions match, encoded once per distinct response.
 */
export class Hub {
  private readonly index = new Map<string, Subscription>();
  private readonly expiring = new Set<string>();
  /**
   * Keys whose cached version a client was left holding a different version of
   * (fleet mode, see `keepsHeld`). `versionsFor` leaves them out, so the
   * upstream sends its current version, which then reaches that client.
   */
  private readonly divergent = new Set<string>();
  private readonly sweepTimer: NodeJS.Timeout;
  private nonceCounter = 0;
  private clientSubscriptions = 0;

  constructor(private readonly opts: HubOptions) {
    this.sweepTimer = setInterval(() => this.sweepExpired(), EXPIRY_SWEEP_MS);
    this.sweepTimer.unref();
  }

  get clientSubscriptionCount(): number {
    return this.clientSubscriptions;
  }

  get upstreamSubscriptionCount(): number {
    return this.index.size;
  }

  subscriptions(): IterableIterator<Subscription> {
    return this.index.values();
  }

  /** Stream-level nonce source; unique across the process, hence within every stream. */
  nextNonce(): string {
    return (++this.nonceCounter).toString(36);
  }

  /** Versions a reconnecting client says it holds; they count as held. */
  setInitialVersions(view: ClientView, versions: Record<string, string>): void {
    for (const [name, version] of Object.entries(versions)) view.held.set(name, version);
  }

  subscribe(view: ClientView, names: readonly string[], initialNames?: readonly string[]): void {
    const pending = new Pending();
    for (const name of names) this.subscribeOne(view, name, pending);
    if (initialNames) this.reconcileInitial(view, initialNames, pending);
    this.sendPrivate(view, pending);
  }

  unsubscribe(view: ClientView, names: readonly string[]): void {
    for (const name of names) this.leave(view, name);
  }

  /** The client stream is gone: leave every subscription it held. */
  dropView(view: ClientView): void {
    for (const name of [...view.subs.keys()]) this.leave(view, name);
  }

  /**
   * Resources and removals from one upstream DeltaDiscoveryResponse. This hub
   * cannot forward resource_errors to clients; a NOT_FOUND one is a removal.
   */
  applyUpstream(upstream: UpstreamPort, update: UpstreamUpdate): void {
    const { typeUrl } = update;
    const acc: Accumulator = new Map();
    const batch: StoreBatch = { put: [], remove: [], absent: [] };
    const removed = [...update.removed, ...update.errors.filter((e) => e.code === GRPC_NOT_FOUND).map((e) => e.name)];
    for (const bytes of update.resources) this.applyResource(upstream, typeUrl, bytes, acc, batch);
    for (const name of removed) this.applyRemoval(upstream, typeUrl, name, acc, batch);
    this.writeThrough(batch);
    this.flush(acc, update.receivedAt);
  }

  /**
   * Names the upstream gave up on (subscribing them ends its stream): their
   * clients hear they are removed. Marked absent in memory only, so later
   * joiners get the same answer; it is no fact to share with the fleet.
   */
  rejectUpstream(typeUrl: string, names: readonly string[]): void {
    const acc: Accumulator = new Map();
    for (const name of names) {
      const route = this.opts.router.route(typeUrl, name);
      if (isRejection(route)) continue;
      const sub = this.index.get(route.key);
      if (!sub) continue;
      this.opts.cache.markAbsent(route.key);
      for (const [view, spelling] of sub.clients) {
        const pending = pendingFor(acc, view);
        if (!sub.isCollection) this.tellAbsent(view, spelling, pending);
        else if (!pending.removes.includes(spelling)) pending.removes.push(spelling);
      }
    }
    this.flush(acc, undefined);
  }

  /** initial_resource_versions for an upstream (re)subscription of `names`, from the cache. */
  versionsFor(typeUrl: string, names: Iterable<string>): Record<string, string> {
    const out: Record<string, string> = {};
    for (const name of names) {
      const route = this.opts.router.route(typeUrl, name);
      if (isRejection(route)) continue;
      if (route.kind === 'glob' || route.kind === 'wildcard') {
        for (const m of this.opts.cache.members(route.key)) if (!this.divergent.has(m.key)) out[m.name] = m.version;
      } else {
        const entry = this.opts.cache.get(route.key);
        if (entry && !this.divergent.has(entry.key)) out[entry.name] = entry.version;
      }
    }
    return out;
  }

  /** Cancels timers; subscriptions are left to die with the process. */
  close(): void {
    clearInterval(this.sweepTimer);
    for (const sub of this.index.values()) if (sub.graceTimer) clearTimeout(sub.graceTimer);
  }

  // --- client side -------------------------------------------------------

  private subscribeOne(view: ClientView, name: string, pending: Pending): void {
    const existing = view.subs.get(name);
    if (existing !== undefined) {
      // Re-subscribing a singleton asks for it again (delta xDS): forget we sent it.
      if (existing && !existing.isCollection) {
        view.held.delete(name);
        this.answerFromCache(view, existing, name, pending);
      }
      return;
    }
    const route = this.opts.router.route(view.typeUrl, name);
    if (isRejection(route)) {
      view.subs.set(name, null);
      this.tellAbsent(view, name, pending);
      this.opts.metrics.rejectedSubscriptions.inc({ reason: route.reason });
      this.opts.logger.warn(
        { client: view.client.id, typeUrl: view.typeUrl, name, reason: route.reason, detail: route.message },
        'subscription cannot be routed; answered in removed_resources',
      );
      return;
    }
    let sub = this.index.get(route.key);
    if (!sub) {
      const upstream = this.opts.upstreams.get(route.authority);
      if (!upstream) throw new Error(`router accepted ${name} but no upstream serves ${String(route.authority)}`);
      sub = new Subscription(route.key, route.kind, view.typeUrl, upstream, route.upstreamName);
      this.index.set(route.key, sub);
      if (this.opts.shared && upstream.connected) this.dropUnclaimed(sub);
      upstream.subscribe(view.typeUrl, route.upstreamName);
    } else if (sub.graceTimer) {
      clearTimeout(sub.graceTimer);
      sub.graceTimer = undefined;
    }
    sub.clients.set(view, name);
    view.subs.set(name, sub);
    this.clientSubscriptions++;
    this.opts.metrics.forType(view.typeUrl).subscriptions.inc();
    this.answerFromCache(view, sub, name, pending, this.keepsHeld(sub));
  }

  /**
   * Fleet mode (a shared tier is configured) with the subscription's upstream
   * away: the cached copy may be older than what a client got from another
   * relay, and versions are opaque, so the client keeps what it holds; the
   * upstream settles it on reconnect (see `divergent`).
   */
  private keepsHeld(sub: Subscription): boolean {
    return this.opts.shared !== undefined && !sub.upstream.connected;
  }

  /** The client holds `name` at a version other than `version` (or, without one, at any version). */
  private holdsOther(view: ClientView, name: string, version?: string): boolean {
    const held = view.held.get(name);
    return held !== undefined && held !== TOLD_ABSENT && held !== version;
  }

  /**
   * A new subscription with its upstream up: cached data no other subscription
   * kept fresh (a warm start's leftovers) is dropped, so the upstream answers;
   * it would never retract a glob member it deleted meanwhile.
   */
  private dropUnclaimed(sub: Subscription): void {
    const { cache } = this.opts;
    if (sub.isCollection) {
      for (const m of cache.members(sub.key)) if (!this.index.has(m.key)) cache.delete(m.key);
    } else {
      const entry = cache.get(sub.key);
      if (entry && !(entry.stored.glob !== undefined && this.index.has(entry.stored.glob))) cache.delete(sub.key);
    }
  }

  private answerFromCache(view: ClientView, sub: Subscription, spelling: string, pending: Pending, keepHeld = false): void {
    const { cache, metrics } = this.opts;
    if (!sub.isCollection) {
      const entry = cache.get(sub.key);
      if (entry) {
        if (keepHeld && this.holdsOther(view, spelling, entry.version)) this.divergent.add(entry.key);
        else this.offer(view, entry.variant(spelling, view.supportsTtl), pending);
      } else if (cache.isAbsent(sub.key)) {
        if (!(keepHeld && this.holdsOther(view, spelling))) this.tellAbsent(view, spelling, pending);
      } else {
        this.miss(view, sub, spelling);
        return;
      }
    } else {
      const members = cache.members(sub.key);
      if (members.length > 0) {
        for (const m of members) {
          if (keepHeld && this.holdsOther(view, m.name, m.version)) this.divergent.add(m.key);
          else this.offer(view, m.variant(m.name, false), pending);
        }
      } else if (cache.isAbsent(sub.key) && sub.kind === 'glob') {
        // Kept from a client holding anything of this type: it may hold members.
        if (!(keepHeld && view.held.size > 0)) pending.removes.push(spelling);
      } else {
        this.miss(view, sub, spelling);
        return;
      }
    }
    metrics.cacheHits.inc({ tier: 'memory' });
  }

  private miss(view: ClientView, sub: Subscription, spelling: string): void {
    this.opts.metrics.cacheMisses.inc();
    if (sub.refetch) sub.upstream.refetch(sub.typeUrl, sub.upstreamName);
    // A glob is read through only while its upstream is away: the upstream
    // would never retract a member Redis still holds but it deleted.
    if (this.opts.shared?.healthy && !(sub.isCollection && sub.upstream.connected)) void this.readThrough(view, sub, spelling);
  }

  /** An L1 miss: look in the shared tier; whatever upstream says later still wins. */
  private async readThrough(view: ClientView, sub: Subscription, spelling: string): Promise<void> {
    const shared = this.opts.shared;
    if (!shared) return;
    try {
      const found = sub.isCollection ? await shared.getGlobMembers(sub.key) : await shared.getResource(sub.key);
      if (found === undefined || view.subs.get(spelling) !== sub || this.index.get(sub.key) !== sub) return;
      const { cache } = this.opts;
      const known = (): boolean =>
        sub.isCollection
          ? cache.memberCount(sub.key) > 0 || (sub.kind === 'glob' && cache.isAbsent(sub.key))
          : cache.get(sub.key) !== undefined || cache.isAbsent(sub.key);
      // What the upstream said meanwhile wins (and a glob's upstream that came back answers it).
      if (!known() && !(sub.isCollection && sub.upstream.connected)) {
        if (found === 'absent') {
          cache.markAbsent(sub.key);
        } else {
          const now = Date.now();
          for (const stored of Array.isArray(found) ? found : [found]) {
            if (stored.expiresAt !== undefined && stored.expiresAt <= now) continue;
            if (!cache.get(stored.key)) this.admit(stored);
          }
        }
      }
      if (!known()) return; // nothing usable: the upstream answers
      const pending = new Pending();
      // Shared-tier data never replaces a version the client holds: Redis may lag behind it.
      this.answerFromCache(view, sub, spelling, pending, true);
      if (!pending.empty) this.opts.metrics.cacheHits.inc({ tier: 'shared' });
      this.sendPrivate(view, pending);
    } catch (err) {
      this.opts.logger.debug({ err, key: sub.key }, 'shared cache read failed');
    }
  }

  /** Puts a stored resource (from the shared tier) into L1. */
  admit(stored: StoredResource): CacheEntry | undefined {
    let parts: ResourceParts;
    try {
      parts = splitResource(stored.resource);
    } catch {
      return undefined;
    }
    const name = stored.key.startsWith('legacy:') ? parts.name : stored.key;
    const entry = new CacheEntry(stored, name, parts);
    this.opts.cache.set(entry);
    if (stored.expiresAt !== undefined) this.expiring.add(stored.key);
    return entry;
  }

  /** Names a reconnecting client listed that no longer exist in a collection it subscribes to. */
  private reconcileInitial(view: ClientView, names: readonly string[], pending: Pending): void {
    const { cache, router } = this.opts;
    for (const name of names) {
      if (view.subs.has(name) || !view.held.has(name)) continue;
      const held = router.heldKey(view.typeUrl, name);
      if (!held) continue;
      const coll = this.index.get(held.collection);
      const known = cache.memberCount(held.collection) > 0 || cache.isAbsent(held.collection);
      if (coll && coll.clients.has(view) && known && !cache.get(held.key) && !this.keepsHeld(coll)) this.retract(view, name, pending);
    }
  }

  private leave(view: ClientView, spelling: string): void {
    const sub = view.subs.get(spelling);
    if (sub === undefined) return;
    view.subs.delete(spelling);
    if (sub === null) {
      view.held.delete(spelling);
      return;
    }
    sub.clients.delete(view);
    this.clientSubscriptions--;
    this.opts.metrics.forType(view.typeUrl).subscriptions.dec();
    if (sub.isCollection) {
      for (const m of this.opts.cache.members(sub.key)) if (!view.subs.has(m.name)) view.held.delete(m.name);
    } else {
      view.held.delete(spelling);
    }
    if (sub.clients.size === 0) this.scheduleRelease(sub);
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
    if (sub.clients.size > 0 || this.index.get(sub.key) !== sub) return;
    this.index.delete(sub.key);
    sub.upstream.unsubscribe(sub.typeUrl, sub.upstreamName);
    const { cache } = this.opts;
    cache.clearAbsent(sub.key);
    if (sub.isCollection) {
      for (const m of cache.members(sub.key)) if (!this.index.has(m.key)) cache.delete(m.key);
    } else {
      const entry = cache.get(sub.key);
      if (entry && !(entry.stored.glob !== undefined && this.index.has(entry.stored.glob))) cache.delete(sub.key);
    }
  }

  // --- upstream side -----------------------------------------------------

  private drop(reason: DropReason | 'unsubscribed', upstream: UpstreamPort, name: string): void {
    this.opts.metrics.droppedResources.inc({ reason });
    this.opts.logger.debug({ upstream: upstream.label, name, reason }, 'upstream resource dropped');
  }

  private applyResource(upstream: UpstreamPort, typeUrl: string, bytes: Buffer, acc: Accumulator, batch: StoreBatch): void {
    let parts: ResourceParts;
    try {
      parts = splitResource(bytes);
    } catch {
      this.drop('malformed', upstream, '');
      return;
    }
    const rk = this.opts.router.resourceKey(upstream.authority, typeUrl, parts.name);
    if (typeof rk === 'string') {
      this.drop(rk, upstream, parts.name);
      return;
    }
    if (parts.hasBody && parts.payloadType !== typeUrl && parts.payloadType !== RESOURCE_LOCATOR_TYPE) {
      this.drop('type_mismatch', upstream, parts.name);
      return;
    }
    const single = this.index.get(rk.key);
    const coll = this.index.get(rk.collection);
    if (!single && !coll) {
      this.drop('unsubscribed', upstream, parts.name);
      return;
    }
    if (!parts.hasBody) {
      this.applyHeartbeat(rk.key, parts, single, acc, batch);
      return;
    }
    const { cache } = this.opts;
    const stored: StoredResource = { key: rk.key, typeUrl, version: parts.version, resource: bytes, glob: rk.collection };
    if (parts.ttlMs !== undefined && parts.ttlMs > 0) stored.expiresAt = Date.now() + parts.ttlMs;
    const entry = new CacheEntry(stored, rk.name, parts);
    if (parts.doNotCache) {
      if (single) single.refetch = true;
      if (coll) coll.refetch = true;
      cache.delete(rk.key);
      cache.clearAbsent(rk.key);
    } else {
      cache.set(entry);
      this.divergent.delete(rk.key);
      batch.put.push(stored);
      if (stored.expiresAt !== undefined) this.expiring.add(rk.key);
      if (single) single.refetch = false;
    }
    if (single) {
      for (const [view, spelling] of single.clients) {
        this.offer(view, entry.variant(spelling, view.supportsTtl), pendingFor(acc, view));
      }
    }
    if (coll) {
      const variant = entry.variant(rk.name, false);
      for (const view of coll.clients.keys()) this.offer(view, variant, pendingFor(acc, view));
    }
  }

  /** A TTL refresh: only singleton subscribers that understand TTLs hear about it. */
  private applyHeartbeat(key: string, parts: ResourceParts, single: Subscription | undefined, acc: Accumulator, batch: StoreBatch): void {
    const entry = this.opts.cache.get(key);
    if (!entry || entry.version !== parts.version) return;
    if (parts.ttlMs !== undefined && parts.ttlMs > 0) {
      entry.stored.expiresAt = Date.now() + parts.ttlMs;
      batch.put.push(entry.stored);
    }
    if (!single) return;
    for (const [view, spelling] of single.clients) {
      if (!view.supportsTtl || view.held.get(spelling) !== parts.version) continue;
      const beat = makeVariant(spelling, parts.version, assembleResource(spelling, parts.body, parts.ttlField));
      pendingFor(acc, view).adds.push(beat);
    }
  }

  private applyRemoval(upstream: UpstreamPort, typeUrl: string, name: string, acc: Accumulator, batch: StoreBatch): void {
    const rk = this.opts.router.removalKey(upstream.authority, typeUrl, name);
    if (!rk) {
      this.drop('foreign_authority', upstream, name);
      return;
    }
    if (rk.isCollection) this.emptyCollection(rk.key, acc, batch);
    else this.removeResource(rk.key, acc, batch);
  }

  private emptyCollection(collection: string, acc: Accumulator, batch: StoreBatch): void {
    const members = this.opts.cache.members(collection);
    // Removing the last member announces the empty collection itself.
    for (const m of members) this.removeResource(m.key, acc, batch);
    if (members.length === 0) this.announceEmpty(collection, acc, batch);
  }

  private announceEmpty(collection: string, acc: Accumulator, batch: StoreBatch): void {
    this.opts.cache.markAbsent(collection);
    batch.absent.push(collection);
    const coll = this.index.get(collection);
    if (!coll || coll.kind !== 'glob') return;
    for (const [view, spelling] of coll.clients) {
      const p = pendingFor(acc, view);
      if (!p.removes.includes(spelling)) p.removes.push(spelling);
    }
  }

  private removeResource(key: string, acc: Accumulator, batch: StoreBatch): void {
    const { cache } = this.opts;
    const entry = cache.delete(key);
    this.expiring.delete(key);
    this.divergent.delete(key);
    cache.markAbsent(key);
    batch.remove.push({ key, glob: entry?.stored.glob });
    const single = this.index.get(key);
    if (single) {
      for (const [view, spelling] of single.clients) this.tellAbsent(view, spelling, pendingFor(acc, view));
    }
    const collection = entry?.stored.glob;
    if (entry && collection !== undefined) {
      const coll = this.index.get(collection);
      if (coll) for (const view of coll.clients.keys()) this.retract(view, entry.name, pendingFor(acc, view));
      if (cache.memberCount(collection) === 0) this.announceEmpty(collection, acc, batch);
    }
  }

  private sweepExpired(): void {
    if (this.expiring.size === 0) return;
    const now = Date.now();
    const acc: Accumulator = new Map();
    const batch: StoreBatch = { put: [], remove: [], absent: [] };
    for (const key of this.expiring) {
      const entry = this.opts.cache.get(key);
      if (!entry || entry.stored.expiresAt === undefined) {
        this.expiring.delete(key);
      } else if (entry.stored.expiresAt <= now) {
        this.removeResource(key, acc, batch);
      }
    }
    this.writeThrough(batch);
    this.flush(acc, undefined);
  }

  private writeThrough(batch: StoreBatch): void {
    const shared = this.opts.shared;
    if (!shared || (batch.put.length === 0 && batch.remove.length === 0 && batch.absent.length === 0)) return;
    shared.write(batch).catch((err: unknown) => this.opts.logger.debug({ err }, 'shared cache write failed'));
  }

  // --- per-client deltas -------------------------------------------------

  /** Queues `variant` unless the client already holds that version. */
  private offer(view: ClientView, variant: Variant, pending: Pending): void {
    if (view.held.get(variant.name) === variant.version) return;
    view.held.set(variant.name, variant.version);
    pending.adds.push(variant);
  }

  /** Singleton does-not-exist: said once, until the client holds it again. */
  private tellAbsent(view: ClientView, name: string, pending: Pending): void {
    if (view.held.get(name) === TOLD_ABSENT) return;
    view.held.set(name, TOLD_ABSENT);
    pending.removes.push(name);
  }

  /** A collection member went away: tell clients that hold it. */
  private retract(view: ClientView, name: string, pending: Pending): void {
    const held = view.held.get(name);
    if (held === undefined || held === TOLD_ABSENT) return;
    view.held.delete(name);
    pending.removes.push(name);
  }

  private sendPrivate(view: ClientView, pending: Pending, cause?: bigint): void {
    if (pending.empty) return;
    const nonce = this.nextNonce();
    const bytes = encodeDeltaResponse(view.typeUrl, pending.adds.map((v) => v.bytes), pending.removes, nonce);
    this.opts.metrics.responsesEncoded.inc();
    view.client.push(view, { typeUrl: view.typeUrl, nonce, bytes, adds: pending.adds, removes: pending.removes, cause });
  }

  /** Clients whose pending deltas are identical get one shared encoding. */
  private flush(acc: Accumulator, cause: bigint | undefined): void {
    if (acc.size === 0) return;
    if (!this.opts.shareResponses) {
      for (const [view, pending] of acc) this.sendPrivate(view, pending, cause);
    } else {
      // The common case, one changed resource and nothing removed, groups by the
      // shared variant object itself: no per-client signature string.
      const groups = new Map<string | Variant, { views: ClientView[]; pending: Pending }>();
      for (const [view, pending] of acc) {
        if (pending.empty) continue;
        if (pending.adds.length === 1 && pending.removes.length === 0) {
          const single = groups.get(pending.adds[0]);
          if (single) single.views.push(view);
          else groups.set(pending.adds[0], { views: [view], pending });
          continue;
        }
        let sig = view.typeUrl;
        for (const v of pending.adds) sig += `,${v.id}`;
        if (pending.removes.length > 0) sig += `\n${pending.removes.join('\n')}`;
        const group = groups.get(sig);
        if (group) group.views.push(view);
        else groups.set(sig, { views: [view], pending });
      }
      for (const { views, pending } of groups.values()) {
        const typeUrl = views[0].typeUrl;
        const nonce = this.nextNonce();
        const bytes = encodeDeltaResponse(typeUrl, pending.adds.map((v) => v.bytes), pending.removes, nonce);
        this.opts.metrics.responsesEncoded.inc();
        const response: OutgoingResponse = { typeUrl, nonce, bytes, adds: pending.adds, removes: pending.removes, cause };
        for (const view of views) view.client.push(view, response);
      }
    }
    if (cause !== undefined) {
      this.opts.metrics.pushLatency.observe(Number(process.hrtime.bigint() - cause) / 1e9);
    }
  }
}
