/**
 * The checker's clients: one handle per node id, wrapping the current stream
 * (a DeltaClient or a SotwClient from test/support) and giving both protocols
 * the same face: what the client holds per type (its view), the requests of a
 * Step, reconnects, NACK-next, stalls, and a hook that sees every response
 * before the client applies it.
 */
import { isGlob, isXdstp, keyOf, subscriptionCovers } from '../../support/names';
import { DeltaClient } from '../../support/delta-client';
import { SotwClient } from '../../support/sotw-client';
import type { DeltaDiscoveryResponse, DiscoveryResponse } from '../../../src/proto/messages';
import type { Protocol } from '../types';
import { FULL_STATE_TYPES, LEGACY_WILDCARD_TYPES, decodePayload } from './universe';

/**
 * A type the model never uses. A request on it naming a refused name is
 * answered at once, after every earlier request of the stream: its answer
 * proves the relay has applied them (the stream's requests keep their order).
 */
const BARRIER_TYPE = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const barrierName = (n: number): string => `xdstp://zz/envoy.config.listener.v3.Listener/barrier-${n}`;

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
  /** Names the response carries more than once (SotW: Envoy and gRPC reject such a state of the world). */
  duplicates: string[];
}

export interface ClientHooks {
  onResponse(ev: ResponseEvent): void;
  /** A stream ended that the checker did not end. */
  onUnexpectedEnd(client: string, why: string): void;
}

/** A client's subscriptions of one type, kept the way the step vocabulary defines them. */
interface TypeSubs {
  /** Names as spelled (delta: subscribed; SotW: the list). */
  names: string[];
  /** The legacy wildcard (an empty first request of a Listener/Cluster type). */
  legacyWildcard: boolean;
  /** The current stream has sent a request of this type (the next one is not its first). */
  requestedOnStream: boolean;
}

export class ClientHandle {
  readonly subs = new Map<string, TypeSubs>();
  readonly pendingNack = new Set<string>();
  /** Types this client sent a request of since its last quiet point. */
  private readonly requestedSinceQuiet = new Set<string>();
  stalled = false;
  /** Which relay (index) the client talks to. */
  relayIndex = 0;
  private delta: DeltaClient | null = null;
  private sotw: SotwClient | null = null;
  /** SotW view: type → name (canonical, from payloads) → version. */
  private sotwView = new Map<string, Map<string, string>>();
  private streamNo = 0;
  private barrierNo = 0;
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

  /** Whether the next request of this type is the current stream's first of it. */
  isFirstRequest(typeUrl: string): boolean {
    return !(this.subs.get(typeUrl)?.requestedOnStream ?? false);
  }

  request(typeUrl: string, subscribe: string[], unsubscribe: string[]): void {
    let ts = this.subs.get(typeUrl);
    if (!ts) this.subs.set(typeUrl, (ts = { names: [], legacyWildcard: false, requestedOnStream: false }));
    const first = !ts.requestedOnStream;
    ts.requestedOnStream = true;
    // A NACK armed for this type and not yet spent is dropped: the next
    // response might have left the relay before or after this request, and
    // the request ends what the NACK would decide ("send it again") only in
    // the second case — the checker cannot tell, so it does not NACK it.
    this.pendingNack.delete(typeUrl);
    this.requestedSinceQuiet.add(typeUrl);
    const legacyType = LEGACY_WILDCARD_TYPES.has(typeUrl);
    for (const n of subscribe) if (!ts.names.includes(n)) ts.names.push(n);
    ts.names = ts.names.filter((n) => !unsubscribe.includes(n));
    if (this.delta) {
      if (first && legacyType && subscribe.length === 0 && unsubscribe.length === 0) ts.legacyWildcard = true;
      if (unsubscribe.includes('*') && !subscribe.includes('*')) ts.legacyWildcard = false;
      this.delta.send({ type_url: typeUrl, resource_names_subscribe: subscribe, resource_names_unsubscribe: unsubscribe });
      // Envoy forgets what no subscription covers any more, at once.
      if (unsubscribe.length > 0) {
        const gone = [...this.delta.held(typeUrl).keys()].filter((n) => !this.wants(typeUrl, n));
        this.delta.forget(typeUrl, gone);
      }
    } else if (this.sotw) {
      // SotW: an empty list is the legacy wildcard only until the stream names something.
      if (first && legacyType && ts.names.length === 0) ts.legacyWildcard = true;
      if (ts.names.length > 0) ts.legacyWildcard = false;
      this.sotw.request(typeUrl, [...ts.names]);
    }
  }

  /** Whether the client still asks for something that holds `name` (Envoy forgets the rest by itself). */
  private wants(typeUrl: string, name: string): boolean {
    const ts = this.subs.get(typeUrl);
    if (!ts) return false;
    if (ts.legacyWildcard && !isXdstp(name)) return true;
    return ts.names.some((s) => {
      if (s === '*') return !isXdstp(name);
      if (isGlob(s)) return keyOf(name) === name && subscriptionCovers(s, name);
      return s === name;
    });
  }

