import { FanOut } from '../engine/fan-out';
import { decodeSotwRequest } from '../proto/requests';
import { AdsStream } from './ads-stream';
import type { Protocol } from './protocol-rules';
import type { SubscriptionState } from './subscription-state';

/**
 * A StreamAggregatedResources stream (gRPC's proxyless clients): every
 * request carries the client's whole name list for its type, which is diffed
 * against the previous one and applied to the same SubscriptionState the
 * delta stream uses. Per type one version_info and nonce.
 */
export class SotwStream extends AdsStream {
  readonly protocol: Protocol = 'sotw';

  protected handle(bytes: Buffer): void {
    // A client may repeat its node in every request: only the first is decoded, the others checked.
    const req = decodeSotwRequest(bytes, this.node === undefined);
    this.noteNode(req.node);
    if (!this.requireTypeUrl(req.typeUrl)) return;
    const state = this.stateFor(req.typeUrl);
    if (!this.acknowledge(state, req.nonce, req.errorDetail)) return;
    this.applyNames(state, state.requestedNames(req.names));
  }

  private applyNames(state: SubscriptionState, names: readonly string[]): void {
    const want = new Set(names);
    const gone: string[] = [];
    for (const name of state.names.keys()) if (!want.has(name)) gone.push(name);
    const added: string[] = [];
    for (const name of want) if (!state.names.has(name)) added.push(name);
    if (gone.length === 0 && added.length === 0) return;
    if (!this.withinLimits(added.length + gone.length, added.length - gone.length)) return;
    const fan = new FanOut();
    // New names first: a list that swaps one spelling of a glob for another
    // keeps its subscription (and the full state its members), instead of
    // releasing it and answering with the members left out.
    const allowed = this.refuseTooLong(state, added, fan);
    if (allowed.length > 0) state.subscribe(allowed, fan);
    if (gone.length > 0) state.unsubscribe(gone, fan);
    fan.finish();
  }
}
