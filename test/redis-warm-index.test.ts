/**
 * The warm-start index of RedisStore (src/cache/redis-keys.ts,
 * src/cache/redis-index.ts) against a real redis-server: a warm start reads
 * its own prefix's records without walking a shared keyspace, starts warm
 * from a Redis written without the index (and indexes it), and drops entries
 * whose records expired.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { RedisStore } from '../src/cache/redis-store';
import { tagOf } from '../src/cache/redis-keys';
import type { StoredResource } from '../src/cache/types';
import { RedisSuite, redisSkip } from './support/redis-server';
import { sleep } from './support/wait';

const skip = redisSkip('RedisStore warm-start index tests');
const TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const glob = (g: string): string => `xdstp://auth.example/${TYPE}/${g}/*`;
const member = (g: string, n: string): string => `xdstp://auth.example/${TYPE}/${g}/${n}`;

function res(key: string, extra: Partial<StoredResource> = {}): StoredResource {
  return { key, typeUrl: TYPE, version: 'v1', resource: Buffer.from(`payload of ${key}`), ...extra };
}

/** `count` members in each of `globs` globs and `loose` records stored without a glob, under `tag` (names differ per tag). */
function dataset(tag: string, globs: number, perGlob: number, loose: number): StoredResource[] {
  const out: StoredResource[] = [];
  for (let g = 0; g < globs; g++) for (let i = 0; i < perGlob; i++) out.push(res(member(`${tag}g${g}`, `r${i}`), { glob: glob(`${tag}g${g}`) }));
  for (let i = 0; i < loose; i++) out.push(res(i % 2 === 0 ? `legacy:${TYPE}:${tag}n${i}` : member(`${tag}single`, `s${i}`)));
  return out;
}

async function loadAll(store: RedisStore, count?: number): Promise<StoredResource[]> {
  const out: StoredResource[] = [];
  for await (const page of store.warmLoad(count === undefined ? {} : { count })) out.push(...page);
  return out;
}

