/**
 * RedisStore against a real redis-server (see test/support/redis-server.ts):
 * round trips, TTL expiry, prefix isolation, warm load, and fault behaviour
 * (killed, frozen, restarted, never reachable).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { RedisStore, type RedisStoreOptions } from '../src/cache/redis-store';
import { tagOf } from '../src/cache/redis-keys';
import { WARM_FIRST_PAGE_RECORDS, warmPageRecords } from '../src/cache/redis-warm-load';
import type { StoredResource } from '../src/cache/types';
import type { Logger } from 'pino';
import { RedisServer, RedisSuite, freePort, redisSkip } from './support/redis-server';

const skip = redisSkip('RedisStore tests');
const TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const GLOB = 'xdstp://auth.example/envoy.config.cluster.v3.Cluster/svc/*?xds.node.cluster=c1';
const member = (n: string): string => `xdstp://auth.example/envoy.config.cluster.v3.Cluster/svc/${n}?xds.node.cluster=c1`;
const SINGLETON = 'xdstp://auth.example/envoy.config.listener.v3.Listener/{odd}name';

/** Bytes that are not valid UTF-8 (lone continuation bytes, 0xff, NUL). */
function binary(len = 64): Buffer {
  const b = randomBytes(len);
  b[0] = 0xff;
  b[1] = 0x80;
  b[2] = 0xc3;
  b[3] = 0x28;
  b[4] = 0x00;
  return b;
}

function res(key: string, extra: Partial<StoredResource> = {}): StoredResource {
  return { key, typeUrl: TYPE, version: 'v1', resource: binary(), ...extra };
}

async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Just enough of a pino logger to record what the store logs. */
function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const rec = (level: string) => (...args: unknown[]): void => {
    lines.push(`${level}: ${String(args.find((a) => typeof a === 'string'))}`);
  };
  const logger = {
    child: () => logger,
    trace: () => {},
    debug: () => {},
    info: rec('info'),
    warn: rec('warn'),
    error: rec('error'),
  };
  return { logger: logger as unknown as Logger, lines };
}

const unhandled: unknown[] = [];
process.on('unhandledRejection', (err) => unhandled.push(err));

let prefixSeq = 0;
const freshPrefix = (): string => `t${process.pid}-${++prefixSeq}:`;

