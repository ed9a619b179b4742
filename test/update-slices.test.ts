/**
 * A large upstream update is applied a slice at a time: other clients are
 * served between its slices, what arrives after it waits behind it, and a
 * collection's first answer is given only once all of it is applied.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { discoveryResponseCodec } from '../src/proto/messages';
import { LISTENER } from './support/names';
import { L, setup, type FakeStream } from './support/engine-harness';

/** Far more members than one slice applies (each takes microseconds; a slice about 8 ms). */
const MEMBERS = 20_000;
const members = (version: string): Array<[string, string]> => Array.from({ length: MEMBERS }, (_, i) => [L(`g/m${i}`), version]);

/** What a delta client holds after every response it was sent: name → version. */
function held(stream: FakeStream): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of stream.decoded()) {
    for (const res of r.resources ?? []) out.set(res.name!, res.version!);
    for (const name of r.removed_resources ?? []) out.delete(name);
  }
  return out;
}

async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100_000 && !done(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(done(), what);
}

test('engine: other clients are answered while a large upstream update is still being applied', async () => {
  const { a, client, push } = setup();
  push(a, LISTENER, []);
  const big = client();
  big.subscribe([L('g/*')]);
  const small = client();
  small.subscribe([L('x')]);
  push(a, LISTENER, [[L('x'), 'v1']]);
  const late = client();
  push(a, LISTENER, members('v1'));
  let bigHeldWhenLateWasAnswered = -1;
  setImmediate(() => {
    late.subscribe([L('x')]);
    bigHeldWhenLateWasAnswered = held(big.stream).size;
  });
  await until(() => held(big.stream).size === MEMBERS, 'the large update reaches its client in full');
  assert.equal(held(late.stream).get(L('x')), 'v1', 'the late client was answered from the cache');
  assert.ok(bigHeldWhenLateWasAnswered < MEMBERS, `the late client was answered between slices (the large update had reached ${bigHeldWhenLateWasAnswered} of ${MEMBERS})`);
});

test('engine: an upstream update arriving while a large one is applied waits behind it', async () => {
  const { a, client, push } = setup();
  const c = client();
  c.subscribe([L('g/*')]);
  push(a, LISTENER, members('v1'));
  push(a, LISTENER, [[L('g/m0'), 'v2'], [L(`g/m${MEMBERS - 1}`), 'v2']], [L('g/m1')]);
  await until(() => held(c.stream).get(L(`g/m${MEMBERS - 1}`)) === 'v2', 'the later update is applied');
  const now = held(c.stream);
  assert.equal(now.get(L('g/m0')), 'v2', 'the later version stays: it was not overwritten by a slice of the earlier update');
  assert.equal(now.has(L('g/m1')), false, 'the later removal stays');
  assert.equal(now.size, MEMBERS - 1);
});

test('state (SotW): a collection answered by a large update is sent whole, never a partial state of the world', async () => {
  const { a, client, push } = setup();
  const c = client(LISTENER, 'sotw');
  c.subscribe([L('g/*')]);
  push(a, LISTENER, members('v1'));
  await until(() => c.stream.sent.length > 0, 'the client is answered');
  const first = discoveryResponseCodec.decode(c.stream.sent[0]!.bytes);
  assert.equal(first.resources!.length, MEMBERS, 'the first state of the world holds every member');
});

test('engine: an update that fails to apply in a later slice is dropped with an error, and the updates behind it still apply', async () => {
  const { a, client, push } = setup();
  const faulty = client();
  faulty.subscribe([L('g/*')]);
  const other = client();
  other.subscribe([L('x')]);
  // A fault no real client produces: sending to this client throws, from the second response on.
  let sends = 0;
  const send = faulty.stream.send.bind(faulty.stream);
  faulty.stream.send = (s, r) => {
    if (++sends > 1) throw new Error('injected send failure');
    send(s, r);
  };
  push(a, LISTENER, members('v1'));
  push(a, LISTENER, [[L('x'), 'v1']]);
  await until(() => held(other.stream).get(L('x')) === 'v1', 'the update queued behind the failed one is applied');
});
