/**
 * CompactMap (src/compact-map.ts) answers as a Map does through every
 * change of the number of its entries: the same reads, the same order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CompactMap } from '../src/compact-map';
import { prng } from './support/prng';

function contents<K, V>(m: ReadonlyMap<K, V>): unknown {
  const seen: Array<[K, V]> = [];
  m.forEach((v, k) => seen.push([k, v]));
  return { size: m.size, entries: [...m], keys: [...m.keys()], values: [...m.values()], seen };
}

test('one entry, replaced, deleted and cleared, reads as in a Map', () => {
  const m = new CompactMap<string, number | null>();
  const ref = new Map<string, number | null>();
  const both = (f: (x: Map<string, number | null> | CompactMap<string, number | null>) => unknown): void => {
    assert.deepEqual(f(m), f(ref));
  };
  both((x) => x.get('a'));
  both((x) => x.set('a', null) && x.size);
  both((x) => [x.get('a'), x.has('a'), x.has('b')]);
  both((x) => x.set('a', 1) && contents(x));
  both((x) => x.delete('b'));
  both((x) => x.delete('a'));
  both((x) => contents(x));
  both((x) => x.set('b', 2).set('c', 3).set('b', 4) && contents(x));
  both((x) => x.delete('b') && contents(x));
  both((x) => (x.clear(), contents(x)));
  both((x) => x.set('d', 5) && contents(x));
});

test('NaN is one key, as in a Map', () => {
  const m = new CompactMap<number, string>().set(NaN, 'x');
  assert.equal(m.get(NaN), 'x');
  assert.equal(m.set(NaN, 'y').size, 1);
  assert.equal(m.delete(NaN), true);
  assert.equal(m.size, 0);
});

test('random changes leave it equal to a Map', () => {
  const rand = prng(7);
  const m = new CompactMap<string, number>();
  const ref = new Map<string, number>();
  for (let i = 0; i < 2000; i++) {
    const key = `k${Math.floor(rand() * 4)}`;
    const op = rand();
    if (op < 0.5) {
      m.set(key, i);
      ref.set(key, i);
    } else if (op < 0.9) assert.equal(m.delete(key), ref.delete(key));
    else {
      m.clear();
      ref.clear();
    }
    assert.deepEqual(contents(m), contents(ref));
    assert.equal(m.get(key), ref.get(key));
  }
});