describe('RedisStore on a healthy Redis', { skip }, () => {
  const redis = new RedisSuite();
  after(() => assert.deepEqual(unhandled, [], 'no unhandled rejections'));

  async function open(opts: RedisStoreOptions = {}): Promise<RedisStore> {
    const store = redis.closeAfter(new RedisStore({ url: redis.server.url, prefix: freshPrefix(), ...opts }));
    assert.equal(await store.waitUntilHealthy(5000), true, 'store should connect');
    return store;
  }

  test('returns a stored resource byte-identical, even bytes that are not valid UTF-8', async () => {
    const store = await open();
    const r = res(SINGLETON, { version: 'v-ü-1' });
    await store.write({ put: [r], remove: [], absent: [] });
    const got = await store.getResource(SINGLETON);
    assert.ok(got && got !== 'absent');
    assert.equal(Buffer.compare(got.resource, r.resource), 0);
    assert.deepEqual(got, { key: SINGLETON, typeUrl: TYPE, version: 'v-ü-1', resource: r.resource });
  });

  test('uses the documented key layout: record string per URN, set per glob, one hash tag per collection', async () => {
    const store = await open();
    const p = store.keys.prefix;
    const tag = tagOf(GLOB);
    const stored = res(member('a'), { glob: GLOB, version: 'v-7' });
    await store.write({ put: [stored], remove: [], absent: ['xdstp://auth.example/t/gone'] });
    assert.equal(await redis.raw.type(`${p}r:{${tag}}:${member('a')}`), 'string');
    assert.equal(await redis.raw.type(`${p}m:{${tag}}:${GLOB}`), 'set');
    // A known-absent marker: the one byte 2, in the key a record would have.
    const gone = 'xdstp://auth.example/t/gone';
    assert.deepEqual(await redis.raw.getBuffer(`${p}r:{${tagOf(gone)}}:${gone}`), Buffer.from([2]));
    assert.equal(await redis.raw.exists(`${p}a:{${tagOf(gone)}}:${gone}`), 0, 'no separate marker key');
    // The record format documented in src/cache/redis-record.ts, read by hand.
    const record = (await redis.raw.getBuffer(`${p}r:{${tag}}:${member('a')}`))!;
    assert.equal(record[0], 1, 'format 1');
    let pos = 1;
    const field = (): string => {
      const len = record.readUInt32BE(pos);
      const s = record.toString('utf8', pos + 4, pos + 4 + len);
      pos += 4 + len;
      return s;
    };
    assert.deepEqual([field(), field(), field()], ['v-7', TYPE, GLOB]);
    assert.equal(record.readDoubleBE(pos), 0, 'no expiry');
    assert.equal(Buffer.compare(record.subarray(pos + 8), stored.resource), 0, 'the Resource bytes, untouched');
  });

  test('overwriting a resource replaces version and bytes and drops fields it no longer has', async () => {
    const store = await open();
    const key = member('x');
    await store.write({ put: [res(key, { glob: GLOB, expiresAt: Date.now() + 60_000 })], remove: [], absent: [] });
    const v2 = res(key, { version: 'v2' });
    await store.write({ put: [v2], remove: [], absent: [] });
    const got = await store.getResource(key);
    assert.deepEqual(got, { key, typeUrl: TYPE, version: 'v2', resource: v2.resource });
    assert.equal(await redis.raw.pttl(store.keys.resource(key)), -1, 'expiry removed with the TTL');
  });

  test('lists the members of a glob with their glob key', async () => {
    const store = await open();
    const puts = ['a', 'b', 'c'].map((n) => res(member(n), { glob: GLOB, version: `v-${n}` }));
    await store.write({ put: puts, remove: [], absent: [] });
    const got = await store.getGlobMembers(GLOB);
    assert.ok(Array.isArray(got));
    assert.deepEqual(
      got.sort((x, y) => x.key.localeCompare(y.key)),
      puts.map((p) => ({ ...p })),
    );
    // A member is also readable on its own.
    assert.deepEqual(await store.getResource(member('b')), puts[1]);
  });

  test('removing a glob member deletes it and drops it from the member set', async () => {
    const store = await open();
    await store.write({ put: [res(member('a'), { glob: GLOB }), res(member('b'), { glob: GLOB })], remove: [], absent: [] });
    await store.write({ put: [], remove: [{ key: member('a'), glob: GLOB }], absent: [] });
    assert.equal(await store.getResource(member('a')), undefined);
    const got = await store.getGlobMembers(GLOB);
    assert.ok(Array.isArray(got));
    assert.deepEqual(got.map((r) => r.key), [member('b')]);
    assert.deepEqual(await redis.raw.smembers(store.keys.members(GLOB)), [member('b')]);
  });

  test('remembers a singleton as known absent until it is put', async () => {
    const store = await open();
    await store.write({ put: [], remove: [], absent: [SINGLETON] });
    assert.equal(await store.getResource(SINGLETON), 'absent');
    const r = res(SINGLETON);
    await store.write({ put: [r], remove: [], absent: [] });
    assert.deepEqual(await store.getResource(SINGLETON), r);
    await store.write({ put: [], remove: [], absent: [SINGLETON] });
    assert.equal(await store.getResource(SINGLETON), 'absent');
  });

  test('remembers an empty glob as known absent until a member is put', async () => {
    const store = await open();
    await store.write({ put: [res(member('a'), { glob: GLOB })], remove: [], absent: [] });
    await store.write({ put: [], remove: [{ key: member('a'), glob: GLOB }], absent: [GLOB] });
    assert.equal(await store.getGlobMembers(GLOB), 'absent');
    await store.write({ put: [res(member('n'), { glob: GLOB })], remove: [], absent: [] });
    const got = await store.getGlobMembers(GLOB);
    assert.ok(Array.isArray(got));
    assert.deepEqual(got.map((r) => r.key), [member('n')]);
  });

  test('a glob reported empty and given a member in one batch ends up holding that member', async () => {
    const store = await open();
    await store.write({ put: [res(member('z'), { glob: GLOB })], remove: [], absent: [GLOB] });
    const got = await store.getGlobMembers(GLOB);
    assert.ok(Array.isArray(got), `got ${String(got)}`);
    assert.deepEqual(got.map((r) => r.key), [member('z')]);
  });

  test('a member put and then its glob reported empty, flushed together, leave the glob known absent', async () => {
    const store = await open();
    // A large first write keeps the flush busy, so the next two are written together, in order.
    const busy = Array.from({ length: 3000 }, (_, i) => res(`legacy:${TYPE}:busy${i}`));
    const first = store.write({ put: busy, remove: [], absent: [] });
    const second = store.write({ put: [res(member('y'), { glob: GLOB })], remove: [], absent: [] });
    const third = store.write({ put: [], remove: [], absent: [GLOB] });
    await Promise.all([first, second, third]);
    assert.equal(await store.getGlobMembers(GLOB), 'absent');
    assert.deepEqual(await redis.raw.smembers(store.keys.members(GLOB)), []);
  });

  test('answers undefined for keys it knows nothing about', async () => {
    const store = await open();
    assert.equal(await store.getResource('xdstp://auth.example/t/never'), undefined);
    assert.equal(await store.getGlobMembers('xdstp://auth.example/t/never/*'), undefined);
    assert.equal(await store.getResource('legacy:type.googleapis.com/x:never'), undefined);
  });

  test('a TTL resource vanishes through Redis key expiry, from reads and from its glob', async () => {
    const store = await open();
    const ttl = member('ttl');
    const stays = member('stays');
    await store.write({
      put: [res(ttl, { glob: GLOB, expiresAt: Date.now() + 300 }), res(stays, { glob: GLOB })],
      remove: [],
      absent: [],
    });
    const pttl = await redis.raw.pttl(store.keys.resource(ttl));
    assert.ok(pttl > 0 && pttl <= 300, `Redis carries the expiry (pttl ${pttl})`);
    assert.equal(((await store.getResource(ttl)) as StoredResource).version, 'v1');
    // Redis itself deletes the key (active expiry; EXISTS also expires lazily).
    await until('Redis to expire the key', 3000, async () => (await redis.raw.exists(store.keys.resource(ttl))) === 0);
    assert.equal(await store.getResource(ttl), undefined);
    const members = await store.getGlobMembers(GLOB);
    assert.ok(Array.isArray(members));
    assert.deepEqual(members.map((r) => r.key), [stays]);
    // The dead member is pruned from the set in the background.
    await until('the expired member to be pruned', 2000, async () =>
      (await redis.raw.sismember(store.keys.members(GLOB), ttl)) === 0,
    );
  });

  test('a resource written already expired is not stored', async () => {
    const store = await open();
    await store.write({ put: [res(SINGLETON, { expiresAt: Date.now() - 1 })], remove: [], absent: [] });
    assert.equal(await store.getResource(SINGLETON), undefined);
    assert.equal(await redis.raw.exists(store.keys.resource(SINGLETON)), 0);
  });

  test('two stores with different prefixes on one Redis do not see each other', async () => {
    const a = await open({ prefix: 'iso-a:' });
    const b = await open({ prefix: 'iso-a:r:' }); // deliberately a prefix that extends a's
    const ra = res(member('a'), { glob: GLOB, version: 'A' });
    const rb = res(member('a'), { glob: GLOB, version: 'B' });
    await a.write({ put: [ra], remove: [], absent: [SINGLETON] });
    await b.write({ put: [rb], remove: [], absent: [] });
    assert.deepEqual(await a.getResource(member('a')), ra);
    assert.deepEqual(await b.getResource(member('a')), rb);
    assert.equal(await b.getResource(SINGLETON), undefined);
    const fromA: StoredResource[] = [];
    for await (const page of a.warmLoad()) fromA.push(...page);
    assert.deepEqual(fromA, [ra]);
    await b.write({ put: [], remove: [{ key: member('a'), glob: GLOB }], absent: [] });
    assert.deepEqual(await a.getGlobMembers(GLOB), [ra]);
  });

  test('warm load streams every stored live resource in pages', async () => {
    const store = await open();
    const expected = new Map<string, StoredResource>();
    const puts: StoredResource[] = [];
    for (let i = 0; i < 2500; i++) {
      const r = i % 2 === 0 ? res(member(`m${i}`), { glob: GLOB, version: `v${i}` }) : res(`legacy:${TYPE}:n${i}`, { version: `v${i}` });
      puts.push(r);
      expected.set(r.key, r);
    }
    await store.write({ put: puts, remove: [], absent: ['xdstp://auth.example/t/absent'] });
    // The first load finds no index and scans; the second reads the index the first one built.
    for (const path of ['scan', 'index']) {
      const pages: StoredResource[][] = [];
      for await (const page of store.warmLoad({ count: 500 })) pages.push(page);
      assert.ok(pages.length > 1, `more than one page (${path})`);
      const got = pages.flat();
      assert.equal(got.length, expected.size, path);
      for (const r of got) assert.deepEqual(r, expected.get(r.key));
    }
  });

  test('a warm load stopped after its first page ends cleanly, with its scan running ahead', async () => {
    const errors: string[] = [];
    const store = await open({ onError: (op) => errors.push(op) });
    const puts: StoredResource[] = [];
    for (let i = 0; i < 3000; i++) puts.push(res(member(`s${i}`), { glob: GLOB }));
    await store.write({ put: puts, remove: [], absent: [] });
    const clientsBefore = Number(/connected_clients:(\d+)/.exec(await redis.raw.info('clients'))![1]);
    let pages = 0;
    for await (const page of store.warmLoad({ count: 100 })) {
      assert.ok(page.length > 0);
      if (++pages === 2) break; // the scan task is pages ahead by now
    }
    assert.deepEqual(errors, [], 'nothing counted as an error');
    assert.equal(store.healthy, true);
    await until('the scan connection to close', 2000, async () => Number(/connected_clients:(\d+)/.exec(await redis.raw.info('clients'))![1]) < clientsBefore + 1);
    // and a full load afterwards still reads everything
    let all = 0;
    for await (const page of store.warmLoad()) all += page.length;
    assert.equal(all, puts.length);
  });

  test('a warm load left to size its pages reads about 128 KiB of records per MGET page once it has read some, and every record', async () => {
    const store = await open();
    const puts: StoredResource[] = [];
    for (let i = 0; i < 400; i++) puts.push(res(member(`big${i}`), { glob: GLOB, resource: binary(8 * 1024) }));
    for (let i = 0; i < 100; i++) puts.push(res(`legacy:${TYPE}:big${i}`, { resource: binary(8 * 1024) }));
    await store.write({ put: puts, remove: [], absent: [] });
    // The first load finds no index and scans; the second reads the index the first one built.
    for (const path of ['scan', 'index']) {
      const pages: number[] = [];
      let loaded = 0;
      for await (const page of store.warmLoad()) {
        pages.push(page.length);
        loaded += page.length;
      }
      assert.equal(loaded, puts.length, `every record read (${path})`);
      assert.equal(pages[0], WARM_FIRST_PAGE_RECORDS, `the first page, cut before any record was read (${path})`);
      // A record here is 8 KiB and its header: 15 of them make about 128 KiB. The load cuts a few pages
      // ahead of what it has read (at most six before its first reply), so only the last pages are checked.
      assert.deepEqual(pages.slice(-10).filter((n) => n > 15), [], `the last pages of at most 15 records (${path}: ${pages.join(' ')})`);
    }
  });

  test('a warm page holds as many records as fit in 128 KiB, from 1 to 1,000', () => {
    assert.equal(warmPageRecords(1024), 128);
    assert.equal(warmPageRecords(100), 1000);
    assert.equal(warmPageRecords(1024 * 1024), 1);
    assert.equal(warmPageRecords(0), 1000);
  });
});

