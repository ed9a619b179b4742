import type { ClientStatusCounts } from '../metrics';
import type { Severity } from './status-source';
import type { SubscriptionState } from './subscription-state';


/**
 * The per-client status figures (`xdstp_relay_clients`) kept as counts. A
 * state that changed since the last read — it was sent something, ACKed,
 * NACKed, changed its subscriptions or was held back — is judged again at
 * the next read; every other state keeps the count it had. A scrape then
 * costs what changed since the last one, not the number of clients.
 */
export class ClientStatusTally {
  private readonly dirty = new Set<SubscriptionState>();
  private readonly byType = new Map<string, Record<Severity, number>>();
  /** Each state's status as counted now (undefined: not counted, it subscribes nothing). */
  private readonly countedAs = new WeakMap<SubscriptionState, Severity>();

  /** `judge`: a state's status now, undefined when it is not to be counted. */
  constructor(private readonly judge: (state: SubscriptionState) => Severity | undefined) {}

  changed(state: SubscriptionState): void {
    this.dirty.add(state);
  }

  /** The state's stream ended: it is counted no more. */
  closed(state: SubscriptionState): void {
    this.dirty.delete(state);
    this.move(state, undefined);
  }

  /** The state's status as counted (judged first if it changed since): undefined while it subscribes nothing. */
  statusOf(state: SubscriptionState): Severity | undefined {
    if (this.dirty.delete(state)) this.move(state, this.judge(state));
    return this.countedAs.get(state);
  }

  counts(): ClientStatusCounts {
    for (const state of this.dirty) this.move(state, this.judge(state));
    this.dirty.clear();
    return this.byType;
  }

  private move(state: SubscriptionState, to: Severity | undefined): void {
    const from = this.countedAs.get(state);
    if (from === to) return;
    if (from !== undefined) this.countsOf(state.typeUrl)[from]--;
    if (to !== undefined) {
      this.countsOf(state.typeUrl)[to]++;
      this.countedAs.set(state, to);
    } else {
      this.countedAs.delete(state);
    }
  }

  private countsOf(typeUrl: string): Record<Severity, number> {
    let c = this.byType.get(typeUrl);
    if (!c) this.byType.set(typeUrl, (c = { synced: 0, stale: 0, nacked: 0 }));
    return c;
  }
}
