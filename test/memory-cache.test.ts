/**
 * The in-process cache tells the copies it hands out when it stops holding
 * them, so answers memoized on a copy (shared across reconnecting clients)
 * are let go instead of piling up; and it lists a collection's members as
 * they are now.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CacheEntry, MemoryCache } from '../src/cache/memory-cache';
import { splitResource } from '../src/proto/resource-bytes';
import { makeResource } from './support/origin';
import { deltaResponseCodec } from '../src/proto/messages';

const TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const NAME = 'xdstp://a/envoy.config.cluster.v3.Cluster/c1';

/** A cache entry as the store makes it from the bytes upstream sent. */
function entryOf(version: string, glob?: string): CacheEntry {
  const resource = encodeOne(version);
  return new CacheEntry({ key: NAME, typeUrl: TYPE, version, resource, glob }, NAME, splitResource(resource));
}

/** The encoded Resource: field 2 of a one-resource response, without its tag and length. */
function encodeOne(version: string): Buffer {
  const resp = deltaResponseCodec.encode({ type_url: TYPE, nonce: 'n', resources: [makeResource(TYPE, NAME, 'payload', version)] });
  let p = 0;
  while (p < resp.length) {
    const tag = resp[p++]!;
    let len = 0;
    let shift = 0;
    for (;;) {
      const b = resp[p++]!;
      len |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) break;
      shift += 7;
    }
    if (tag >>> 3 === 2) return resp.subarray(p, p + len);
    p += len;
  }
  throw new Error('no resource field');
}

test('a copy of a cached resource is live while the cache holds it', () => {
  const cache = new MemoryCache();
  const e = entryOf('1');
  cache.set(e);
  assert.equal(e.variant(NAME, false).retired, false);
  assert.equal(e.variant(`${NAME}?x=1`, false).retired, false);
});

test('a newer version retires every copy of the older one, made before or after', () => {
  const cache = new MemoryCache();
  const old = entryOf('1');
  cache.set(old);
  const before = old.variant(NAME, false);
  cache.set(entryOf('2'));
  assert.equal(before.retired, true);
  assert.equal(old.variant(`${NAME}?x=1`, false).retired, true);
  assert.equal(cache.get(NAME)!.variant(NAME, false).retired, false);
});

test('dropping a resource retires its copies; storing the same entry again revives them', () => {
  const cache = new MemoryCache();
  const e = entryOf('1');
  cache.set(e);
  const v = e.variant(NAME, false);
  cache.delete(NAME);
  assert.equal(v.retired, true);
  cache.set(e);
  assert.equal(v.retired, false);
});

test('a member replaced by newer versions is listed once, as the newest, and its removal empties the collection', () => {
  const cache = new MemoryCache();
  const glob = 'xdstp://a/envoy.config.cluster.v3.Cluster/*';
  cache.set(entryOf('1', glob));
  assert.deepEqual(cache.members(glob).map((e) => e.version), ['1']);
  cache.set(entryOf('2', glob));
  cache.set(entryOf('3', glob));
  assert.equal(cache.memberCount(glob), 1);
  assert.deepEqual(cache.members(glob).map((e) => e.version), ['3']);
  cache.delete(NAME);
  assert.equal(cache.memberCount(glob), 0);
  assert.deepEqual(cache.members(glob), []);
  cache.set(entryOf('4', glob));
  assert.deepEqual(cache.members(glob).map((e) => e.version), ['4']);
});