describe('RedisStore when Redis fails', { skip }, () => {
  const FAST: RedisStoreOptions = { commandTimeoutMs: 100, maxReconnectDelayMs: 200, probeIntervalMs: 100, connectTimeoutMs: 500 };

  after(() => {
    assert.deepEqual(unhandled, [], 'no unhandled rejections');
  });

  test('Redis killed mid-traffic: reads resolve undefined quickly, writes resolve, healthy turns false', async () => {
    const server = await RedisServer.start();
    const errors: string[] = [];
    const store = new RedisStore({ url: server.url, prefix: freshPrefix(), ...FAST, onError: (op) => errors.push(op) });
    try {
      assert.equal(await store.waitUntilHealthy(5000), true);
      await store.write({ put: [res(SINGLETON)], remove: [], absent: [] });
      let stop = false;
      const traffic = (async () => {
        let n = 0;
        while (!stop) {
          await store.write({ put: [res(member(`t${n++}`), { glob: GLOB })], remove: [], absent: [] });
          await store.getResource(SINGLETON);
          await store.getGlobMembers(GLOB);
          // While Redis is down every call resolves at once: let timers run.
          await new Promise((r) => setImmediate(r));
        }
      })();
      await new Promise((r) => setTimeout(r, 100));
      await server.kill();
      await until('healthy=false', 2000, async () => !store.healthy);
      const t0 = Date.now();
      for (let i = 0; i < 20; i++) {
        assert.equal(await store.getResource(SINGLETON), undefined);
        assert.equal(await store.getGlobMembers(GLOB), undefined);
        await store.write({ put: [res(member(`down${i}`), { glob: GLOB })], remove: [], absent: [] });
      }
      assert.ok(Date.now() - t0 < 500, `60 calls while down took ${Date.now() - t0} ms`);
      stop = true;
      await traffic; // never rejected
      assert.ok(errors.length > 0, 'errors were counted');
    } finally {
      await store.close();
      await server.dispose();
    }
  });

  test('Redis restarted on the same port: healthy again by itself, outage writes replayed, new writes land', async () => {
    const server = await RedisServer.start();
    const { logger, lines } = recordingLogger();
    const store = new RedisStore({ url: server.url, prefix: freshPrefix(), ...FAST, logger });
    try {
      assert.equal(await store.waitUntilHealthy(5000), true);
      await store.write({ put: [res(SINGLETON)], remove: [], absent: [] });
      await server.kill();
      await until('healthy=false', 2000, async () => !store.healthy);
      // Writes made during the outage: a removal and a new glob member.
      const during = res(member('during'), { glob: GLOB });
      await store.write({ put: [during], remove: [{ key: SINGLETON }], absent: [] });

      await server.restart(); // empty Redis on the same port (no persistence)
      assert.equal(await store.waitUntilHealthy(5000), true, 'reconnected without help');
      const after = res(member('after'), { glob: GLOB, version: 'v9' });
      await store.write({ put: [after], remove: [], absent: [] });
      assert.deepEqual(await store.getResource(member('after')), after);
      assert.deepEqual(await store.getResource(member('during')), during);
      const members = await store.getGlobMembers(GLOB);
      assert.ok(Array.isArray(members));
      assert.deepEqual(members.map((r) => r.key).sort(), [member('after'), member('during')]);
      assert.equal(await store.getResource(SINGLETON), undefined);
      // One log line per state change, however many reconnect attempts failed.
      assert.deepEqual(lines, [
        'info: redis available: shared cache in use',
        'warn: redis unavailable: bypassing shared cache until it recovers',
        'info: redis available: shared cache in use',
      ]);
    } finally {
      await store.close();
      await server.dispose();
    }
  });

  test('Redis frozen (SIGSTOP) with the connection open: reads give up at the command timeout, recovery by probe', async () => {
    const server = await RedisServer.start();
    const store = new RedisStore({ url: server.url, prefix: freshPrefix(), ...FAST });
    try {
      assert.equal(await store.waitUntilHealthy(5000), true);
      await store.write({ put: [res(SINGLETON)], remove: [], absent: [] });
      server.pause();
      const t0 = Date.now();
      assert.equal(await store.getResource(SINGLETON), undefined);
      const took = Date.now() - t0;
      assert.ok(took >= 90 && took < 1000, `read gave up after ${took} ms`);
      assert.equal(store.healthy, false);
      const t1 = Date.now();
      await store.write({ put: [res(member('frozen'), { glob: GLOB })], remove: [], absent: [] });
      assert.equal(await store.getGlobMembers(GLOB), undefined);
      assert.ok(Date.now() - t1 < 100, 'unhealthy store answers at once');
      server.resume();
      assert.equal(await store.waitUntilHealthy(3000), true, 'healthy again after resume');
      await until('the pending write to land', 2000, async () => Array.isArray(await store.getGlobMembers(GLOB)));
      assert.equal(((await store.getResource(SINGLETON)) as StoredResource).version, 'v1');
    } finally {
      server.resume();
      await store.close();
      await server.dispose();
    }
  });

  test('a fleet record written to a frozen Redis fails within the write deadline and is counted as a fleet error', async () => {
    const server = await RedisServer.start();
    const errors: string[] = [];
    const store = new RedisStore({ url: server.url, prefix: freshPrefix(), ...FAST, writeTimeoutMs: 200, onError: (op) => errors.push(op) });
    try {
      assert.equal(await store.waitUntilHealthy(5000), true);
      const records = store.memberRecords();
      await records.put('relay-a', '{}', 5000);
      assert.deepEqual((await records.list()).map((r) => r.id), ['relay-a']);
      server.pause();
      const t0 = Date.now();
      await assert.rejects(records.put('relay-a', '{}', 5000), /redis fleet put/);
      assert.ok(Date.now() - t0 < 1000, `gave up after ${Date.now() - t0} ms`);
      assert.deepEqual(errors, ['fleet']);
      server.resume();
      assert.equal(await store.waitUntilHealthy(3000), true);
      await records.put('relay-a', '{}', 5000);
    } finally {
      server.resume();
      await store.close();
      await server.dispose();
    }
  });

  test('Redis never reachable: every call resolves at once and the store keeps trying', async () => {
    const port = await freePort();
    const errors: string[] = [];
    const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, prefix: freshPrefix(), ...FAST, onError: (op) => errors.push(op) });
    let server: RedisServer | undefined;
    try {
      assert.equal(await store.waitUntilHealthy(300), false);
      assert.equal(store.healthy, false);
      assert.equal(await store.getResource(SINGLETON), undefined);
      assert.equal(await store.getGlobMembers(GLOB), undefined);
      await store.write({ put: [res(SINGLETON)], remove: [], absent: [] });
      const pages: StoredResource[][] = [];
      for await (const page of store.warmLoad({ waitMs: 100 })) pages.push(page);
      assert.deepEqual(pages, []);
      assert.ok(errors.includes('connection'), 'connection errors counted');
      // Redis appears later on that port: the store connects and writes the backlog.
      server = await RedisServer.start({ port });
      assert.equal(await store.waitUntilHealthy(5000), true);
      await until('the backlog to land', 2000, async () => (await store.getResource(SINGLETON)) !== undefined);
    } finally {
      await store.close();
      await server?.dispose();
    }
  });

  test('the outage backlog keeps the latest op per key and drops the oldest beyond maxPendingWrites', async () => {
    const port = await freePort();
    const errors: string[] = [];
    const store = new RedisStore({
      url: `redis://127.0.0.1:${port}`,
      prefix: freshPrefix(),
      ...FAST,
      maxPendingWrites: 3,
      onError: (op) => errors.push(op),
    });
    let server: RedisServer | undefined;
    try {
      const keys = ['k0', 'k1', 'k2', 'k3'].map((n) => `legacy:${TYPE}:${n}`);
      for (const k of keys) await store.write({ put: [res(k)], remove: [], absent: [] });
      const k3v2 = res(keys[3]!, { version: 'v2' });
      await store.write({ put: [k3v2], remove: [], absent: [] }); // supersedes k3 v1, no extra slot
      assert.deepEqual(errors.filter((e) => e === 'write-dropped'), ['write-dropped'], 'only k0 dropped');
      server = await RedisServer.start({ port });
      assert.equal(await store.waitUntilHealthy(5000), true);
      await until('the backlog to land', 2000, async () => (await store.getResource(keys[3]!)) !== undefined);
      assert.equal(await store.getResource(keys[0]!), undefined, 'oldest pending write dropped');
      assert.equal(((await store.getResource(keys[1]!)) as StoredResource).version, 'v1');
      assert.equal(((await store.getResource(keys[2]!)) as StoredResource).version, 'v1');
      assert.deepEqual(await store.getResource(keys[3]!), k3v2);
    } finally {
      await store.close();
      await server?.dispose();
    }
  });

  test('close() ends the connection; later calls resolve without touching Redis', async () => {
    const server = await RedisServer.start();
    const store = new RedisStore({ url: server.url, prefix: freshPrefix(), ...FAST });
    try {
      assert.equal(await store.waitUntilHealthy(5000), true);
      await store.write({ put: [res(SINGLETON)], remove: [], absent: [] });
      await store.close();
      assert.equal(store.healthy, false);
      assert.equal(await store.getResource(SINGLETON), undefined);
      await store.write({ put: [res(SINGLETON)], remove: [], absent: [] });
      await store.close(); // idempotent
    } finally {
      await server.dispose();
    }
  });
});
