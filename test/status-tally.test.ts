/**
 * The client-status counts kept as states change (no gRPC): whatever order
 * states change, are read one by one, are counted and close in, the counts
 * equal a fresh judgement of every open state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientStatusTally } from '../src/downstream/status-tally';
import type { Severity } from '../src/downstream/status-source';
import type { SubscriptionState } from '../src/downstream/subscription-state';
import { Rand } from './support/prng';

interface FakeState {
  typeUrl: string;
  statusMark: number;
  /** What the judge says of it now. */
  now: Severity | undefined;
}

const TYPES = ['type.a', 'type.b'];
const SEVERITIES: Array<Severity | undefined> = ['synced', 'stale', 'nacked', undefined];

function expected(open: Iterable<FakeState>): Record<string, Record<Severity, number>> {
  const out: Record<string, Record<Severity, number>> = {};
  for (const s of open) {
    if (s.now === undefined) continue;
    const c = (out[s.typeUrl] ??= { synced: 0, stale: 0, nacked: 0 });
    c[s.now]++;
  }
  return out;
}

function actual(counts: ReadonlyMap<string, Record<Severity, number>>): Record<string, Record<Severity, number>> {
  const out: Record<string, Record<Severity, number>> = {};
  for (const [type, c] of counts) if (c.synced + c.stale + c.nacked > 0) out[type] = { ...c };
  return out;
}

test('the status counts equal a fresh judgement of every open state, whatever the order of changes, reads, counts and closes', () => {
  for (let seed = 1; seed <= 20; seed++) {
    const rand = new Rand(seed);
    const tally = new ClientStatusTally((s) => (s as unknown as FakeState).now);
    const open = new Set<FakeState>();
    const all: FakeState[] = [];
    // Counts are read rarely, so the list of changed states grows long between reads.
    for (let step = 0; step < 3000; step++) {
      const r = rand.int(100);
      if (r < 20 || open.size === 0) {
        const s: FakeState = { typeUrl: TYPES[rand.int(TYPES.length)]!, statusMark: 0, now: SEVERITIES[rand.int(4)] };
        open.add(s);
        all.push(s);
        tally.changed(s as unknown as SubscriptionState);
        continue;
      }
      const s = [...open][rand.int(open.size)]!;
      if (r < 60) {
        s.now = SEVERITIES[rand.int(4)];
        tally.changed(s as unknown as SubscriptionState);
      } else if (r < 75) {
        assert.equal(tally.statusOf(s as unknown as SubscriptionState), s.now, `seed ${seed} step ${step}: one state read alone`);
      } else if (r < 99) {
        tally.closed(s as unknown as SubscriptionState);
        open.delete(s);
      } else {
        assert.deepEqual(actual(tally.counts()), expected(open), `seed ${seed} step ${step}`);
      }
    }
    assert.deepEqual(actual(tally.counts()), expected(open), `seed ${seed}: at the end`);
  }
});

test('a closed state is not counted even when it changed just before closing', () => {
  const tally = new ClientStatusTally((s) => (s as unknown as FakeState).now);
  const a: FakeState = { typeUrl: 'type.a', statusMark: 0, now: 'synced' };
  const b: FakeState = { typeUrl: 'type.a', statusMark: 0, now: 'nacked' };
  tally.changed(a as unknown as SubscriptionState);
  tally.changed(b as unknown as SubscriptionState);
  assert.deepEqual(actual(tally.counts()), { 'type.a': { synced: 1, stale: 0, nacked: 1 } });
  b.now = 'stale';
  tally.changed(b as unknown as SubscriptionState);
  tally.closed(b as unknown as SubscriptionState);
  assert.deepEqual(actual(tally.counts()), { 'type.a': { synced: 1, stale: 0, nacked: 0 } });
});
