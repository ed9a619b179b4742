/**
 * The checker's clients: one handle per node id, wrapping the current stream
 * (a DeltaClient or a SotwClient from test/support) and giving both protocols
 * the same face: what the client holds per type (its view), the requests of a
 * Step, reconnects, NACK-next, stalls, and a hook that sees every response
 * before the client applies it.
 */
import { keyOf, subscriptionCovers, isGlob } from '../../support/names';
import { DeltaClient } from '../../support/delta-client';
import { SotwClient } from '../../support/sotw-client';
import type { DeltaDiscoveryResponse, DiscoveryResponse } from '../../../src/proto/messages';
import type { Protocol } from '../types';
import { FULL_STATE_TYPES, LEGACY_WILDCARD_TYPES, decodePayload } from './universe';

/** One response as the checker judges it, before the client applies it. */
export interface ResponseEvent {
  client: string;
  protocol: Protocol;
  typeUrl: string;
  /** Resources in the response: name as sent (delta) or from the payload (SotW), and version. */
  resources: Array<{ name: string; version: string }>;
  /** Delta removed_resources; for SotW full-state types, held names the response leaves out. */
  removed: string[];
  /** What the client held of the type on this stream just before. */
  heldBefore: Map<string, string>;
  /** The client rejects this response (a NACK the step asked for). */
  nacked: boolean;
  /** Problems found in the response itself (undecodable payload, Envoy-style rejects). */
  problems: string[];
}

export interface ClientHooks {
  onResponse(ev: ResponseEvent): void;
  /** A stream ended that the checker did not end. */
  onUnexpectedEnd(client: string, why: string): void;
}

export class ClientHandle {
  /** Subscriptions per type as spelled, `*` included when the client is on the wildcard. */
  readonly subs = new Map<string, string[]>();
  /** Types in the order the client first asked for them. */
  readonly types: string[] = [];
  readonly pendingNack = new Set<string>();
  stalled = false;
  /** Which relay (index) the client talks to. */
  relayIndex = 0;
  private delta: DeltaClient | null = null;
  private sotw: SotwClient | null = null;
  /** SotW view: type → name (canonical, from payloads) → version. */
  private sotwView = new Map<string, Map<string, string>>();
  private streamNo = 0;
  /** Set while the checker itself ends the stream (reconnect, relay restart, disconnect). */
  private ending = false;

  constructor(
    readonly id: string,
    readonly protocol: Protocol,
    private readonly target: (relayIndex: number) => string,
    private readonly hooks: ClientHooks,
  ) {
    this.open();
  }

  private open(): void {
    const no = ++this.streamNo;
    this.ending = false;
    this.stalled = false;
    const target = this.target(this.relayIndex);
    if (this.protocol === 'delta') {
      let client: DeltaClient | null = null;
      client = new DeltaClient(target, {
        nodeId: this.id,
        reject: (resp) => (client && no === this.streamNo ? this.onDelta(client, resp) : undefined),
      });
      this.delta = client;
      void client.ended.then((s) => {
        if (no === this.streamNo && !this.ending) this.hooks.onUnexpectedEnd(this.id, `delta stream ended: ${s.code} ${s.details}`);
      });
    } else {
      this.sotwView = new Map();
      const client = new SotwClient(target, {
        nodeId: this.id,
        reject: (resp) => (no === this.streamNo ? this.onSotw(resp) : undefined),
      });
      this.sotw = client;
      client.events.on('change', () => {
        if (client.status && no === this.streamNo && !this.ending) {
          this.ending = true;
          this.hooks.onUnexpectedEnd(this.id, `sotw stream ended: ${client.status.code} ${client.status.details}`);
        }
      });
    }
  }

  /** What the client holds of a type now (delta: as named on the wire; SotW: payload names). */
  view(typeUrl: string): Map<string, string> {
    if (this.delta) return this.delta.held(typeUrl);
    return new Map(this.sotwView.get(typeUrl) ?? []);
  }

  /** Problems the DeltaClient itself found in responses (what Envoy would NACK). */
  envoyViolations(): string[] {
    return this.delta ? [...this.delta.violations] : [];
  }

  /** Whether the next request of this type is the stream's first of it. */
  isFirstRequest(typeUrl: string): boolean {
    return !this.types.includes(typeUrl);
  }

  request(typeUrl: string, subscribe: string[], unsubscribe: string[]): void {
    const first = this.isFirstRequest(typeUrl);
    if (first) this.types.push(typeUrl);
    let list = this.subs.get(typeUrl) ?? [];
    if (first && subscribe.length === 0 && unsubscribe.length === 0 && LEGACY_WILDCARD_TYPES.has(typeUrl)) list = ['*'];
    list = list.filter((n) => !unsubscribe.includes(n));
    for (const n of subscribe) if (!list.includes(n)) list.push(n);
    this.subs.set(typeUrl, list);
    if (this.delta) {
      this.delta.send({ type_url: typeUrl, resource_names_subscribe: subscribe, resource_names_unsubscribe: unsubscribe });
    } else if (this.sotw) {
      // The legacy wildcard is an empty first list; afterwards it stays in the list as `*`.
      this.sotw.request(typeUrl, first && list.length === 1 && list[0] === '*' && subscribe.length === 0 ? [] : list);
    }
  }