  /** End the stream and open a new one with the same node id and subscriptions. */
  reconnect(omitGlobMembers: boolean): void {
    const held = new Map<string, Map<string, string>>();
    for (const t of this.subs.keys()) held.set(t, this.view(t));
    this.endStream();
    this.open();
    for (const [t, ts] of this.subs) {
      ts.requestedOnStream = ts.names.length > 0 || ts.legacyWildcard;
      if (!ts.requestedOnStream) continue;
      if (this.delta) {
        const initial: Record<string, string> = {};
        for (const [name, version] of held.get(t) ?? []) {
          if (!this.wants(t, name)) continue;
          if (omitGlobMembers && heldThroughGlobOnly(ts.names, name)) continue;
          initial[name] = version;
        }
        // The legacy wildcard: an empty first request when nothing else is named, else an explicit `*`.
        const names = ts.legacyWildcard && ts.names.length > 0 && !ts.names.includes('*') ? ['*', ...ts.names] : [...ts.names];
        this.delta.subscribe(t, names, { initialVersions: initial });
      } else if (this.sotw) {
        this.sotw.request(t, [...ts.names]);
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
    if (this.delta) return this.delta.describe();
    const c = this.sotw;
    if (!c) return `[sotw ${this.id}] no stream`;
    const short = (t: string | undefined): string => (t ?? '').replace(/^.*\./, '');
    const lines = [`[sotw ${this.id}] ${c.sent.length} requests, ${c.responses.length} responses:`];
    for (const r of c.sent) {
      const nack = r.error_detail ? ` NACK(${r.error_detail.message})` : '';
      lines.push(`    > ${short(r.type_url)} v=${r.version_info ?? ''} n=${r.response_nonce ?? ''} [${(r.resource_names ?? []).join(', ')}]${nack}`);
    }
    for (const r of c.responses) lines.push(`    < ${short(r.type_url)} v=${r.version_info ?? ''} n=${r.nonce ?? ''} [${SotwClient.payloads(r).join(', ')}]`);
    return lines.join('\n');
  }

  /**
   * NACK the next response of `typeUrl` that carries resources — unless it
   * would be a guess: while the client is stalled (the responses it reads at
   * resume left the relay long before, and a later one may carry the same
   * version again), or when it asked for something of that type since its
   * last quiet point (a response to that request may still be on its way and
   * repeat what the NACK rejects).
   */
  armNack(typeUrl: string): void {
    if (this.stalled || this.requestedSinceQuiet.has(typeUrl)) return;
    this.pendingNack.add(typeUrl);
  }

  stall(): void {
    this.delta?.pause();
    this.stalled = true;
    this.pendingNack.clear();
  }

  resume(): void {
    this.delta?.resume();
    this.stalled = false;
  }

  // ------------------------------------------------------------ responses

  /**
   * Waits until the relay has applied every request this client sent so far
   * (see BARRIER_TYPE). False when there is no stream to ask, it is stalled,
   * or no answer came in time.
   */
  async barrier(timeoutMs = 3000): Promise<boolean> {
    if (this.stalled) return false;
    const no = ++this.barrierNo;
    const name = barrierName(no);
    try {
      if (this.delta) {
        const c = this.delta;
        c.send({ type_url: BARRIER_TYPE, resource_names_subscribe: [name], resource_names_unsubscribe: no > 1 ? [barrierName(no - 1)] : [] });
        await c.waitFor(() => c.removedNames(BARRIER_TYPE).includes(name), 'barrier answered', timeoutMs);
        this.requestedSinceQuiet.clear();
        return true;
      }
      if (this.sotw) {
        const c = this.sotw;
        const before = c.of(BARRIER_TYPE).length;
        c.request(BARRIER_TYPE, [name]);
        await c.waitFor(() => c.of(BARRIER_TYPE).length > before, 'barrier answered', timeoutMs);
        this.requestedSinceQuiet.clear();
        return true;
      }
    } catch {
      return false;
    }
    return false;
  }

  private onDelta(client: DeltaClient, resp: DeltaDiscoveryResponse): string | undefined {
    const typeUrl = resp.type_url ?? '';
    if (typeUrl === BARRIER_TYPE) return undefined;
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
      // The DeltaClient reports these itself (see envoyViolations).
      duplicates: [],
    });
    return nacked ? 'checker: nackNext' : undefined;
  }

  private onSotw(resp: DiscoveryResponse): string | undefined {
    const typeUrl = resp.type_url ?? '';
    if (typeUrl === BARRIER_TYPE) return undefined;
    const resources: Array<{ name: string; version: string }> = [];
    const problems: string[] = [];
    const duplicates: string[] = [];
    for (const any of resp.resources ?? []) {
      const p = decodePayload(any.value);
      if (!p) {
        problems.push(`a resource whose payload is not the control plane's`);
        continue;
      }
      if (any.type_url !== typeUrl) problems.push(`${p.n}: Any of type ${any.type_url} in a ${typeUrl} response`);
      if (resources.some((r) => keyOf(r.name) === keyOf(p.n))) duplicates.push(p.n);
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
    this.hooks.onResponse({ client: this.id, protocol: 'sotw', typeUrl, resources, removed, heldBefore, nacked, problems, duplicates });
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
