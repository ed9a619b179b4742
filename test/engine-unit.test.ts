/**
 * The subscription engine, a client's SubscriptionState and the router alone:
 * no gRPC, no timers (grace 0, no shared tier). Upstream responses are real
 * protobuf-encoded resources handed straight to the engine; what a client is
 * told is read back from the real response encodings.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryCache } from '../src/cache/memory-cache';
import { ResourceStore } from '../src/cache/resource-store';
import { SubscriptionEngine } from '../src/hub/engine';
import { FanOut } from '../src/hub/fan-out';
import { Router, isRejection } from '../src/hub/routing';
import type { UpstreamPort } from '../src/upstream/types';
import { createLogger } from '../src/log';
import { RelayMetrics } from '../src/metrics';
import { deltaResponseCodec, discoveryResponseCodec, resourceCodec, type DeltaDiscoveryResponse } from '../src/proto/messages';
import { DeltaResponses, NonceSource, SotwResponses, chunkBySize } from '../src/downstream/responses';
import { SubscriptionState, type OutgoingResponse, type StreamPort } from '../src/downstream/subscription-state';
import { makeResource } from './support/origin';
import { CLUSTER, LISTENER, xdstp } from './support/names';

const L = (rest: string): string => xdstp('a', LISTENER, rest);

class FakeUpstream implements UpstreamPort {
  readonly label: string;
  connected = true;
  readonly subscribed = new Map<string, number>();
  readonly unsubscribed: string[] = [];
  constructor(readonly authority: string | null) {
    this.label = authority ?? '(default)';
  }
  subscribe(_t: string, name: string): void {
    this.subscribed.set(name, (this.subscribed.get(name) ?? 0) + 1);
  }
  unsubscribe(_t: string, name: string): void {
    this.subscribed.delete(name);
    this.unsubscribed.push(name);
  }
  refetch(): void {}
  subscriptionCount(): number {
    return this.subscribed.size;
  }
}

class FakeStream implements StreamPort {
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

function setup(opts: { defaultUpstream?: boolean } = {}) {
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
  const delta = new DeltaResponses(nonces, metrics);
  const sotw = new SotwResponses(nonces, metrics);
  const client = (typeUrl = LISTENER, protocol: 'delta' | 'sotw' = 'delta') => {
    const stream = new FakeStream();
    const state = new SubscriptionState(typeUrl, stream, engine, protocol === 'delta' ? delta : sotw, protocol === 'sotw' && typeUrl === LISTENER);
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
  const push = (upstream: UpstreamPort, typeUrl: string, resources: Array<[string, string]>, removed: string[] = []) =>
    engine.onResponse(upstream, {
      typeUrl,
      resources: resources.map(([name, version]) => resourceCodec.encode(makeResource(typeUrl, name, `${name}@${version}`, version))),
      removed,
      errors: [],
      receivedAt: process.hrtime.bigint(),
    });
  return { engine, store, a, legacy, client, push, metrics };
}

// ------------------------------------------------------------------ router

test('router: equal names modulo parameter order share one key; a glob keys by its canonical URL', () => {
  const r = new Router(new Set(['a']), false);
  const one = r.route(LISTENER, L('x?b=2&a=1'));
  const two = r.route(LISTENER, L('x?a=1&b=2'));
  assert.ok(!isRejection(one) && !isRejection(two));
  assert.equal(one.key, two.key);
  const glob = r.route(LISTENER, L('g/*?b=1&a=2'));
  assert.ok(!isRejection(glob));
  assert.equal(glob.kind, 'glob');
  assert.equal(glob.key, L('g/*?a=2&b=1'));
});

test('router: a member keys to the glob it belongs to; other authorities and types are refused', () => {
  const r = new Router(new Set(['a']), false);
  const rk = r.resourceKey('a', LISTENER, L('g/m?z=1'));
  assert.ok(typeof rk !== 'string');
  assert.equal(rk.collection, L('g/*?z=1'));
  assert.equal(r.resourceKey('b', LISTENER, L('g/m')), 'foreign_authority');
  assert.equal(r.resourceKey('a', CLUSTER, L('g/m')), 'type_mismatch');
  const refused = r.route(LISTENER, 'legacy');
  assert.ok(isRejection(refused) && refused.reason === 'no_default_upstream');
});

// ------------------------------------------------------------------ engine

test('engine: two watchers of one key make one upstream subscription; the last to leave releases it', () => {
  const { a, client } = setup();
  const c1 = client();
  const c2 = client();
  c1.subscribe([L('x')]);
  c2.subscribe([L('x')]);
  assert.equal(a.subscribed.get(L('x')), 1);
  c1.unsubscribe([L('x')]);
  assert.deepEqual(a.unsubscribed, []);
  c2.unsubscribe([L('x')]);
  assert.deepEqual(a.unsubscribed, [L('x')]);
});

test('engine: an upstream change reaches exactly the watchers whose keys match, encoded once', () => {
  const { a, client, push, metrics } = setup();
  const c1 = client();
  const c2 = client();
  const other = client();
  c1.subscribe([L('x')]);
  c2.subscribe([L('x')]);
  other.subscribe([L('y')]);
  const before = (metrics.responsesEncoded as unknown as { hashMap: Record<string, { value: number }> }).hashMap[''].value;
  push(a, LISTENER, [[L('x'), 'v1']]);
  assert.equal(c1.stream.sent.length, 1);
  assert.equal(c2.stream.sent.length, 1);
  assert.equal(other.stream.sent.length, 0);
  assert.equal(c1.stream.sent[0], c2.stream.sent[0], 'one shared response');
  const after = (metrics.responsesEncoded as unknown as { hashMap: Record<string, { value: number }> }).hashMap[''].value;
  assert.equal(after - before, 1);
});

test('engine: an unsubscribed resource from upstream is never forwarded', () => {
  const { a, client, push } = setup();
  const c = client();
  c.subscribe([L('x')]);
  push(a, LISTENER, [[L('not-asked'), 'v1']]);
  assert.equal(c.stream.sent.length, 0);
});

test('engine: a new watcher of a cached key is answered from the cache without asking upstream again', () => {
  const { a, client, push } = setup();
  const c1 = client();
  c1.subscribe([L('g/*')]);
  push(a, LISTENER, [[L('g/m1'), 'v1'], [L('g/m2'), 'v1']]);
  const c2 = client();
  c2.subscribe([L('g/*')]);
  assert.equal(a.subscribed.get(L('g/*')), 1);
  assert.deepEqual(c2.stream.decoded()[0].resources!.map((r) => r.name).sort(), [L('g/m1'), L('g/m2')]);
});

test('engine: a does-not-exist marker ends with its subscription', () => {
  const { a, client, push, store } = setup();
  const c = client();
  c.subscribe([L('x')]);
  push(a, LISTENER, [], [L('x')]);
  assert.ok(store.isAbsent(L('x')));
  c.unsubscribe([L('x')]);
  assert.ok(!store.isAbsent(L('x')));
});

test('engine: a removed glob member leaves no marker when no one subscribes to it alone', () => {
  const { a, client, push, store } = setup();
  const c = client();
  c.subscribe([L('g/*')]);
  push(a, LISTENER, [[L('g/m1'), 'v1'], [L('g/m2'), 'v1']]);
  push(a, LISTENER, [], [L('g/m1')]);
  assert.ok(!store.isAbsent(L('g/m1')));
  assert.deepEqual(c.stream.decoded().at(-1)!.removed_resources, [L('g/m1')]);
});

test('engine: a policy change withdraws what the new policy denies', () => {
  const { a, client, push, engine } = setup();
  let allowed = true;
  (engine as unknown as { opts: { authorizer: unknown } }).opts.authorizer = { allows: () => allowed };
  const c = client();
  c.subscribe([L('x')]);
  push(a, LISTENER, [[L('x'), 'v1']]);
  allowed = false;
  assert.equal(engine.reauthorize(), 1);
  assert.deepEqual(c.stream.decoded().at(-1)!.removed_resources, [L('x')]);
  assert.deepEqual(a.unsubscribed, [L('x')]);
});

// ------------------------------------------------------- SubscriptionState

test('state: a refused name is answered in removed_resources and reported to the stream', () => {
  const { client } = setup();
  const c = client();
  c.subscribe(['legacy-name']);
  assert.deepEqual(c.stream.refusals, ['legacy-name']);
  assert.deepEqual(c.stream.decoded()[0].removed_resources, ['legacy-name']);
});

test('state: a NACKed version is not sent again; a newer one is', () => {
  const { a, client, push } = setup();
  const c = client();
  c.subscribe([L('x')]);
  push(a, LISTENER, [[L('x'), 'v1']]);
  c.state.nack(c.stream.sent[0].nonce, 'bad listener');
  assert.equal(c.state.rejected?.get(L('x'))?.version, 'v1');
  push(a, LISTENER, [[L('x'), 'v1']]);
  assert.equal(c.stream.sent.length, 1, 'the rejected version is not resent');
  push(a, LISTENER, [[L('x'), 'v2']]);
  assert.equal(c.stream.sent.length, 2);
  c.state.ack(c.stream.sent[1].nonce);
  assert.equal(c.state.rejected, undefined);
});

test('state: a slow client gets the latest version per name in one response when it reads again', () => {
  const { a, client, push } = setup();
  const c = client();
  c.subscribe([L('g/*')]);
  push(a, LISTENER, [[L('g/m1'), 'v1']]);
  c.state.ack(c.stream.sent[0].nonce);
  c.stream.blocked = true;
  push(a, LISTENER, [[L('g/m1'), 'v2']]);
  push(a, LISTENER, [[L('g/m1'), 'v3'], [L('g/m2'), 'v1']]);
  assert.equal(c.stream.sent.length, 1);
  assert.deepEqual(c.state.clientView(L('g/m1')), { version: 'v1', pending: true }, 'the client still has v1');
  c.stream.blocked = false;
  c.state.drainBacklog();
  assert.equal(c.stream.sent.length, 2);
  const last = c.stream.decoded()[1];
  assert.deepEqual(
    last.resources!.map((r) => `${r.name}@${r.version}`).sort(),
    [`${L('g/m1')}@v3`, `${L('g/m2')}@v1`],
  );
});

test('state (SotW): Listener responses carry the whole state of the world; a deletion is an omission', () => {
  const { a, client, push } = setup();
  const c = client(LISTENER, 'sotw');
  c.subscribe([L('x'), L('y')]);
  push(a, LISTENER, [[L('x'), 'v1'], [L('y'), 'v1']]);
  push(a, LISTENER, [[L('y'), 'v2']]);
  const last = discoveryResponseCodec.decode(c.stream.sent.at(-1)!.bytes);
  assert.equal(last.resources!.length, 2, 'both listeners, though only y changed');
  push(a, LISTENER, [], [L('x')]);
  const afterDelete = discoveryResponseCodec.decode(c.stream.sent.at(-1)!.bytes);
  assert.equal(afterDelete.resources!.length, 1);
  assert.equal(afterDelete.version_info, afterDelete.nonce);
});

test('responses: chunking keeps runs under the limit and puts an oversized item alone', () => {
  const chunks = chunkBySize([3, 3, 3, 10, 1], (n) => n, 6);
  assert.deepEqual(chunks, [[3, 3], [3], [10], [1]]);
  assert.deepEqual(chunkBySize([], (n: number) => n, 6), [[]]);
});

test('state (SotW): clients with the same state of the world share one encoding', () => {
  const { a, client, push } = setup();
  const c1 = client(LISTENER, 'sotw');
  const c2 = client(LISTENER, 'sotw');
  c1.subscribe([L('y'), L('x')]);
  c2.subscribe([L('x'), L('y')]);
  push(a, LISTENER, [[L('x'), 'v1'], [L('y'), 'v1']]);
  push(a, LISTENER, [[L('x'), 'v2']]);
  assert.equal(c1.stream.sent.at(-1), c2.stream.sent.at(-1));
});

test('engine: an answer to an explicit legacy name does not count as the wildcard answer, so a reconnecting wildcard client loses nothing', () => {
  const { legacy, client, push } = setup({ defaultUpstream: true });
  const explicit = client(CLUSTER);
  explicit.subscribe(['x']);
  const wildcard = client(CLUSTER);
  const fan = new FanOut();
  wildcard.state.setInitialVersions(new Map([['x', 'v0'], ['y', 'v1']]));
  wildcard.state.subscribe(['*'], fan, new Map([['x', 'v0'], ['y', 'v1']]));
  fan.finish();
  push(legacy, CLUSTER, [['x', 'v1']]);
  const removed = (): string[] => wildcard.stream.decoded().flatMap((r) => r.removed_resources ?? []);
  assert.deepEqual(removed(), [], 'y is not removed on a guess');
  push(legacy, CLUSTER, [['z', 'v1']]);
  assert.deepEqual(removed(), ['y'], 'the wildcard answer (a resource only it covers) reconciles');
});

test('responses: clients asking one after another for the same large set share one encoding, never a nonce twice on a stream', () => {
  const { a, client, push } = setup();
  const first = client();
  first.subscribe([L('g/*')]);
  push(a, LISTENER, Array.from({ length: 10 }, (_, i): [string, string] => [L(`g/m${i}`), 'v1']));
  const second = client();
  second.subscribe([L('g/*')]);
  const third = client();
  third.subscribe([L('g/*')]);
  assert.equal(second.stream.sent[0], third.stream.sent[0], 'one shared encoding for both answers');
  // The same client asking again gets the same content under a new nonce.
  second.subscribe([L('g/*')]);
  assert.equal(second.stream.sent.length, 2);
  assert.notEqual(second.stream.sent[1].nonce, second.stream.sent[0].nonce);
  assert.equal(second.stream.decoded()[1].resources!.length, 10);
});

test('state: re-subscribing a glob resends its members, and a member subscribed under another spelling stays held', () => {
  const { client, push, a } = setup();
  const c = client();
  const spelled = L('g/m?k=1&j=2');
  c.subscribe([spelled, L('g/*?j=2&k=1')]);
  push(a, LISTENER, [[L('g/m?j=2&k=1'), 'v1']]);
  assert.equal(c.state.held.get(spelled), 'v1');
  const before = c.stream.sent.length;
  c.subscribe([L('g/*?j=2&k=1')]);
  const resent = c.stream.decoded().slice(before).flatMap((r) => (r.resources ?? []).map((x) => x.name));
  assert.deepEqual(resent, [L('g/m?j=2&k=1')], 'the member again, under its canonical name');
  assert.equal(c.state.held.get(spelled), 'v1', 'the other spelling is still held');
});