  stall(): void {
    this.delta?.pause();
    this.stalled = true;
  }

  resume(): void {
    this.delta?.resume();
    this.stalled = false;
  }

  /** End the stream and open a new one with the same node id and subscriptions. */
  reconnect(omitGlobMembers: boolean): void {
    const held = new Map<string, Map<string, string>>();
    for (const t of this.types) held.set(t, this.view(t));
    this.endStream();
    this.open();
    for (const t of this.types) {
      const list = this.subs.get(t) ?? [];
      if (list.length === 0) continue;
      if (this.delta) {
        const initial: Record<string, string> = {};
        for (const [name, version] of held.get(t) ?? []) {
          if (omitGlobMembers && heldThroughGlobOnly(list, name)) continue;
          initial[name] = version;
        }
        // Only the wildcard: an empty first request says it again (like Envoy).
        const names = list.length === 1 && list[0] === '*' ? [] : list;
        this.delta.subscribe(t, names, { initialVersions: initial });
      } else if (this.sotw) {
        this.sotw.request(t, list.length === 1 && list[0] === '*' ? [] : list);
      }
    }
  }

  /** The client goes away, or its relay is about to go away. */
  endStream(): void {
    this.ending = true;
    this.delta?.close();
    this.sotw?.close();
    this.delta = null;
    this.sotw = null;
  }

  /** The checker is about to stop the relay under this client: its stream ending is expected. */
  expectEnd(): void {
    this.ending = true;
  }

  describe(): string {
    return this.delta ? this.delta.describe() : `[sotw ${this.id}] ${this.sotw?.responses.length ?? 0} responses`;
  }

  // ------------------------------------------------------------ responses

  private onDelta(client: DeltaClient, resp: DeltaDiscoveryResponse): string | undefined {
    const typeUrl = resp.type_url ?? '';
    const resources: Array<{ name: string; version: string }> = [];
    const problems: string[] = [];
    for (const r of resp.resources ?? []) {
      const name = r.name ?? '';
      const p = decodePayload(r.resource?.value);
      if (!p) problems.push(`${name}: payload is not the control plane's`);
      else if (p.v !== (r.version ?? '')) problems.push(`${name}: version ${r.version} but payload of ${p.v}`);
      else if (keyOf(p.n) !== keyOf(name)) problems.push(`${name}: carries the payload of ${p.n}`);
      resources.push({ name, version: r.version ?? '' });
    }
    const nacked = this.pendingNack.has(typeUrl) && resources.length > 0;
    if (nacked) this.pendingNack.delete(typeUrl);
    this.hooks.onResponse({
      client: this.id,
      protocol: 'delta',
      typeUrl,
      resources,
      removed: [...(resp.removed_resources ?? [])],
      heldBefore: client.held(typeUrl),
      nacked,
      problems,
    });
    return nacked ? 'checker: nackNext' : undefined;
  }

  private onSotw(resp: DiscoveryResponse): string | undefined {
    const typeUrl = resp.type_url ?? '';
    const resources: Array<{ name: string; version: string }> = [];
    const problems: string[] = [];
    for (const any of resp.resources ?? []) {
      const p = decodePayload(any.value);
      if (!p) {
        problems.push(`a resource whose payload is not the control plane's`);
        continue;
      }
      if (any.type_url !== typeUrl) problems.push(`${p.n}: Any of type ${any.type_url} in a ${typeUrl} response`);
      resources.push({ name: p.n, version: p.v });
    }
    let view = this.sotwView.get(typeUrl);
    if (!view) this.sotwView.set(typeUrl, (view = new Map()));
    const heldBefore = new Map(view);
    const fullState = FULL_STATE_TYPES.has(typeUrl);
    const present = new Set(resources.map((r) => keyOf(r.name)));
    const removed = fullState ? [...view.keys()].filter((n) => !present.has(n)) : [];
    const nacked = this.pendingNack.has(typeUrl) && resources.length > 0;
    if (nacked) this.pendingNack.delete(typeUrl);
    this.hooks.onResponse({ client: this.id, protocol: 'sotw', typeUrl, resources, removed, heldBefore, nacked, problems });
    if (!nacked) {
      if (fullState) view.clear();
      for (const r of resources) view.set(keyOf(r.name), r.version);
    }
    return nacked ? 'checker: nackNext' : undefined;
  }
}

/** Held only through a glob (not also named directly): Envoy leaves such names out of initial_resource_versions. */
function heldThroughGlobOnly(subs: string[], name: string): boolean {
  const direct = subs.some((s) => !isGlob(s) && s !== '*' && subscriptionCovers(s, name));
  const viaGlob = subs.some((s) => isGlob(s) && subscriptionCovers(s, name));
  return viaGlob && !direct;
}
