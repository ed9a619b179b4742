/**
 * The shared tier behind Redis Sentinel, for real: one primary, one replica
 * and three redis-sentinel processes on loopback; a relay (the CLI) given
 * `redis+sentinel://…/mymaster`; the primary is SIGKILLed.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { http } from './support/admin';
import { binariesSkip } from './support/binaries';
import { spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { CLUSTER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { freePort } from './support/ports';
import { storedVersion } from './support/redis-records';
import { RedisSentinel } from './support/redis-sentinel';
import { RedisServer, redisSkip } from './support/redis-server';
import { sleep } from './support/wait';

const skip = redisSkip('Redis Sentinel failover') || binariesSkip(['redis-sentinel', 'redis-cli'], 'Redis Sentinel failover');
const MASTER = 'mymaster';
const PREFIX = 'sentinel-test:';

async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** `SENTINEL MASTER` as a field map. */
function masterInfo(s: RedisSentinel): Record<string, string> {
  const lines = s.cli('sentinel', 'master', MASTER);
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < lines.length; i += 2) out[lines[i]!] = lines[i + 1]!;
  return out;
}

describe('a relay on Redis Sentinel', { skip }, () => {
  let primary: RedisServer;
  let replica: RedisServer;
  const sentinels: RedisSentinel[] = [];
  let origin: TestOrigin;
  let relay: SpawnedCli;
  const clients: DeltaClient[] = [];
  const raws: Redis[] = [];

  before(async () => {
    primary = await RedisServer.start();
    replica = await RedisServer.start({ extraArgs: ['--replicaof', '127.0.0.1', String(primary.port)] });
    await until('the replica in sync', 10_000, () => replica.cli('info', 'replication').includes('master_link_status:up'));
    for (let i = 0; i < 3; i++) {
      sentinels.push(await RedisSentinel.start({ masterName: MASTER, masterPort: primary.port, quorum: 2, downAfterMs: 1000, failoverTimeoutMs: 5000 }));
    }
    // Failover needs the sentinels to know each other and the replica.
    await until('sentinels that know each other and the replica', 20_000, () =>
      sentinels.every((s) => {
        const m = masterInfo(s);
        return m['num-other-sentinels'] === '2' && m['num-slaves'] === '1';
      }),
    );
    origin = await TestOrigin.start({ label: 'sentinel-origin' });
    relay = await spawnCli(
      ['--listen', '127.0.0.1:0', '--admin', `127.0.0.1:${await freePort()}`, '--authority', `a=${origin.uri}`,
        '--redis', `redis+sentinel://${sentinels.map((s) => s.address).join(',')}/${MASTER}`, '--redis-prefix', PREFIX, '--log-level', 'info'],
      {},
      20_000,
    );
  });

  after(async () => {
    for (const c of clients) c.close();
    for (const r of raws) r.disconnect();
    await relay?.stop();
    await origin?.stop();
    await Promise.all(sentinels.map((s) => s.stop()));
    await primary?.dispose();
    await replica?.dispose();
  });

  function raw(server: RedisServer): Redis {
    const r = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    r.on('error', () => undefined);
    raws.push(r);
    return r;
  }

  async function redisState(): Promise<string> {
    return ((await http(relay.adminPort!, 'GET', '/readyz')).json as { redis: string }).redis;
  }

  test('the primary SIGKILLed: the relay keeps serving, follows the failover, and its writes reach the new primary', { timeout: 60_000 }, async () => {
    const S = xdstp('a', CLUSTER, 'sentinel/single');
    const G = xdstp('a', CLUSTER, 'sentinel/pool/*');
    const M = xdstp('a', CLUSTER, 'sentinel/pool/m');
    origin.setResource(CLUSTER, S, 's', 'v1');
    origin.setResource(CLUSTER, M, 'm', 'v1');

    const c = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: 'sentinel-client' });
    clients.push(c);
    c.subscribe(CLUSTER, [S, G]);
    await c.waitForVersion(CLUSTER, S, 'v1');
    await c.waitForVersion(CLUSTER, M, 'v1');
    const onPrimary = raw(primary);
    await until('S@v1 written to the primary', 5000, async () => (await storedVersion(onPrimary, PREFIX, S)) === 'v1');
    assert.equal(await redisState(), 'up');

    await primary.kill();
    await until('the relay sees Redis down', 5000, async () => (await redisState()) === 'down');

    // During the failover: updates still reach the client, a new client is served from memory.
    origin.setResource(CLUSTER, S, 's', 'v2');
    await c.waitForVersion(CLUSTER, S, 'v2');
    const late = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: 'sentinel-late' });
    clients.push(late);
    late.subscribe(CLUSTER, [S, G]);
    await late.waitFor(() => late.held(CLUSTER).get(S) === 'v2' && late.held(CLUSTER).get(M) === 'v1', 'served while Redis fails over');
    assert.equal((await http(relay.adminPort!, 'GET', '/readyz')).status, 200, 'ready throughout');

    // The sentinels promote the replica; the relay finds it through them.
    await until('the replica promoted', 30_000, () => sentinels.every((s) => s.masterOf(MASTER) === `127.0.0.1:${replica.port}`));
    await until('the relay back on Redis', 15_000, async () => (await redisState()) === 'up');
    const onNewPrimary = raw(replica);
    assert.match(await onNewPrimary.info('replication'), /role:master/);
    // What the relay wrote during the outage is replayed there, and new writes land there.
    await until('S@v2 (written during the failover) on the new primary', 10_000, async () => (await storedVersion(onNewPrimary, PREFIX, S)) === 'v2');
    origin.setResource(CLUSTER, M, 'm', 'v3');
    await c.waitForVersion(CLUSTER, M, 'v3');
    await until('M@v3 on the new primary', 10_000, async () => (await storedVersion(onNewPrimary, PREFIX, M)) === 'v3');

    assert.equal(c.status, undefined, 'the client stream never ended');
    assert.deepEqual(c.removedNames(CLUSTER), []);
    assert.deepEqual(c.violations, []);
  });
});
