/**
 * The heap growth the relay's CLI sets for its process (src/heap-growth.ts):
 * its own unless the operator chose one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HEAP_GROWING_PERCENT, heapGrowthFlag } from '../src/heap-growth';

test('with no choice of the operator the relay lets the old generation grow by its live size', () => {
  assert.equal(HEAP_GROWING_PERCENT, 100);
  assert.equal(heapGrowthFlag([], undefined), '--heap-growing-percent=100');
  assert.equal(heapGrowthFlag(['--enable-source-maps'], ''), '--heap-growing-percent=100');
});

test("an operator's heap growth in NODE_OPTIONS is kept", () => {
  assert.equal(heapGrowthFlag([], '--max-old-space-size=768 --heap-growing-percent=30'), undefined);
  assert.equal(heapGrowthFlag([], '  --heap-growing-percent 30'), undefined);
});

test("an operator's heap growth in node's own arguments is kept, in either spelling", () => {
  assert.equal(heapGrowthFlag(['--heap-growing-percent=20'], undefined), undefined);
  assert.equal(heapGrowthFlag(['--heap_growing_percent=20'], undefined), undefined);
  assert.equal(heapGrowthFlag(['--heap-growing-percent', '20'], undefined), undefined);
});

test('other heap settings are not a choice of heap growth', () => {
  assert.equal(heapGrowthFlag(['--max-old-space-size=768'], '--max-semi-space-size=32 --heap-growing-percentage=5'), '--heap-growing-percent=100');
});
