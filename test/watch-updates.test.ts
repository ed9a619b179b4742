/**
 * The engine's pure pieces alone: how one watcher's spellings of a key are
 * added and taken away (engine/subscription.ts), the shared updates watchers are
 * told and the member check (engine/watch-updates.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CacheEntry } from '../src/cache/memory-cache';
import { splitResource } from '../src/proto/resource-bytes';
import { resourceCodec } from '../src/proto/messages';
import { addSpelling, removeSpelling, Subscription, type Watcher } from '../src/engine/subscription';
import { ABSENT, ABSENT_KEEP_HELD, allowsMember, changed } from '../src/engine/watch-updates';
import type { JoinAuthorizer } from '../src/engine/types';
import type { UpstreamPort } from '../src/upstream/types';
import { makeResource } from './support/origin';
import { LISTENER } from './support/names';
import { L } from './support/engine-harness';

test('spellings: the first is a string, more make a list, a repeat changes nothing', () => {
  const one = addSpelling(undefined, 'a');
  assert.equal(one, 'a');
  assert.equal(addSpelling(one, 'a'), one, 'the same spelling again is the same value');
  const two = addSpelling(one, 'b');
  assert.deepEqual(two, ['a', 'b']);
  assert.equal(addSpelling(two, 'b'), two, 'a listed spelling again is the same list');
  assert.deepEqual(addSpelling(two, 'c'), ['a', 'b', 'c']);
  assert.deepEqual(two, ['a', 'b'], 'the list it was given is left as it was');
});

test('spellings: removing the last leaves nothing, a list of two falls back to a string, another spelling leaves a string as it is', () => {
  assert.equal(removeSpelling('a', 'a'), undefined);
  assert.equal(removeSpelling('a', 'b'), 'a');
  assert.equal(removeSpelling(['a', 'b'], 'a'), 'b');
  assert.deepEqual(removeSpelling(['a', 'b', 'c'], 'b'), ['a', 'c']);
});

function entry(version: string): CacheEntry {
  const bytes = resourceCodec.encode(makeResource(LISTENER, L('x'), 'payload', version));
  return new CacheEntry({ key: L('x'), typeUrl: LISTENER, version, resource: bytes }, L('x'), splitResource(bytes));
}

test('changed: one shared update per entry, a fresh one whenever the client may keep what it holds', () => {
  const v1 = entry('v1');
  const first = changed(v1, false);
  assert.deepEqual(first, { kind: 'changed', entry: v1, keepHeld: false });
  assert.equal(changed(v1, false), first, 'every watcher of the entry gets the same object');
  const v2 = entry('v2');
  assert.notEqual(changed(v2, false), first, 'another entry has its own');
  const kept = changed(v1, true);
  assert.deepEqual(kept, { kind: 'changed', entry: v1, keepHeld: true });
  assert.notEqual(kept, first);
  assert.equal(changed(v1, false), first, 'a keep-held update does not replace the shared one');
  assert.deepEqual(ABSENT, { kind: 'does-not-exist', member: undefined, keepHeld: false });
  assert.deepEqual(ABSENT_KEEP_HELD, { kind: 'does-not-exist', member: undefined, keepHeld: true });
});

test('allowsMember: without an authorizer every member; with one, what it allows the watcher for the collection', () => {
  const upstream: UpstreamPort = {
    authority: 'a',
    label: 'a',
    connected: true,
    subscribe: () => {},
    unsubscribe: () => false,
    refetch: () => {},
    canAnswer: () => true,
    subscriptionCount: () => 0,
  };
  const coll = new Subscription(L('g/*'), 'glob', LISTENER, upstream, L('g/*'), 'a');
  const watcher: Watcher = { typeUrl: LISTENER, identity: 'spiffe://t/client', update: () => true };
  const asked: unknown[] = [];
  const authorizer: JoinAuthorizer = {
    allows(identity, typeUrl, authority, name) {
      asked.push([identity, typeUrl, authority, name]);
      return name.endsWith('/open');
    },
  };
  assert.equal(allowsMember(undefined, watcher, coll, L('g/secret')), true);
  assert.equal(allowsMember(authorizer, watcher, coll, L('g/open')), true);
  assert.equal(allowsMember(authorizer, watcher, coll, L('g/secret')), false);
  assert.deepEqual(asked, [
    ['spiffe://t/client', LISTENER, 'a', L('g/open')],
    ['spiffe://t/client', LISTENER, 'a', L('g/secret')],
  ]);
});
