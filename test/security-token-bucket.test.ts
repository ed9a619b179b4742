import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket, TokenBudget } from '../src/security/token-bucket';

function clock(): { now: () => number; advance(ms: number): void } {
  let t = 0;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

test('a token bucket allows its burst at once, then refuses', () => {
  const c = clock();
  const b = new TokenBucket(10, 5, c.now);
  for (let i = 0; i < 5; i++) assert.equal(b.take(), true, `token ${i}`);
  assert.equal(b.take(), false);
});

test('a token bucket refills at its rate and never beyond its burst', () => {
  const c = clock();
  const b = new TokenBucket(10, 5, c.now);
  assert.equal(b.take(5), true);
  c.advance(100); // 1 token
  assert.equal(b.take(), true);
  assert.equal(b.take(), false);
  c.advance(60_000);
  assert.equal(b.available(), 5);
  assert.equal(b.take(6), false, 'more than the burst at once is never possible');
  assert.equal(b.take(5), true);
});

test('a refused take takes nothing', () => {
  const c = clock();
  const b = new TokenBucket(1, 3, c.now);
  assert.equal(b.take(4), false);
  assert.equal(b.take(3), true);
});

test('a bucket that never refills (rate 0) allows its burst once, in total', () => {
  const c = clock();
  const b = new TokenBucket(0, 3, c.now);
  assert.equal(b.take(2), true);
  c.advance(3_600_000);
  assert.equal(b.take(2), false);
  assert.equal(b.take(1), true);
  assert.equal(b.available(), 0);
});

test('a budget kept as one number allows and refuses exactly what a bucket counting tokens does', () => {
  // The reference: tokens refilled by elapsed time, capped at the burst.
  let seed = 7;
  const rand = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (const [rate, burst] of [[10, 5], [1000, 100_000], [0.5, 2], [0, 4]]) {
    const budget = new TokenBudget(rate, burst);
    let level = 0;
    let tokens: number = burst;
    let last = 0;
    let now = 0;
    for (let i = 0; i < 2000; i++) {
      now += Math.floor(rand() * 3) * (rand() < 0.5 ? 1 : 400);
      tokens = Math.min(burst, tokens + ((now - last) * rate) / 1000);
      last = now;
      const n = 1 + Math.floor(rand() * Math.max(1, burst / 2));
      const next = budget.take(level, n, now);
      const allowed = n <= tokens + 1e-9;
      assert.equal(!Number.isNaN(next), allowed, `rate ${rate}, burst ${burst}, step ${i}: take ${n} of ${tokens}`);
      if (allowed) {
        tokens -= n;
        level = next;
      }
      assert.ok(Math.abs(budget.available(level, now) - tokens) < 1e-6, `available at step ${i}`);
    }
  }
});
