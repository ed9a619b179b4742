/**
 * RedisStore against a real 3-master Redis Cluster on local ports
 * (redis-server --cluster-enabled yes + redis-cli --cluster create).
 *
 * Cluster fault behaviour was verified by hand (not in this suite, to keep it
 * fast): with one of the 3 masters SIGKILLed, reads resolve `undefined`
 * (≤ one commandTimeout for the first, at once afterwards), `healthy` stays
 * false without flapping (the probe wants every slot owner up and
 * cluster_state:ok), and after restarting that master on its port the store
 * recovers by itself and replays the writes made during the outage.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { createRedisStore, type RedisStore } from '../src/cache/redis-store';
import type { StoredResource } from '../src/cache/types';
import { tagOf } from '../src/cache/redis-keys';
import { RedisCluster, redisSkip } from './support/redis-server';

const skip = redisSkip('RedisStore cluster test');
const TYPE = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

describe('RedisStore on a 3-master Redis Cluster', { skip }, () => {
  let cluster: RedisCluster;
  let store: RedisStore;
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown): void => void unhandled.push(err);

  before(async () => {
    process.on('unhandledRejection', onUnhandled);
    cluster = await RedisCluster.start(3);
    store = createRedisStore(cluster.addresses.join(','), { prefix: 'cl:' });
    assert.equal(await store.waitUntilHealthy(10_000), true, 'cluster store connects');
  });

  after(async () => {
    await store?.close();
    await cluster?.dispose();
    process.off('unhandledRejection', onUnhandled);
    assert.deepEqual(unhandled, []);
  });

  test('a glob, its member set and its members land on one slot and round-trip; globs spread over the masters', async () => {
    const globs = Array.from({ length: 12 }, (_, g) => `xdstp://auth/${TYPE}/ns${g}/{svc}/*?xds.node.cluster=c`);
    const puts: StoredResource[] = [];
    for (const glob of globs) {
      for (let m = 0; m < 5; m++) {
        const key = glob.replace('/*?', `/m${m}?`);
        puts.push({ key, typeUrl: TYPE, version: `v${m}`, resource: Buffer.from([0xff, 0xfe, m, 0x80]), glob });
      }
    }
    await store.write({ put: puts, remove: [], absent: [`xdstp://auth/${TYPE}/empty/*`] });

    const probe = new Redis(cluster.nodes[0]!.port, '127.0.0.1');
    try {
      const slotsUsed = new Set<number>();
      for (const glob of globs) {
        const keys = [store.keys.members(glob), store.keys.resource(glob)]; // the glob's set and its absent marker
        for (const p of puts.filter((r) => r.glob === glob)) keys.push(store.keys.resource(p.key));
        const slots = new Set(await Promise.all(keys.map((k) => probe.cluster('KEYSLOT', k) as Promise<number>)));
        assert.equal(slots.size, 1, `one slot for ${glob}`);
        slotsUsed.add([...slots][0]!);

        const got = await store.getGlobMembers(glob);
        assert.ok(Array.isArray(got), `members of ${glob}`);
        const want = puts.filter((r) => r.glob === glob);
        assert.deepEqual(got.sort((a, b) => a.key.localeCompare(b.key)), want);
      }
      // 12 collections hashed over 16384 slots: they reach more than one master.
      const slotTable = (await probe.cluster('SLOTS')) as Array<[number, number, ...unknown[]]>;
      const owners = new Set([...slotsUsed].map((s) => slotTable.findIndex(([lo, hi]) => s >= lo && s <= hi)));
      assert.ok(owners.size > 1, `collections spread over ${owners.size} masters`);
    } finally {
      probe.disconnect();
    }

    assert.equal(await store.getGlobMembers(`xdstp://auth/${TYPE}/empty/*`), 'absent');
    await store.write({ put: [], remove: [{ key: puts[0]!.key, glob: puts[0]!.glob! }], absent: [] });
    assert.equal(await store.getResource(puts[0]!.key), undefined);
    assert.deepEqual(await store.getResource(puts[1]!.key), puts[1]);

    const warm: StoredResource[] = [];
    for await (const page of store.warmLoad()) warm.push(...page);
    assert.equal(warm.length, puts.length - 1, 'warm load scans every master');
  });

  test('the warm-start index: each shard on the slot of what it lists, built by the first start, read by the next', async () => {
    const s = createRedisStore(cluster.addresses.join(','), { prefix: 'ix:' });
    const probe = new Redis(cluster.nodes[0]!.port, '127.0.0.1');
    try {
      assert.equal(await s.waitUntilHealthy(10_000), true);
      const first: StoredResource[] = [];
      for await (const page of s.warmLoad()) first.push(...page);
      assert.deepEqual(first, [], 'an empty prefix');
      const puts: StoredResource[] = [];
      for (let g = 0; g < 10; g++) {
        const glob = `xdstp://auth/${TYPE}/ix${g}/*`;
        for (let m = 0; m < 30; m++) puts.push({ key: glob.replace('/*', `/m${m}`), typeUrl: TYPE, version: 'v1', resource: Buffer.from([g, m]), glob });
      }
      for (let i = 0; i < 40; i++) puts.push({ key: `legacy:${TYPE}:ix${i}`, typeUrl: TYPE, version: 'v1', resource: Buffer.from([i]) });
      await s.write({ put: puts, remove: [], absent: [] });

      const slotOf = (k: string): Promise<number> => probe.cluster('KEYSLOT', k) as Promise<number>;
      for (const r of puts) {
        const listed = r.glob === undefined ? s.keys.resource(r.key) : s.keys.members(r.glob);
        assert.equal(await slotOf(s.keys.indexShardOfTag(tagOf(r.glob ?? r.key))), await slotOf(listed), `the shard listing ${r.key} shares its slot`);
      }
      const scans = async (): Promise<number> => {
        let n = 0;
        for (const node of cluster.nodes) {
          const c = new Redis(node.port, '127.0.0.1');
          n += Number(/cmdstat_scan:calls=(\d+)/.exec(await c.info('commandstats'))?.[1] ?? 0);
          c.disconnect();
        }
        return n;
      };
      const scansBefore = await scans();
      const loaded: StoredResource[] = [];
      for await (const page of s.warmLoad({ count: 64 })) loaded.push(...page);
      assert.equal(await scans(), scansBefore, 'read through the index: no SCAN on any master');
      const byKey = (a: StoredResource, b: StoredResource): number => a.key.localeCompare(b.key);
      assert.deepEqual(loaded.sort(byKey), [...puts].sort(byKey), 'every master\'s shards read');
    } finally {
      probe.disconnect();
      await s.close();
    }
  });
});
