import { resourceUnder, type SplitResource } from '../proto/resource-bytes';
import type { StoredResource } from './types';

/**
 * One copy of a resource as a client receives it. Variants are memoized per
 * (spelling, ttl) on their entry, so every client that gets the same resource
 * the same way shares one buffer, and `id` lets responses be grouped cheaply.
 */
export interface Variant {
  readonly id: number;
  /** The cache key of the resource it is a copy of (one resource may travel under several names). */
  readonly key: string;
  readonly name: string;
  readonly version: string;
  /** The encoded `Resource` (delta responses carry it). */
  readonly bytes: Buffer;
  /** The payload `Any` alone (state-of-the-world responses carry it); undefined for heartbeats. */
  readonly payload: Buffer | undefined;
  /**
   * True once the cache no longer holds this copy (replaced by a newer
   * version, or dropped): nothing will offer it to a client again, so
   * anything memoized on it (responses.ts RecentAnswers) is dead weight.
   */
  retired: boolean;
}

let nextVariantId = 1;

const NO_ENTRIES: readonly CacheEntry[] = [];

export function makeVariant(key: string, name: string, version: string, bytes: Buffer, payload?: Buffer): Variant {
  return { id: nextVariantId++, key, name, version, bytes, payload, retired: false };
}

/** A resource as the in-process cache holds it. */
export class CacheEntry {
  private variants: Map<string, Variant> | undefined;
  private plain: Variant | undefined;
  private retired = false;
  /**
   * What the engine tells every watcher of this entry alike (its 'changed'
   * update, engine/watch-updates.ts), made once and kept here for it: the
   * cache only holds it. A weak map keyed by entry did the same, looked up
   * for every resource of every client a reconnect storm answers.
   */
  engineShared: unknown = undefined;

  constructor(
    readonly stored: StoredResource,
    /** The name glob members are sent under: the canonical URN, or the legacy name. */
    readonly name: string,
    readonly parts: Pick<SplitResource, 'bytes' | 'name' | 'ttlField' | 'selfContained' | 'ttlMs' | 'payload'>,
    /** When the relay stored this version (ms since the epoch). */
    readonly updatedAt = Date.now(),
  ) {}

  get key(): string {
    return this.stored.key;
  }

  get version(): string {
    return this.stored.version;
  }

  /** Marks every copy made of this entry (and those made later) as no longer held by the cache, or held again. */
  setRetired(retired: boolean): void {
    this.retired = retired;
    if (this.plain) this.plain.retired = retired;
    if (this.variants) for (const v of this.variants.values()) v.retired = retired;
  }

  /** The resource under `name`, with its TTL only for clients that understand TTLs. */
  variant(name: string, withTtl: boolean): Variant {
    const ttlField = withTtl ? this.parts.ttlField : undefined;
    if (name === this.name && ttlField === undefined) {
      return (this.plain ??= this.made(makeVariant(this.key, name, this.version, resourceUnder(this.parts, name, false), this.parts.payload)));
    }
    const memoKey = ttlField ? `${name}\u0001` : name;
    this.variants ??= new Map();
    let v = this.variants.get(memoKey);
    if (!v) {
      v = this.made(makeVariant(this.key, name, this.version, resourceUnder(this.parts, name, withTtl), this.parts.payload));
      this.variants.set(memoKey, v);
    }
    return v;
  }

  private made(v: Variant): Variant {
    v.retired = this.retired;
    return v;
  }
}

/**
 * The embedded cache tier: canonical key → resource, collection key → member
 * keys, and keys known not to exist. Synchronous, so the fan-out path never
 * waits on it.
 */
export class MemoryCache {
  private readonly resources = new Map<string, CacheEntry>();
  private readonly collections = new Map<string, Set<string>>();
  /**
   * Collection key → its members as a list, built on first ask and dropped on
   * any change to the collection: a reconnect storm asks for the same glob
   * once per client. Lists are never changed in place, so a caller iterating
   * one while the cache changes keeps a consistent snapshot.
   */
  private readonly memberLists = new Map<string, readonly CacheEntry[]>();
  private readonly absent = new Set<string>();
  private totalBytes = 0;

  get size(): number {
    return this.resources.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  get(key: string): CacheEntry | undefined {
    return this.resources.get(key);
  }

  set(entry: CacheEntry): void {
    const prev = this.resources.get(entry.key);
    if (prev !== entry) {
      prev?.setRetired(true);
      entry.setRetired(false);
    }
    if (prev) {
      this.totalBytes -= prev.stored.resource.length;
      if (prev.stored.glob !== undefined) this.memberLists.delete(prev.stored.glob);
    }
    this.resources.set(entry.key, entry);
    this.totalBytes += entry.stored.resource.length;
    this.absent.delete(entry.key);
    const glob = entry.stored.glob;
    if (glob !== undefined) {
      // A new version of a member is already in its collection's set (a key's collection follows from the key):
      // under churn every change would look its key up again in a set of all the collection's members.
      if (prev?.stored.glob !== glob) {
        let members = this.collections.get(glob);
        if (!members) this.collections.set(glob, (members = new Set()));
        members.add(entry.key);
        this.memberLists.delete(glob);
      }
      this.absent.delete(glob);
    }
  }

  /** Removes a resource; returns what was there. */
  delete(key: string): CacheEntry | undefined {
    const entry = this.resources.get(key);
    if (!entry) return undefined;
    this.resources.delete(key);
    entry.setRetired(true);
    this.totalBytes -= entry.stored.resource.length;
    const glob = entry.stored.glob;
    if (glob !== undefined) {
      this.memberLists.delete(glob);
      const members = this.collections.get(glob);
      if (members) {
        members.delete(key);
        if (members.size === 0) this.collections.delete(glob);
      }
    }
    return entry;
  }

  members(collectionKey: string): readonly CacheEntry[] {
    const cached = this.memberLists.get(collectionKey);
    if (cached) return cached;
    const keys = this.collections.get(collectionKey);
    if (!keys) return NO_ENTRIES;
    const out: CacheEntry[] = [];
    for (const k of keys) {
      const e = this.resources.get(k);
      if (e) out.push(e);
    }
    this.memberLists.set(collectionKey, out);
    return out;
  }

  memberCount(collectionKey: string): number {
    return this.collections.get(collectionKey)?.size ?? 0;
  }

  markAbsent(key: string): void {
    this.absent.add(key);
  }

  clearAbsent(key: string): void {
    this.absent.delete(key);
  }

  isAbsent(key: string): boolean {
    return this.absent.has(key);
  }

  /** Every resource, for debug views and stats; not for the hot path. */
  entries(): IterableIterator<CacheEntry> {
    return this.resources.values();
  }
}
