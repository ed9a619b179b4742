/**
 * What an upstream is asked for, per type URL: the names the relay wants
 * subscribed, and the subscribe / unsubscribe changes not yet written to the
 * stream. Pure bookkeeping: no stream, no timers (grpc-upstream.ts decides
 * when a change goes out).
 */
import type { NamePair } from './poison-bisect';

/** One type URL's pending change, in the order its names were asked for. */
export interface PendingChange {
  typeUrl: string;
  subscribe: string[];
  unsubscribe: string[];
}

export function addTo(map: Map<string, Set<string>>, typeUrl: string, name: string): void {
  let set = map.get(typeUrl);
  if (!set) map.set(typeUrl, (set = new Set()));
  set.add(name);
}

function removeFrom(map: Map<string, Set<string>>, typeUrl: string, name: string): void {
  map.get(typeUrl)?.delete(name);
}

export function pairsOf(map: Map<string, Set<string>>): NamePair[] {
  const out: NamePair[] = [];
  for (const [typeUrl, names] of map) for (const name of names) out.push({ typeUrl, name });
  return out;
}

/** Names of `pairs` grouped by type URL, types in first-seen order. */
export function byType(pairs: readonly NamePair[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const p of pairs) {
    let names = out.get(p.typeUrl);
    if (!names) out.set(p.typeUrl, (names = []));
    names.push(p.name);
  }
  return out;
}

export class SubscriptionLedger {
  private readonly desired = new Map<string, Set<string>>();
  private readonly toSubscribe = new Map<string, Set<string>>();
  private readonly toUnsubscribe = new Map<string, Set<string>>();

  has(typeUrl: string, name: string): boolean {
    return this.desired.get(typeUrl)?.has(name) ?? false;
  }

  /** Wanted, and to be asked for (an unsubscribe still pending is taken back). */
  subscribe(typeUrl: string, name: string): void {
    addTo(this.desired, typeUrl, name);
    removeFrom(this.toUnsubscribe, typeUrl, name);
    addTo(this.toSubscribe, typeUrl, name);
  }

  /** No longer wanted: to be unsubscribed. False (nothing changes) when it was not wanted. */
  unsubscribe(typeUrl: string, name: string): boolean {
    if (!this.has(typeUrl, name)) return false;
    removeFrom(this.desired, typeUrl, name);
    removeFrom(this.toSubscribe, typeUrl, name);
    addTo(this.toUnsubscribe, typeUrl, name);
    return true;
  }

  /** A wanted name to be asked for again. False when it is not wanted. */
  refetch(typeUrl: string, name: string): boolean {
    if (!this.has(typeUrl, name)) return false;
    addTo(this.toSubscribe, typeUrl, name);
    return true;
  }

  /** Given up on (the control plane cannot take it): neither wanted nor asked for, and never unsubscribed. */
  drop(typeUrl: string, name: string): void {
    removeFrom(this.desired, typeUrl, name);
    removeFrom(this.toSubscribe, typeUrl, name);
  }

  /** Wanted names in all. */
  get size(): number {
    let n = 0;
    for (const names of this.desired.values()) n += names.size;
    return n;
  }

  /** Wanted names per type URL. */
  counts(): Record<string, number> {
    const types: Record<string, number> = {};
    for (const [t, names] of this.desired) types[t] = names.size;
    return types;
  }

  /** Every wanted name. */
  wanted(): NamePair[] {
    return pairsOf(this.desired);
  }

  /** The pending subscribes, taken out (they go somewhere else: a poison search's queue). */
  takeSubscribes(): NamePair[] {
    const pairs = pairsOf(this.toSubscribe);
    this.toSubscribe.clear();
    return pairs;
  }

  /** Every pending change with something in it, taken out: types with subscribes first, each in the order first asked. */
  takeChanges(): PendingChange[] {
    const types = new Set([...this.toSubscribe.keys(), ...this.toUnsubscribe.keys()]);
    const out: PendingChange[] = [];
    for (const typeUrl of types) {
      const subscribe = [...(this.toSubscribe.get(typeUrl) ?? [])];
      const unsubscribe = [...(this.toUnsubscribe.get(typeUrl) ?? [])];
      if (subscribe.length > 0 || unsubscribe.length > 0) out.push({ typeUrl, subscribe, unsubscribe });
    }
    this.toSubscribe.clear();
    this.toUnsubscribe.clear();
    return out;
  }

  /** Forgets every pending change (a new stream starts from the wanted set); returns the unsubscribes it drops, which the new stream never subscribes. */
  clearPending(): PendingChange[] {
    const dropped: PendingChange[] = [];
    for (const [typeUrl, names] of this.toUnsubscribe) if (names.size > 0) dropped.push({ typeUrl, subscribe: [], unsubscribe: [...names] });
    this.toSubscribe.clear();
    this.toUnsubscribe.clear();
    return dropped;
  }
}
