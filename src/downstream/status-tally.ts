import { CLIENT_STATUSES, type ClientStatusCounts } from '../metrics';
import type { Severity } from './status-source';
import type { SubscriptionState } from './subscription-state';

/** statusMark: the low bits say how the state is counted (0: not counted, else 1 + its index in CLIENT_STATUSES); this bit, that it changed since. */
const DIRTY = 4;
const COUNTED = 3;

/** A dirty list this long with at most half of it still dirty is compacted (it drops what was judged or closed since). */
const COMPACT_FROM = 64;

/**
 * The per-client status figures (`xdstp_relay_clients`) kept as counts. A
 * state that changed since the last read — it was sent something, ACKed,
 * NACKed, changed its subscriptions or was held back — is judged again at
 * the next read; every other state keeps the count it had. A scrape then
 * costs what changed since the last one, not the number of clients.
 *
 * Each state carries its own mark (`statusMark`: how it is counted, and
 * whether it changed since), and the changed ones are listed once each:
 * a fan-out changes every client it reaches, and with tens of thousands of
 * them a set and a weak map of states cost a measurable part of it.
 */
export class ClientStatusTally {
  /** States marked changed, each listed once while marked; some may since have been judged or closed. */
  private dirty: SubscriptionState[] = [];
  private dirtyCount = 0;
  private readonly byType = new Map<string, Record<Severity, number>>();

  /** `judge`: a state's status now, undefined when it is not to be counted. */
  constructor(private readonly judge: (state: SubscriptionState) => Severity | undefined) {}

  changed(state: SubscriptionState): void {
    if (state.statusMark & DIRTY) return;
    state.statusMark |= DIRTY;
    this.dirtyCount++;
    this.dirty.push(state);
  }

  /** The state's stream ended: it is counted no more. */
  closed(state: SubscriptionState): void {
    this.clean(state);
    this.move(state, undefined);
  }

  /** The state's status as counted (judged first if it changed since): undefined while it subscribes nothing. */
  statusOf(state: SubscriptionState): Severity | undefined {
    if (this.clean(state)) this.move(state, this.judge(state));
    return countedAs(state);
  }

  counts(): ClientStatusCounts {
    for (const state of this.dirty) if (this.clean(state, false)) this.move(state, this.judge(state));
    this.dirty = [];
    this.dirtyCount = 0;
    return this.byType;
  }

  /** Clears the state's changed mark; whether it had one. */
  private clean(state: SubscriptionState, compact = true): boolean {
    if (!(state.statusMark & DIRTY)) return false;
    state.statusMark &= COUNTED;
    this.dirtyCount--;
    // Keeps the list within twice what is still marked (closed states are not kept long).
    if (compact && this.dirty.length >= COMPACT_FROM && this.dirty.length > 2 * this.dirtyCount) {
      this.dirty = this.dirty.filter((s) => s.statusMark & DIRTY);
    }
    return true;
  }

  private move(state: SubscriptionState, to: Severity | undefined): void {
    const from = countedAs(state);
    if (from === to) return;
    if (from !== undefined) this.countsOf(state.typeUrl)[from]--;
    if (to !== undefined) this.countsOf(state.typeUrl)[to]++;
    state.statusMark = (state.statusMark & DIRTY) | (to === undefined ? 0 : 1 + CLIENT_STATUSES.indexOf(to));
  }

  private countsOf(typeUrl: string): Record<Severity, number> {
    let c = this.byType.get(typeUrl);
    if (!c) this.byType.set(typeUrl, (c = { synced: 0, stale: 0, nacked: 0 }));
    return c;
  }
}

function countedAs(state: SubscriptionState): Severity | undefined {
  const n = state.statusMark & COUNTED;
  return n === 0 ? undefined : CLIENT_STATUSES[n - 1];
}
