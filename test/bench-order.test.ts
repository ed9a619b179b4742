import { test } from 'node:test';
import assert from 'node:assert/strict';
import { balancedOrder } from '../bench/lib/order';

/** How often server b takes its turn right after server a, within rounds, over `rounds` rounds. */
function followCounts(n: number, rounds: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let r = 0; r < rounds; r++) {
    const row = balancedOrder(n, r);
    assert.deepEqual([...row].sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i), `round ${r} is not a permutation`);
    for (let i = 1; i < n; i++) counts.set(`${row[i - 1]}→${row[i]}`, (counts.get(`${row[i - 1]}→${row[i]}`) ?? 0) + 1);
  }
  return counts;
}

test('every server takes its turn right after every other server once in n rounds, n even', () => {
  for (const n of [2, 4, 6, 8]) {
    const counts = followCounts(n, n);
    assert.equal(counts.size, n * (n - 1), `n=${n}: some ordered pair never adjacent`);
    for (const [pair, c] of counts) assert.equal(c, 1, `n=${n}: ${pair} adjacent ${c} times`);
  }
});

test('every server takes its turn right after every other server twice in 2n rounds, n odd', () => {
  for (const n of [3, 5, 7]) {
    const counts = followCounts(n, 2 * n);
    assert.equal(counts.size, n * (n - 1), `n=${n}: some ordered pair never adjacent`);
    for (const [pair, c] of counts) assert.equal(c, 2, `n=${n}: ${pair} adjacent ${c} times`);
  }
});

test('two servers alternate which goes first', () => {
  assert.deepEqual([0, 1, 2, 3].map((r) => balancedOrder(2, r)), [[0, 1], [1, 0], [0, 1], [1, 0]]);
});