function sorted(rs: StoredResource[]): StoredResource[] {
  return [...rs].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

describe('RedisStore warm-start index', { skip }, () => {
  const redis = new RedisSuite();
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown): void => void unhandled.push(err);
  process.on('unhandledRejection', onUnhandled);
  after(() => {
    process.off('unhandledRejection', onUnhandled);
    assert.deepEqual(unhandled, [], 'no unhandled rejections');
  });
  let raw: Redis;
  before(() => {
    raw = redis.raw;
  });

  async function open(prefix: string): Promise<RedisStore> {
    const store = redis.closeAfter(new RedisStore({ url: redis.server.url, prefix, writeTimeoutMs: 10_000, warmTimeoutMs: 10_000 }));
    assert.equal(await store.waitUntilHealthy(5000), true, 'store should connect');
    return store;
  }

  /** Calls of a command so far (INFO commandstats). */
  async function calls(cmd: string): Promise<number> {
    const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await raw.info('commandstats'));
    return m ? Number(m[1]) : 0;
  }

  /** The keys under `prefix` the index uses (`i:…`). */
  async function indexKeys(prefix: string): Promise<string[]> {
    return (await raw.keys(`${prefix}i:*`)).sort();
  }

  test('a warm start reads exactly its own records, without a SCAN, beside foreign keys and another relay prefix', async () => {
    await raw.flushall();
    // A first start on an empty Redis scans it once (nothing there) and marks the index complete.
    const mine = await open('mine:');
    assert.deepEqual(await loadAll(mine), []);
    assert.equal(await raw.exists('mine:i:complete'), 1);

    const own = dataset('a', 7, 150, 400);
    await mine.write({ put: own, remove: [], absent: [member('a', 'gone')] });
    const other = await open('other:');
    await loadAll(other);
    await other.write({ put: dataset('b', 3, 100, 100), remove: [], absent: [] });
    // Foreign keys: another application, including keys that look almost like ours.
    for (let i = 0; i < 20_000; i += 1000) {
      const p = raw.pipeline();
      for (let j = i; j < i + 1000; j++) p.set(j % 10 === 0 ? `mine-not:r:{0123456789abcdef}:${j}` : `foreign:${j}`, 'x');
      await p.exec();
    }

    const scans = await calls('scan');
    const fresh = await open('mine:');
    const loaded = await loadAll(fresh, 200);
    assert.equal(await calls('scan'), scans, 'no SCAN: the index lists the keys');
    assert.deepEqual(sorted(loaded), sorted(own), 'exactly its own records, each once');
  });

  test('a Redis written without the index starts warm by one scan, which builds the index', async () => {
    await raw.flushall();
    const writer = await open('up:');
    const own = dataset('u', 5, 200, 300);
    await writer.write({ put: own, remove: [], absent: [glob('uempty')] });
    // What a relay without the index leaves behind: records and member sets, no `i:` keys.
    const idx = await indexKeys('up:');
    assert.ok(idx.length > 2, 'the writer keeps an index');
    await raw.del(...idx);

    const scans = await calls('scan');
    const first = await loadAll(await open('up:'), 250);
    assert.deepEqual(sorted(first), sorted(own), 'the scan finds every record');
    assert.ok((await calls('scan')) > scans, 'it scanned');
    assert.equal(await raw.exists('up:i:complete'), 1, 'and marked the index complete');

    const after = await calls('scan');
    const second = await loadAll(await open('up:'));
    assert.equal(await calls('scan'), after, 'the next start reads the index');
    assert.deepEqual(sorted(second), sorted(own));
  });

  test('writes keep the index: removed and absent keys leave it, a loose record that becomes a member loads once', async () => {
    await raw.flushall();
    const store = await open('w:');
    await loadAll(store);
    const single = member('w', 'single');
    const legacy = `legacy:${TYPE}:w`;
    const members = [res(member('wg', 'm1'), { glob: glob('wg') }), res(member('wg', 'm2'), { glob: glob('wg') })];
    await store.write({ put: [res(single), res(legacy), ...members], remove: [], absent: [] });
    const shardOf = (key: string): string => store.keys.indexShardOfTag(tagOf(key));
    assert.ok(await raw.sismember(shardOf(single), `r:{${tagOf(single)}}:${single}`));
    assert.ok(await raw.sismember(shardOf(glob('wg')), `m:{${tagOf(glob('wg'))}}:${glob('wg')}`));

    // The loose singleton arrives again as a glob member: listed loose and in the member set, loaded once.
    const now = res(single, { version: 'v2', glob: glob('w') });
    await store.write({ put: [now], remove: [], absent: [] });
    assert.deepEqual(sorted(await loadAll(store)), sorted([now, res(legacy), ...members]));

    await store.write({ put: [], remove: [{ key: legacy }], absent: [glob('wg')] });
    assert.equal(await raw.sismember(shardOf(legacy), `r:{${tagOf(legacy)}}:${legacy}`), 0, 'a removed loose record leaves the index');
    assert.equal(await raw.sismember(shardOf(glob('wg')), `m:{${tagOf(glob('wg'))}}:${glob('wg')}`), 0, 'a glob marked absent leaves the index');
    assert.deepEqual(sorted(await loadAll(store)), [now]);
  });

  test('entries of records that expired by their TTL are dropped by the next reader', async () => {
    await raw.flushall();
    const store = await open('ttl:');
    await loadAll(store);
    const soon = Date.now() + 300;
    const loose = res(member('t', 'loose'), { expiresAt: soon });
    const lasting = res(member('t', 'lasting'));
    const expiring = [res(member('tg', 'm1'), { glob: glob('tg'), expiresAt: soon }), res(member('tg', 'm2'), { glob: glob('tg'), expiresAt: soon })];
    await store.write({ put: [loose, lasting, ...expiring], remove: [], absent: [] });
    const looseEntry = `r:{${tagOf(loose.key)}}:${loose.key}`;
    const globEntry = `m:{${tagOf(glob('tg'))}}:${glob('tg')}`;
    const shard = (key: string): string => store.keys.indexShardOfTag(tagOf(key));
    assert.equal(await raw.sismember(shard(loose.key), looseEntry), 1);

    // Redis deletes the records at their expiry; the index entries stay until a reader sees them gone.
    await sleep(500);
    assert.equal(await raw.exists(store.keys.resource(loose.key)), 0, 'the record expired');
    assert.deepEqual(await loadAll(store), [lasting]);
    const dropped = async (): Promise<boolean> =>
      (await raw.sismember(shard(loose.key), looseEntry)) === 0 && (await raw.exists(store.keys.members(glob('tg')))) === 0;
    for (let i = 0; i < 50 && !(await dropped()); i++) await sleep(20);
    assert.equal(await raw.sismember(shard(loose.key), looseEntry), 0, 'the loose record left its shard');
    assert.equal(await raw.exists(store.keys.members(glob('tg'))), 0, 'the expired members left their set (now gone)');
    // The emptied glob's own entry goes with the next reader.
    assert.equal(await raw.sismember(shard(glob('tg')), globEntry), 1);
    assert.deepEqual(await loadAll(store), [lasting]);
    for (let i = 0; i < 50 && (await raw.sismember(shard(glob('tg')), globEntry)) === 1; i++) await sleep(20);
    assert.equal(await raw.sismember(shard(glob('tg')), globEntry), 0, 'the emptied glob left its shard');

    // An entry written back meanwhile is kept: the drop re-checks in Redis.
    const back = res(member('tg', 'm3'), { glob: glob('tg') });
    await store.write({ put: [back], remove: [], absent: [] });
    assert.deepEqual(sorted(await loadAll(store)), sorted([lasting, back]));
  });
});
