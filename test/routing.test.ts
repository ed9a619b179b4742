/** The router alone: which key a name subscribes to, and which names it refuses. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Router, isRejection } from '../src/engine/routing';
import { CLUSTER, LISTENER } from './support/names';
import { L } from './support/engine-harness';

test('router: equal names modulo parameter order share one key; a glob keys by its canonical URL', () => {
  const r = new Router(new Set(['a']), false);
  const one = r.route(LISTENER, L('x?b=2&a=1'));
  const two = r.route(LISTENER, L('x?a=1&b=2'));
  assert.ok(!isRejection(one) && !isRejection(two));
  assert.equal(one.key, two.key);
  const glob = r.route(LISTENER, L('g/*?b=1&a=2'));
  assert.ok(!isRejection(glob));
  assert.equal(glob.kind, 'glob');
  assert.equal(glob.key, L('g/*?a=2&b=1'));
});

test('router: a member keys to the glob it belongs to; other authorities and types are refused', () => {
  const r = new Router(new Set(['a']), false);
  const rk = r.resourceKey('a', LISTENER, L('g/m?z=1'));
  assert.ok(typeof rk !== 'string');
  assert.equal(rk.collection, L('g/*?z=1'));
  assert.equal(r.resourceKey('b', LISTENER, L('g/m')), 'foreign_authority');
  assert.equal(r.resourceKey('a', CLUSTER, L('g/m')), 'type_mismatch');
  const refused = r.route(LISTENER, 'legacy');
  assert.ok(isRejection(refused) && refused.reason === 'no_default_upstream');
});
