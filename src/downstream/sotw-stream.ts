import { FanOut } from '../hub/fan-out';
import { WILDCARD } from '../proto/xds-names';
import { decodeSotwRequest } from '../proto/requests';
import { AdsStream, LEGACY_WILDCARD_TYPES, type Protocol } from './ads-stream';
import type { SubscriptionState } from './subscription-state';

/**
 * A StreamAggregatedResources stream (gRPC's proxyless clients): every
 * request carries the client's whole name list for its type, which is diffed
 * against the previous one and applied to the same SubscriptionState the
 * delta stream uses. Per type one version_info and nonce.
 */
export class SotwStream extends AdsStream {
  readonly protocol: Protocol = 'sotw';
  /** Types whose requests have named a resource at least once (ends the legacy-wildcard reading of an empty list). */
  private readonly named = new Set<string>();

  protected handle(bytes: Buffer): void {
    const req = decodeSotwRequest(bytes);
    this.noteNode(req.node);
    if (!this.requireTypeUrl(req.typeUrl)) return;
    const state = this.stateFor(req.typeUrl);
    if (req.nonce !== '') {
      // A request answering an older response is stale: a newer response is
      // on its way, and the client's answer to that carries its current list.
      if (req.nonce !== state.lastNonce) return;
      if (req.errorDetail) this.noteNack(state, req.nonce, req.errorDetail.message);
      else {
        this.lastAckedNonce = req.nonce;
        state.ack(req.nonce);
      }
    }
    this.applyNames(state, req.names);
  }

  private applyNames(state: SubscriptionState, names: string[]): void {
    let wanted = names;
    if (names.length > 0) this.named.add(state.typeUrl);
    else if (!this.named.has(state.typeUrl) && LEGACY_WILDCARD_TYPES.has(state.typeUrl)) {
      // Only an empty list on a type that never named anything is the legacy wildcard.
      state.legacyWildcard = true;
      wanted = [WILDCARD];
    }
    const want = new Set(wanted);
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
