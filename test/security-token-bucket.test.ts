import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket } from '../src/security/token-bucket';

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
