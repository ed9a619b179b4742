/**
 * A fan-out round is flushed in slices: one change to many clients does not
 * hold the event loop for the whole round, and every client is still flushed
 * exactly once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FLUSH_BUDGET_MS, FanOut, type FanOutTarget } from '../src/engine/fan-out';

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // a client whose flush takes this long
  }
}

test('a round whose flushes take longer than the budget yields between slices and flushes every target once', async () => {
  const TARGETS = 64;
  const order: string[] = [];
  const flushes = new Map<number, number>();
  const targets: FanOutTarget[] = Array.from({ length: TARGETS }, (_, i) => ({
    flush: () => {
      flushes.set(i, (flushes.get(i) ?? 0) + 1);
      order.push(`t${i}`);
      // Each flush costs a quarter of the budget: the round needs about 16 budgets.
      busy(FLUSH_BUDGET_MS / 4);
      if (i === 0) setImmediate(() => order.push('other work'));
    },
  }));
  const fan = new FanOut();
  for (const t of targets) fan.touch(t);
  fan.finish();
  assert.ok(flushes.size < TARGETS, `only the first slice is flushed at once (${flushes.size} of ${TARGETS})`);
  while (flushes.size < TARGETS) await new Promise((r) => setImmediate(r));
  assert.deepEqual([...flushes.values()], Array(TARGETS).fill(1), 'each target flushed exactly once');
  const other = order.indexOf('other work');
  assert.ok(other > 0 && other < order.length - 1, `work queued during the round ran between its slices (at ${other} of ${order.length})`);
});

test('a small round is flushed before finish returns', () => {
  let flushed = 0;
  const fan = new FanOut();
  for (let i = 0; i < 100; i++) fan.touch({ flush: () => void flushed++ });
  fan.finish();
  assert.equal(flushed, 100);
});
