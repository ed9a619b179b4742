/**
 * The bookkeeping pieces of a gRPC upstream alone, without gRPC or timers:
 * what it is asked for (subscription-ledger.ts), the names it gave up on
 * (rejected-names.ts) and how each server last fared (server-history.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { byType, SubscriptionLedger } from '../src/upstream/subscription-ledger';
import { RejectedNames } from '../src/upstream/rejected-names';
import { ServerHistory } from '../src/upstream/server-history';
import type { UpstreamError } from '../src/upstream/types';
import { CLUSTER, LISTENER } from './support/names';

// ---------------------------------------------------------------- ledger

test('ledger: subscribes and unsubscribes are taken out per type, subscribed types first, each once', () => {
  const l = new SubscriptionLedger();
  l.subscribe(LISTENER, 'a');
  l.subscribe(CLUSTER, 'c');
  l.subscribe(LISTENER, 'b');
  l.subscribe(LISTENER, 'a');
  assert.equal(l.size, 3);
  assert.deepEqual(l.counts(), { [LISTENER]: 2, [CLUSTER]: 1 });
  assert.deepEqual(l.takeChanges(), [
    { typeUrl: LISTENER, subscribe: ['a', 'b'], unsubscribe: [] },
    { typeUrl: CLUSTER, subscribe: ['c'], unsubscribe: [] },
  ]);
  assert.deepEqual(l.takeChanges(), [], 'taken out: nothing is pending any more');
  assert.equal(l.unsubscribe(CLUSTER, 'c'), true);
  assert.equal(l.unsubscribe(CLUSTER, 'c'), false, 'a name not wanted cannot be unsubscribed');
  assert.equal(l.has(CLUSTER, 'c'), false);
  assert.deepEqual(l.takeChanges(), [{ typeUrl: CLUSTER, subscribe: [], unsubscribe: ['c'] }]);
  assert.deepEqual(l.wanted(), [
    { typeUrl: LISTENER, name: 'a' },
    { typeUrl: LISTENER, name: 'b' },
  ]);
});

test('ledger: a name subscribed and unsubscribed before the flush goes out as the last of the two', () => {
  const l = new SubscriptionLedger();
  l.subscribe(LISTENER, 'a');
  l.takeChanges();
  l.unsubscribe(LISTENER, 'a');
  l.subscribe(LISTENER, 'a');
  assert.deepEqual(l.takeChanges(), [{ typeUrl: LISTENER, subscribe: ['a'], unsubscribe: [] }]);
  l.subscribe(LISTENER, 'b');
  l.unsubscribe(LISTENER, 'b');
  assert.deepEqual(l.takeChanges(), [{ typeUrl: LISTENER, subscribe: [], unsubscribe: ['b'] }]);
  assert.deepEqual(l.takeChanges(), [], 'a type with nothing left to change is not sent');
});

test('ledger: refetch asks again only for wanted names; a dropped name is neither wanted nor unsubscribed', () => {
  const l = new SubscriptionLedger();
  assert.equal(l.refetch(LISTENER, 'x'), false);
  l.subscribe(LISTENER, 'x');
  l.subscribe(LISTENER, 'y');
  l.takeChanges();
  assert.equal(l.refetch(LISTENER, 'x'), true);
  assert.deepEqual(l.takeSubscribes(), [{ typeUrl: LISTENER, name: 'x' }]);
  l.refetch(LISTENER, 'y');
  l.drop(LISTENER, 'y');
  assert.equal(l.has(LISTENER, 'y'), false);
  assert.deepEqual(l.takeChanges(), [], 'the dropped name is no longer asked for, nor taken back');
  l.subscribe(LISTENER, 'z');
  l.unsubscribe(LISTENER, 'x');
  assert.deepEqual(l.clearPending(), [{ typeUrl: LISTENER, subscribe: [], unsubscribe: ['x'] }], 'the unsubscribes it drops are returned');
  assert.deepEqual(l.takeChanges(), []);
  l.subscribe(LISTENER, 'x');
  l.clearPending();
  assert.deepEqual(l.wanted(), [
    { typeUrl: LISTENER, name: 'z' },
    { typeUrl: LISTENER, name: 'x' },
  ], 'clearing what is pending keeps what is wanted');
});

test('byType groups names by type URL in first-seen order', () => {
  const grouped = byType([
    { typeUrl: LISTENER, name: 'a' },
    { typeUrl: CLUSTER, name: 'c' },
    { typeUrl: LISTENER, name: 'b' },
  ]);
  assert.deepEqual([...grouped], [
    [LISTENER, ['a', 'b']],
    [CLUSTER, ['c']],
  ]);
});

// ---------------------------------------------------------------- rejected names

test('rejected names: rejected until the retry time, then forgotten', () => {
  const r = new RejectedNames();
  r.reject(LISTENER, 'p', 1_000);
  assert.equal(r.size, 1);
  assert.equal(r.isRejected(LISTENER, 'p', 999), true);
  assert.equal(r.isRejected(CLUSTER, 'p', 999), false, 'per type URL');
  assert.equal(r.isRejected(LISTENER, 'p', 1_000), false, 'at the retry time it may be asked again');
  assert.equal(r.size, 0);
  assert.equal(r.isRejected(LISTENER, 'p', 0), false);
});

test('rejected names: owed rejections are taken out per type, each name once', () => {
  const r = new RejectedNames();
  r.owe(LISTENER, 'a');
  r.owe(CLUSTER, 'c');
  r.owe(LISTENER, 'b');
  r.owe(LISTENER, 'a');
  assert.deepEqual([...r.takeOwed()], [
    [LISTENER, ['a', 'b']],
    [CLUSTER, ['c']],
  ]);
  assert.deepEqual([...r.takeOwed()], []);
});

// ---------------------------------------------------------------- server history

test('server history: each server as it last fared, the current one in the upstream state, the others on standby', () => {
  const h = new ServerHistory();
  assert.equal(h.lastError, undefined);
  const t0 = Date.UTC(2030, 0, 1);
  h.failed('a:1', 14, 'a:1: connection refused', t0);
  h.connected('b:2', t0 + 1_000);
  h.responded('b:2', t0 + 2_000);
  assert.deepEqual(h.lastError, { code: 14, codeName: 'UNAVAILABLE', message: 'a:1: connection refused', at: '2030-01-01T00:00:00.000Z' });
  assert.deepEqual(h.status(['a:1', 'b:2', 'c:3'], 'b:2', 'ready'), [
    { target: 'a:1', state: 'standby', lastError: h.lastError, lastConnected: null, lastResponse: null },
    { target: 'b:2', state: 'ready', lastError: null, lastConnected: '2030-01-01T00:00:01.000Z', lastResponse: '2030-01-01T00:00:02.000Z' },
    { target: 'c:3', state: 'standby', lastError: null, lastConnected: null, lastResponse: null },
  ]);
  h.failed('b:2', 99, 'odd', t0 + 3_000);
  const latest = (): UpstreamError | undefined => h.lastError; // read afresh: the assertion above narrowed h.lastError
  assert.equal(latest()?.codeName, '99', 'a code gRPC does not name is shown as its number');
  assert.equal(h.status(['a:1'], 'b:2', 'backoff')[0].lastError?.message, 'a:1: connection refused', 'each server keeps its own last failure');
});
