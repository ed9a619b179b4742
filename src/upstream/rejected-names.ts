/**
 * Names an upstream gave up on because the control plane cannot take them
 * (poison-bisect.ts finds them): each is answered as rejected, without asking
 * the control plane again, until its retry time; and the rejections still owed
 * to names subscribed again meanwhile. Pure: the caller passes the clock and
 * decides when owed rejections are told.
 */
import { pairKey } from './poison-bisect';
import { addTo, byType, pairsOf } from './subscription-ledger';

export class RejectedNames {
  /** Rejected names → when they may be asked upstream again (ms since the epoch). */
  private readonly until = new Map<string, number>();
  /** Names subscribed again while rejected, per type URL, to be told they are rejected. */
  private readonly owed = new Map<string, Set<string>>();

  /** Rejected names still remembered (some may be past their retry time). */
  get size(): number {
    return this.until.size;
  }

  reject(typeUrl: string, name: string, until: number): void {
    this.until.set(pairKey(typeUrl, name), until);
  }

  /** Whether the name is still rejected at `now`; a name past its retry time is forgotten. */
  isRejected(typeUrl: string, name: string, now: number): boolean {
    const key = pairKey(typeUrl, name);
    const until = this.until.get(key);
    if (until === undefined) return false;
    if (until > now) return true;
    this.until.delete(key);
    return false;
  }

  /** Remembers that the name's subscriber must hear it is rejected. */
  owe(typeUrl: string, name: string): void {
    addTo(this.owed, typeUrl, name);
  }

  /** The owed rejections, taken out: names per type URL, each in the order first owed. */
  takeOwed(): Map<string, string[]> {
    const out = byType(pairsOf(this.owed));
    this.owed.clear();
    return out;
  }
}
