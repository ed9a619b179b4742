/**
 * The subscription engine alone (test/support/engine-harness.ts): one upstream
 * subscription per key, fan-out of upstream changes, the cache, markers and
 * policy changes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FanOut } from '../src/engine/fan-out';
import { CLUSTER, LISTENER } from './support/names';
import { L, setup } from './support/engine-harness';
import { makeResource } from './support/origin';
import { resourceCodec } from '../src/proto/messages';

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

/** A client on a new stream subscribing `name`, listing `held` as its initial_resource_versions. */
function returningOn(client: ReturnType<typeof setup>['client'], name: string, held: Record<string, string>): ReturnType<ReturnType<typeof setup>['client']> {
  const returning = client();
  const listed = new Map(Object.entries(held));
  const fan = new FanOut();
  returning.state.setInitialVersions(listed);
  returning.state.subscribe([name], fan, listed);
  fan.finish();
  return returning;
}

test('engine: a reconnecting client\'s check on a member it claims is not counted as a client subscription', () => {
  const { a, engine, client, metrics } = setup();
  returningOn(client, L('g/*'), { [L('g/m3')]: 'v1' });
  assert.equal(a.subscribed.get(L('g/m3')), 1, 'the claimed member is asked upstream by itself');
  assert.equal(engine.clientSubscriptionCount, 1, 'the client subscribes one glob');
  assert.equal(metrics.forType(LISTENER).subscriptions, 1);
});

/** A glob with one member (g/m3 at v1) that its only watcher just dropped, the upstream sending unsubscribes later. */
function releasedGlob(): ReturnType<typeof setup> {
  const env = setup();
  env.a.defersUnsubscribes = true;
  const holder = env.client();
  holder.subscribe([L('g/*')]);
  env.push(env.a, LISTENER, [[L('g/m3'), 'v1']]);
  holder.unsubscribe([L('g/*')]);
  return env;
}

test('engine: a glob dropped by its last watcher and taken again before the unsubscribe goes upstream keeps its members, so a returning client loses none', () => {
  const { a, engine, client, push } = releasedGlob();
  const returning = returningOn(client, L('g/*'), { [L('g/m3')]: 'v1' });
  assert.deepEqual([...a.pendingUnsubscribes], [], 'the unsubscribe is taken back');
  assert.equal(a.subscribed.get(L('g/*')), 1, 'and the glob asked for again');
  // A new member is no answer to the glob; the one the client listed stays.
  push(a, LISTENER, [[L('g/m1'), 'v1']]);
  const sent = returning.stream.decoded();
  assert.deepEqual(sent.flatMap((r) => r.removed_resources ?? []), []);
  assert.deepEqual(sent.flatMap((r) => (r.resources ?? []).map((x) => x.name)), [L('g/m1')]);
  // Even told of the unsubscribe it took back, the engine keeps a glob someone wants.
  engine.onUnsubscribed(a, LISTENER, [L('g/*')]);
  assert.ok(engine.store.get(L('g/m3')), 'the glob is still wanted: nothing is dropped');
});

test('engine: a response that crossed a glob\'s subscription on the wire is not taken for its answer, so a returning client keeps what it listed', () => {
  const { a, client, push } = setup();
  const returning = returningOn(client, L('g/*'), { [L('g/m3')]: 'v1' });
  const removed = (): string[] => returning.stream.decoded().flatMap((r) => r.removed_resources ?? []);
  a.answers = false;
  push(a, LISTENER, [[L('g/m1'), 'v1']]);
  assert.deepEqual(removed(), [], 'sent before the control plane read the subscription: no word on m3');
  a.answers = true;
  push(a, LISTENER, [[L('g/m1'), 'v1']]);
  assert.deepEqual(removed(), [L('g/m3')], 'the answer itself lacks m3: it is gone');
});

test('engine: a released glob keeps its members until its unsubscribe has gone upstream, then drops them', () => {
  const { a, engine, client } = releasedGlob();
  assert.equal(engine.store.members(L('g/*')).length, 1, 'the control plane still serves it');
  assert.deepEqual([...engine.subscriptions()].map((s) => s.key), [], 'but no one subscribes it any more');
  a.sendUnsubscribes(engine, LISTENER);
  assert.equal(engine.store.members(L('g/*')).length, 0);
  const later = client();
  later.subscribe([L('g/*')]);
  assert.deepEqual(later.stream.sent, [], 'a later subscriber waits for the upstream instead of a copy nobody kept fresh');
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

test('engine: an answer to an explicit legacy name does not count as the wildcard answer, so a reconnecting wildcard client loses nothing', () => {
  const { legacy, client, push } = setup({ defaultUpstream: true });
  const explicit = client(CLUSTER);
  explicit.subscribe(['x']);
  const wildcard = returningOn(() => client(CLUSTER), '*', { x: 'v0', y: 'v1' });
  push(legacy, CLUSTER, [['x', 'v1']]);
  const removed = (): string[] => wildcard.stream.decoded().flatMap((r) => r.removed_resources ?? []);
  assert.deepEqual(removed(), [], 'y is not removed on a guess');
  push(legacy, CLUSTER, [['z', 'v1']]);
  assert.deepEqual(removed(), ['y'], 'the wildcard answer (a resource only it covers) reconciles');
});

test('engine: clients waiting on an away upstream are answered from what a warm start puts in memory after they asked', () => {
  const { a, store, engine, client } = setup();
  a.connected = false;
  const globClient = client();
  globClient.subscribe([L('g/*')]);
  const single = client();
  single.subscribe([L('x')]);
  assert.equal(globClient.stream.sent.length + single.stream.sent.length, 0, 'nothing known yet: both wait');
  const stored = (name: string, glob?: string) => ({
    key: name,
    typeUrl: LISTENER,
    version: 'v1',
    resource: resourceCodec.encode(makeResource(LISTENER, name, `${name}@v1`, 'v1')),
    ...(glob ? { glob } : {}),
  });
  for (const r of [stored(L('g/m1'), L('g/*')), stored(L('g/m2'), L('g/*')), stored(L('x'))]) store.admit(r);
  engine.answerFromMemory([L('g/m1'), L('g/m2'), L('g/*'), L('x')]);
  assert.deepEqual(globClient.stream.decoded().flatMap((r) => r.resources!.map((x) => x.name)).sort(), [L('g/m1'), L('g/m2')]);
  assert.deepEqual(single.stream.decoded().flatMap((r) => r.resources!.map((x) => x.name)), [L('x')]);
});
