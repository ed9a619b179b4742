import { FanOut } from '../hub/fan-out';
import { WILDCARD } from '../proto/xds-names';
import { decodeDeltaRequest } from '../proto/requests';
import { AdsStream, LEGACY_WILDCARD_TYPES, type Protocol } from './ads-stream';

/**
 * A DeltaAggregatedResources stream (Envoy): subscribe / unsubscribe / ACK /
 * NACK per type URL, applied to that type's SubscriptionState.
 */
export class DeltaStream extends AdsStream {
  readonly protocol: Protocol = 'delta';

  protected handle(bytes: Buffer): void {
    const req = decodeDeltaRequest(bytes);
    this.noteNode(req.node);
    if (!this.requireTypeUrl(req.typeUrl)) return;
    if (!this.withinLimits(req.subscribe.length + req.unsubscribe.length, req.subscribe.length)) return;
    const first = !this.states.has(req.typeUrl);
    const state = this.stateFor(req.typeUrl);
    if (req.nonce !== '') {
      if (req.errorDetail) this.noteNack(state, req.nonce, req.errorDetail.message);
      else {
        this.lastAckedNonce = req.nonce;
        state.ack(req.nonce);
      }
    }
    let subscribe: readonly string[] = req.subscribe;
    // Legacy wildcard: the first request of a Listener or Cluster stream names
    // nothing. It lasts until `*` is explicitly unsubscribed; naming more
    // resources later adds to it (spec 001, "how a client specifies resources").
    if (first && subscribe.length === 0 && req.unsubscribe.length === 0 && LEGACY_WILDCARD_TYPES.has(req.typeUrl)) {
      state.legacyWildcard = true;
      subscribe = [WILDCARD];
    }
    // A plain ACK (the most frequent request by far) changes no subscription.
    if (subscribe.length === 0 && req.unsubscribe.length === 0 && !first) return;
    // Subscription changes count even with a stale nonce (spec 001).
    const fan = new FanOut();
    if (req.unsubscribe.length > 0) state.unsubscribe(req.unsubscribe, fan);
    if (first) state.setInitialVersions(req.initialVersions);
    this.subscribeInSlices(state, subscribe, first ? req.initialVersions : undefined, fan);
    fan.finish();
  }
}
