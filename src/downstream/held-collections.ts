import { CompactMap } from '../compact-map';
import type { SubscriptionPort } from '../engine/types';
import type { ResourceKey } from '../engine/routing';

/**
 * The collections (globs, the wildcard) one client subscribes for one type
 * URL, counted by how many of its spellings name each, and what it holds
 * through them: which of its names a collection covers, and which it holds
 * as a collection's members.
 */
export class HeldCollections {
  /** Collection key → how many of the client's spellings name it (a client usually names one: no Map then). */
  private readonly counts = new CompactMap<string, number>();

  constructor(
    private readonly typeUrl: string,
    private readonly engine: SubscriptionPort,
    /** The client's names → the version it holds (the ACK ledger's `held`). */
    private readonly held: ReadonlyMap<string, string>,
  ) {}

  /** One more spelling names collection `key`. */
  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** One spelling fewer names collection `key`; it is gone with the last. */
  drop(key: string): void {
    const n = (this.counts.get(key) ?? 0) - 1;
    if (n > 0) this.counts.set(key, n);
    else this.counts.delete(key);
  }

  clear(): void {
    this.counts.clear();
  }

  /** Whether one of the client's collections covers resource `name`. */
  covers(name: string): boolean {
    return this.coveringKey(name) !== undefined;
  }

  /** Whether a collection of the client's covers `name` and would send that member under `name` itself (not another spelling). */
  coversUnderOwnName(name: string): boolean {
    return this.coveringKey(name)?.name === name;
  }

  /** `name`'s key when one of the client's collections covers it; undefined otherwise. */
  private coveringKey(name: string): ResourceKey | undefined {
    if (this.counts.size === 0) return undefined;
    const key = this.engine.heldKey(this.typeUrl, name);
    return key !== undefined && this.counts.has(key.collection) ? key : undefined;
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
