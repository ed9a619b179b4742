import type { Logger } from '../log';
import { splitResource, type SplitResource } from '../proto/resource-bytes';
import { CacheEntry, type MemoryCache } from './memory-cache';
import type { SharedStore, StoreBatch, StoredResource } from './types';

const EXPIRY_SWEEP_MS = 250;

/** What the store knows about a key right now. */
export type Lookup = 'known' | 'absent' | 'unknown';

export interface ResourceStoreOptions {
  memory: MemoryCache;
  shared?: SharedStore;
  logger: Logger;
  /** Resources whose TTL ran out; the engine tells their watchers. */
  onExpired(keys: string[]): void;
}

/**
 * The only writer of the in-process cache (L1) and of the shared tier (L2,
 * Redis). Upstream changes, TTL expiry, does-not-exist markers, read-through
 * and the fleet "never roll a client back" rule live here; the subscription
 * engine decides *what* to write (it knows which keys are subscribed) and the
 * store keeps both tiers consistent.
 *
 * Writes between `begin()` and `commit()` reach the shared tier as one batch.
 */
export class ResourceStore {
  readonly memory: MemoryCache;
  private readonly expiring = new Set<string>();
  /**
   * Keys a client was left holding a different version of (fleet mode, see the
   * engine's keepsHeld): `versionsFor` leaves them out, so the upstream sends
   * its current version, which then reaches that client.
   */
  private readonly divergent = new Set<string>();
  private batch: StoreBatch | undefined;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(private readonly opts: ResourceStoreOptions) {
    this.memory = opts.memory;
    this.sweepTimer = setInterval(() => this.sweepExpired(), EXPIRY_SWEEP_MS);
    this.sweepTimer.unref();
  }

  get shared(): SharedStore | undefined {
    return this.opts.shared;
  }

  /** True when a shared tier is configured (fleet mode). */
  get fleet(): boolean {
    return this.opts.shared !== undefined;
  }

  close(): void {
    clearInterval(this.sweepTimer);
  }

  // --- reads -------------------------------------------------------------

  get(key: string): CacheEntry | undefined {
    return this.memory.get(key);
  }

  members(collection: string): readonly CacheEntry[] {
    return this.memory.members(collection);
  }

  memberCount(collection: string): number {
    return this.memory.memberCount(collection);
  }

  isAbsent(key: string): boolean {
    return this.memory.isAbsent(key);
  }

  /** Whether a singleton (or, with `collection`, a collection) is known in memory. */
  lookup(key: string, collection: boolean): Lookup {
    if (collection) {
      if (this.memory.memberCount(key) > 0) return 'known';
    } else if (this.memory.get(key)) {
      return 'known';
    }
    return this.memory.isAbsent(key) ? 'absent' : 'unknown';
  }

  /** Version to offer upstream as held; undefined for keys a client was left diverging on. */
  heldVersion(entry: CacheEntry): string | undefined {
    return this.divergent.has(entry.key) ? undefined : entry.version;
  }

  markDivergent(key: string): void {
    this.divergent.add(key);
  }

  // --- writes ------------------------------------------------------------

  /** Starts collecting shared-tier writes; `commit` sends them as one batch. */
  begin(): void {
    this.batch ??= { put: [], remove: [], absent: [] };
  }

  commit(): void {
    const batch = this.batch;
    this.batch = undefined;
    const shared = this.opts.shared;
    if (!shared || !batch || (batch.put.length === 0 && batch.remove.length === 0 && batch.absent.length === 0)) return;
    shared.write(batch).catch((err: unknown) => this.opts.logger.debug({ err }, 'shared cache write failed'));
  }

  private pending(): StoreBatch {
    // A write outside begin/commit (timers, read-through) is its own batch.
    if (this.batch) return this.batch;
    this.begin();
    queueMicrotask(() => this.commit());
    return this.batch!;
  }

  /** Stores a resource received from upstream; returns the entry fan-out uses. */
  put(stored: StoredResource, name: string, parts: SplitResource): CacheEntry {
    const entry = new CacheEntry(stored, name, parts);
    this.memory.set(entry);
    this.divergent.delete(stored.key);
    this.pending().put.push(stored);
    if (stored.expiresAt !== undefined) this.expiring.add(stored.key);
    else this.expiring.delete(stored.key);
    return entry;
  }

  /**
   * A resource marked do_not_cache: it is not stored (in either tier) and any
   * older copy is dropped, so the next subscriber is fetched upstream again.
   */
  uncacheable(stored: StoredResource, name: string, parts: SplitResource): CacheEntry {
    this.forget(stored.key);
    this.memory.clearAbsent(stored.key);
    const entry = new CacheEntry(stored, name, parts);
    // Never held by the cache: its copies are not worth memoizing answers on.
    entry.setRetired(true);
    return entry;
  }

