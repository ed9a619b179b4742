import type { SubscriptionPort } from '../engine/types';

/**
 * The collections (globs, the wildcard) one client subscribes for one type
 * URL, counted by how many of its spellings name each, and what it holds
 * through them: which of its names a collection covers, and which it holds
 * as a collection's members.
 */
export class HeldCollections {
  /**
   * Collection key → how many of the client's spellings name it, once it
   * names two collections or more. A client usually names one: that one is
   * `soleKey`, named `soleCount` times, and costs no map.
   */
  private counts: Map<string, number> | undefined;
  private soleKey: string | undefined;
  private soleCount = 0;

  constructor(
    private readonly typeUrl: string,
    private readonly engine: SubscriptionPort,
    /** The client's names → the version it holds (the ACK ledger's `held`). */
    private readonly held: ReadonlyMap<string, string>,
  ) {}

  /** One more spelling names collection `key`. */
  add(key: string): void {
    const counts = this.counts;
    if (counts) counts.set(key, (counts.get(key) ?? 0) + 1);
    else if (this.soleKey === undefined || this.soleKey === key) {
      this.soleKey = key;
      this.soleCount++;
    } else {
      this.counts = new Map([
        [this.soleKey, this.soleCount],
        [key, 1],
      ]);
      this.soleKey = undefined;
      this.soleCount = 0;
    }
  }

  /** One spelling fewer names collection `key`; it is gone with the last. */
  drop(key: string): void {
    const counts = this.counts;
    if (counts) {
      const n = (counts.get(key) ?? 0) - 1;
      if (n > 0) counts.set(key, n);
      else counts.delete(key);
    } else if (this.soleKey === key && --this.soleCount === 0) this.soleKey = undefined;
  }

  clear(): void {
    this.counts = undefined;
    this.soleKey = undefined;
    this.soleCount = 0;
  }

  /** Whether one of the client's collections covers resource `name`. */
  covers(name: string): boolean {
    if (this.counts ? this.counts.size === 0 : this.soleKey === undefined) return false;
    const key = this.engine.heldKey(this.typeUrl, name);
    return key !== undefined && (this.counts ? this.counts.has(key.collection) : this.soleKey === key.collection);
  }

  /**
   * Names the client holds as members of collection `key`: under the name a
   * member is sent with (not another spelling it subscribed by itself). A
   * snapshot: callers change `held`.
   */
  heldThrough(key: string): string[] {
    const out: string[] = [];
    for (const name of this.held.keys()) {
      const k = this.engine.heldKey(this.typeUrl, name);
      if (k?.collection === key && k.name === name) out.push(name);
    }
    return out;
  }
}
