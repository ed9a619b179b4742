/**
 * A client's SubscriptionState and the responses it sends, over the engine
 * alone (test/support/engine-harness.ts): refusals, NACKs, slow clients,
 * state-of-the-world encodings shared between clients, chunking.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deltaResponseCodec, discoveryResponseCodec, resourceCodec } from '../src/proto/messages';
import { DeltaResponses, NonceSource, chunkBySize, contentHash } from '../src/downstream/responses';
import type { Pending } from '../src/downstream/outgoing';
import { makeVariant, type Variant } from '../src/cache/memory-cache';
import { FanOut } from '../src/engine/fan-out';
import { RelayMetrics } from '../src/metrics';
import { makeResource } from './support/origin';
import { LISTENER } from './support/names';
import { L, setup } from './support/engine-harness';

test('state: a refused name is answered in removed_resources and reported to the stream', () => {
  const { client } = setup();
  const c = client();
  c.subscribe(['legacy-name']);
  assert.deepEqual(c.stream.refusals, ['legacy-name']);
  assert.deepEqual(c.stream.decoded()[0].removed_resources, ['legacy-name']);
});

test('state: refused names are counted as the client asks for and drops them', () => {
  const { client } = setup();
  const c = client();
  c.subscribe(['legacy-a', 'legacy-b', L('x')]);
  c.subscribe(['legacy-a']);
  assert.equal(c.state.refusedCount, 2, 'asking again for a refused name counts it once');
  c.unsubscribe(['legacy-a', L('x')]);
  assert.equal(c.state.refusedCount, 1);
  c.state.close();
  assert.equal(c.state.refusedCount, 0);
});

test('state: a NACKed version is not sent again; a newer one is', () => {
  const { a, client, push } = setup();
  const c = client();
  c.subscribe([L('x')]);
  push(a, LISTENER, [[L('x'), 'v1']]);
  c.state.nack(c.stream.sent[0].nonce, 'bad listener');
  assert.equal(c.state.ledger.rejected?.get(L('x'))?.version, 'v1');
  push(a, LISTENER, [[L('x'), 'v1']]);
  assert.equal(c.stream.sent.length, 1, 'the rejected version is not resent');
  push(a, LISTENER, [[L('x'), 'v2']]);
  assert.equal(c.stream.sent.length, 2);
  c.state.ack(c.stream.sent[1].nonce);
  assert.equal(c.state.ledger.rejected, undefined);
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

test('state (SotW): dropping a name its glob still covers sends nothing, and the next state of the world still carries it', () => {
  const { a, client, push } = setup();
  const c = client(LISTENER, 'sotw');
  c.subscribe([L('g/*'), L('g/m1')]);
  push(a, LISTENER, [[L('g/m1'), 'v1'], [L('g/m2'), 'v1']]);
  const before = c.stream.sent.length;
  c.unsubscribe([L('g/m1')]);
  assert.equal(c.stream.sent.length, before, 'a list that only drops a name gets no answer');
  push(a, LISTENER, [[L('g/m2'), 'v2']]);
  const last = discoveryResponseCodec.decode(c.stream.sent.at(-1)!.bytes);
  assert.equal(last.resources!.length, 2, 'g/m1, still held through the glob, and the changed g/m2');
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

/** Two id pairs whose responses' contents hash alike (a birthday search: about 2^16 tries). */
function collidingIdPairs(): [[number, number], [number, number]] {
  const seen = new Map<number, number>();
  const pair = (i: number): [number, number] => [1_000_000 + i, 2_000_000 + i];
  const hashOf = (ids: [number, number]): number => contentHash(ids.map((id) => ({ id })) as unknown as Variant[], []);
  for (let i = 0; ; i++) {
    const h = hashOf(pair(i));
    const j = seen.get(h);
    if (j !== undefined) return [pair(j), pair(i)];
    seen.set(h, i);
  }
}

test('responses: two different answers whose contents hash alike are each sent as they are, in one round and the next', () => {
  const [ids1, ids2] = collidingIdPairs();
  // Members of over 1 KB, so each answer is also kept for later rounds.
  const variant = (id: number, name: string): Variant => {
    const bytes = Buffer.from(resourceCodec.encode(makeResource(LISTENER, L(name), 'x'.repeat(1100), 'v1')));
    return { ...makeVariant(L(name), L(name), 'v1', bytes), id };
  };
  const one = ids1.map((id, i) => variant(id, `g/one${i}`));
  const two = ids2.map((id, i) => variant(id, `g/two${i}`));
  const builder = new DeltaResponses(new NonceSource(), new RelayMetrics(), 4 * 1024 * 1024);
  const { client } = setup();
  const pending = (adds: Variant[]): Pending => ({ adds, removes: [], errors: [], forced: false });
  const names = (rs: { bytes: Buffer }[]): string[] => rs.flatMap((r) => deltaResponseCodec.decode(r.bytes).resources!.map((x) => x.name!));
  const round = new FanOut();
  assert.deepEqual(names(builder.build(client().state, pending(one), round)), one.map((v) => v.name));
  assert.deepEqual(names(builder.build(client().state, pending(two), round)), two.map((v) => v.name), 'the same round');
  assert.deepEqual(names(builder.build(client().state, pending(one), new FanOut())), one.map((v) => v.name), 'a later round');
  assert.deepEqual(names(builder.build(client().state, pending(two), new FanOut())), two.map((v) => v.name), 'a later round, again');
});

test('responses: clients asking one after another for a glob of a few large members share one encoding', () => {
  const { a, client, push } = setup();
  const first = client();
  first.subscribe([L('g/*')]);
  // Four members of over 1 KB each, as sidecars of one service ask for them.
  const large = `v1-${'x'.repeat(1100)}`;
  push(a, LISTENER, Array.from({ length: 4 }, (_, i): [string, string] => [L(`g/m${i}`), large]));
  const second = client();
  second.subscribe([L('g/*')]);
  const third = client();
  third.subscribe([L('g/*')]);
  assert.equal(second.stream.sent[0], third.stream.sent[0], 'one shared encoding for both answers');
  assert.equal(third.stream.decoded()[0].resources!.length, 4);
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