  /** A TTL heartbeat for the current version: the expiry moves on. False when the version is not the cached one. */
  heartbeat(key: string, version: string, ttlMs: number | undefined): CacheEntry | undefined {
    const entry = this.memory.get(key);
    if (!entry || entry.version !== version) return undefined;
    if (ttlMs !== undefined && ttlMs > 0) {
      entry.stored.expiresAt = Date.now() + ttlMs;
      this.pending().put.push(entry.stored);
    }
    return entry;
  }

  /** The resource went away upstream (or expired). Returns what was cached. */
  remove(key: string): CacheEntry | undefined {
    const entry = this.forget(key);
    this.pending().remove.push({ key, glob: entry?.stored.glob });
    return entry;
  }

  /**
   * Remembers that `key` (a singleton or a collection) does not exist. The
   * engine only calls this for keys a live subscription asked about, and
   * clears it when that subscription ends. `share`: the upstream said so
   * explicitly (an empty collection), so the fleet may rely on it; a
   * removed or expired resource is only deleted from the shared tier.
   */
  markAbsent(key: string, share: boolean): void {
    this.memory.markAbsent(key);
    if (share) this.pending().absent.push(key);
  }

  clearAbsent(key: string): void {
    this.memory.clearAbsent(key);
  }

  /**
   * Drops cached data that no subscription keeps fresh: `key` itself (a
   * singleton) or, for a collection, its members — each unless `claimed`
   * says another subscription still covers it. The one place this rule lives
   * (release after grace, a new subscription over warm leftovers, warm-start eviction).
   */
  evictUnclaimed(key: string, collection: boolean, claimed: (key: string) => boolean): number {
    let n = 0;
    if (collection) {
      for (const m of this.memory.members(key)) {
        if (!claimed(m.key)) {
          this.forget(m.key);
          n++;
        }
      }
      return n;
    }
    const entry = this.memory.get(key);
    if (entry && !(entry.stored.glob !== undefined && claimed(entry.stored.glob))) {
      this.forget(key);
      n++;
    }
    return n;
  }

  /** Every cached entry no subscription claims is dropped from memory (it stays in the shared tier). */
  evictAllUnclaimed(claimed: (key: string) => boolean): number {
    const drop: string[] = [];
    for (const e of this.memory.entries()) {
      if (claimed(e.key) || (e.stored.glob !== undefined && claimed(e.stored.glob))) continue;
      drop.push(e.key);
    }
    for (const key of drop) this.forget(key);
    return drop.length;
  }

  /** Memory only: removes an entry and what tracks it. */
  private forget(key: string): CacheEntry | undefined {
    this.expiring.delete(key);
    this.divergent.delete(key);
    return this.memory.delete(key);
  }

  // --- shared tier ---------------------------------------------------------

  /** Puts a resource from the shared tier into memory (warm start, read-through). */
  admit(stored: StoredResource): CacheEntry | undefined {
    if (stored.expiresAt !== undefined && stored.expiresAt <= Date.now()) return undefined;
    let parts: SplitResource;
    try {
      parts = splitResource(stored.resource);
    } catch {
      return undefined;
    }
    const name = stored.key.startsWith('legacy:') ? parts.name : stored.key;
    const entry = new CacheEntry(stored, name, parts);
    this.memory.set(entry);
    if (stored.expiresAt !== undefined) this.expiring.add(stored.key);
    return entry;
  }

  /**
   * An L1 miss: look the key up in the shared tier and admit what it holds,
   * unless memory learned the key meanwhile (`stillWanted` false, or the
   * upstream answered first). Resolves true when memory now knows the key.
   */
  async readThrough(key: string, collection: boolean, stillWanted: () => boolean): Promise<boolean> {
    const shared = this.opts.shared;
    if (!shared?.healthy) return false;
    try {
      const found = collection ? await shared.getGlobMembers(key) : await shared.getResource(key);
      if (found === undefined || !stillWanted()) return false;
      // What the upstream said meanwhile wins.
      if (this.lookup(key, collection) !== 'unknown') return true;
      if (found === 'absent') {
        this.memory.markAbsent(key);
      } else {
        for (const stored of Array.isArray(found) ? found : [found]) {
          if (!this.memory.get(stored.key)) this.admit(stored);
        }
      }
      return this.lookup(key, collection) !== 'unknown';
    } catch (err) {
      this.opts.logger.debug({ err, key }, 'shared cache read failed');
      return false;
    }
  }

  // --- expiry --------------------------------------------------------------

  private sweepExpired(): void {
    if (this.expiring.size === 0) return;
    const now = Date.now();
    const expired: string[] = [];
    for (const key of this.expiring) {
      const entry = this.memory.get(key);
      if (!entry || entry.stored.expiresAt === undefined) this.expiring.delete(key);
      else if (entry.stored.expiresAt <= now) expired.push(key);
    }
    if (expired.length > 0) this.opts.onExpired(expired);
  }
}
