/**
 * Harness of engine.test.ts, subscription-state.test.ts and routing.test.ts:
 * the subscription engine, a client's SubscriptionState and the router alone:
 * no gRPC, no timers (grace 0, no shared tier). Upstream responses are real
 * protobuf-encoded resources handed straight to the engine; what a client is
 * told is read back from the real response encodings.
 */
import { MemoryCache } from '../../src/cache/memory-cache';
import { ResourceStore } from '../../src/cache/resource-store';
import { SubscriptionEngine } from '../../src/engine/engine';
import { FanOut } from '../../src/engine/fan-out';
import { Router } from '../../src/engine/routing';
import { checkContent } from '../../src/upstream/response-check';
import type { UpstreamPort, UpstreamSink } from '../../src/upstream/types';
import { createLogger } from '../../src/log';
import { RelayMetrics } from '../../src/metrics';
import { deltaResponseCodec, resourceCodec, type DeltaDiscoveryResponse } from '../../src/proto/messages';
import { DeltaResponses, NonceSource, SotwResponses } from '../../src/downstream/responses';
import type { OutgoingResponse } from '../../src/downstream/outgoing';
import { SubscriptionState, type StreamPort } from '../../src/downstream/subscription-state';
import { makeResource } from './origin';
import { LISTENER, xdstp } from './names';

export const L = (rest: string): string => xdstp('a', LISTENER, rest);

export class FakeUpstream implements UpstreamPort {
  readonly label: string;
  connected = true;
  /** Unsubscribes go out later, as a gRPC upstream's batches do (sendUnsubscribes sends them); else at once. */
  defersUnsubscribes = false;
  readonly subscribed = new Map<string, number>();
  readonly unsubscribed: string[] = [];
  /** Deferred unsubscribes not sent yet. */
  readonly pendingUnsubscribes = new Set<string>();
  constructor(readonly authority: string | null) {
    this.label = authority ?? '(default)';
  }
  subscribe(_t: string, name: string): void {
    this.pendingUnsubscribes.delete(name);
    this.subscribed.set(name, (this.subscribed.get(name) ?? 0) + 1);
  }
  unsubscribe(_t: string, name: string): boolean {
    this.subscribed.delete(name);
    this.unsubscribed.push(name);
    if (this.defersUnsubscribes) this.pendingUnsubscribes.add(name);
    return this.defersUnsubscribes;
  }
  /** The deferred unsubscribes go out: `sink` is told. */
  sendUnsubscribes(sink: UpstreamSink, typeUrl: string): void {
    const names = [...this.pendingUnsubscribes];
    this.pendingUnsubscribes.clear();
    sink.onUnsubscribed(this, typeUrl, names);
  }
  refetch(): void {}
  /** Whether responses count as answers to the collections they could answer (false: each crossed its subscription on the wire). */
  answers = true;
  canAnswer(): boolean {
    return this.answers;
  }
  subscriptionCount(): number {
    return this.subscribed.size;
  }
}

export class FakeStream implements StreamPort {
  static next = 1;
  readonly id = FakeStream.next++;
  supportsTtl = false;
  identity: string | undefined = undefined;
  blocked = false;
  readonly sent: OutgoingResponse[] = [];
  readonly refusals: string[] = [];
  send(_s: SubscriptionState, r: OutgoingResponse): void {
    this.sent.push(r);
  }
  refused(_s: SubscriptionState, name: string): void {
    this.refusals.push(name);
  }
  coalesced(): void {}
  /** Every delta response sent, decoded. */
  decoded(): DeltaDiscoveryResponse[] {
    return this.sent.map((r) => deltaResponseCodec.decode(r.bytes));
  }
}

export function setup(opts: { defaultUpstream?: boolean } = {}) {
  const metrics = new RelayMetrics();
  const logger = createLogger('silent');
  const a = new FakeUpstream('a');
  const upstreams = new Map<string | null, UpstreamPort>([['a', a]]);
  const legacy = new FakeUpstream(null);
  if (opts.defaultUpstream) upstreams.set(null, legacy);
  let engine: SubscriptionEngine;
  const store = new ResourceStore({ memory: new MemoryCache(), logger, onExpired: (k) => engine.onExpired(k) });
  engine = new SubscriptionEngine({
    store,
    router: new Router(new Set(['a']), opts.defaultUpstream ?? false),
    upstreams,
    metrics,
    logger,
    unsubscribeGraceMs: 0,
  });
  const nonces = new NonceSource();
  // The relay's default --max-response-bytes (gRPC's receive limit).
  const maxResponseBytes = 4 * 1024 * 1024;
  const delta = new DeltaResponses(nonces, metrics, maxResponseBytes);
  const sotw = new SotwResponses(nonces, metrics, maxResponseBytes);
  const client = (typeUrl = LISTENER, protocol: 'delta' | 'sotw' = 'delta') => {
    const stream = new FakeStream();
    const state = new SubscriptionState(typeUrl, stream, engine, protocol === 'delta' ? delta : sotw);
    const round = (fn: (fan: FanOut) => void): void => {
      const fan = new FanOut();
      fn(fan);
      fan.finish();
    };
    return {
      stream,
      state,
      subscribe: (names: string[]) => round((f) => state.subscribe(names, f)),
      unsubscribe: (names: string[]) => round((f) => state.unsubscribe(names, f)),
    };
  };
  /** An upstream response, checked and split as an upstream hands it over. */
  const push = (upstream: UpstreamPort, typeUrl: string, resources: Array<[string, string]>, removed: string[] = []) => {
    const encoded = resources.map(([name, version]) => resourceCodec.encode(makeResource(typeUrl, name, `${name}@${version}`, version)));
    const checked = checkContent(typeUrl, encoded, removed);
    if (!checked.ok) throw new Error(`the harness pushed a response the upstream would NACK: ${checked.message}`);
    engine.onResponse(upstream, { typeUrl, resources: checked.resources, removed: checked.removed, errors: [], receivedAt: process.hrtime.bigint() });
  };
  return { engine, store, a, legacy, client, push, metrics };
}
