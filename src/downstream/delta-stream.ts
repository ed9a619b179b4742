import { FanOut } from '../engine/fan-out';
import { decodeDeltaRequest } from '../proto/requests';
import { AdsStream } from './ads-stream';
import type { Protocol } from './protocol-rules';

/**
 * A DeltaAggregatedResources stream (Envoy): subscribe / unsubscribe / ACK /
 * NACK per type URL, applied to that type's SubscriptionState.
 */
export class DeltaStream extends AdsStream {
  readonly protocol: Protocol = 'delta';

  protected handle(bytes: Buffer): void {
    const req = decodeDeltaRequest(bytes, this.node === undefined);
    this.noteNode(req.node);
    if (!this.requireTypeUrl(req.typeUrl)) return;
    if (!this.withinLimits(req.subscribe.length + req.unsubscribe.length, req.subscribe.length)) return;
    const first = this.stateOf(req.typeUrl) === undefined;
    const state = this.stateFor(req.typeUrl);
    if (!this.acknowledge(state, req.nonce, req.errorDetail)) return;
    const subscribe = state.requestedNames(req.subscribe, req.unsubscribe.length > 0);
    // A plain ACK (the most frequent request by far) changes no subscription.
    if (subscribe.length === 0 && req.unsubscribe.length === 0 && !first) return;
    // Subscription changes count even with a stale nonce.
    const fan = new FanOut();
    if (req.unsubscribe.length > 0) state.unsubscribe(req.unsubscribe, fan);
    if (first) state.setInitialVersions(req.initialVersions);
    this.subscribeInSlices(state, subscribe, first ? req.initialVersions : undefined, fan);
    fan.finish();
  }
}
