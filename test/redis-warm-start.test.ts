/**
 * A relay (the real CLI) starting against a large Redis, with its control
 * plane down, serving a client that connects while the warm start is still
 * reading Redis (as a balancer would send it one: /readyz is already 200).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRedisStore } from '../src/cache/redis-store';
import type { StoredResource } from '../src/cache/types';
import { resourceCodec } from '../src/proto/messages';
import { spawnCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { CLUSTER, xdstp } from './support/names';
import { makeResource } from './support/origin';
import { freePort } from './support/ports';
import { RedisServer, redisSkip } from './support/redis-server';
import { sleep } from './support/wait';

const skip = redisSkip('relay warm start tests');
const GLOBS = 100;
const PER_GLOB = 1000;
const C = (rest: string): string => xdstp('a', CLUSTER, rest);

describe('warm start from a large Redis', { skip }, () => {
  let server: RedisServer;

  before(async () => {
    server = await RedisServer.start();
    const store = createRedisStore(server.url, { writeTimeoutMs: 30_000, maxPendingWrites: GLOBS * PER_GLOB });
    assert.ok(await store.waitUntilHealthy(5000));
    const payload = Buffer.alloc(200, 0x61);
    for (let g = 0; g < GLOBS; g++) {
      const put: StoredResource[] = [];
      for (let i = 0; i < PER_GLOB; i++) {
        const key = C(`pool${g}/r${i}`);
        put.push({ key, typeUrl: CLUSTER, version: 'v1', resource: resourceCodec.encode(makeResource(CLUSTER, key, payload, 'v1')), glob: C(`pool${g}/*`) });
      }
      await store.write({ put, remove: [], absent: [] });
    }
    await store.close();
  });

  after(async () => {
    await server?.dispose();
  });

  test('a client asking for a glob while the relay is still loading Redis gets the whole glob', { timeout: 60_000 }, async () => {
    const [port, adminPort, deadOrigin] = await Promise.all([freePort(), freePort(), freePort()]);
    const starting = spawnCli(
      ['--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${adminPort}`, '--authority', `a=grpc://127.0.0.1:${deadOrigin}`, '--redis', server.url, '--redis-warm-timeout', '60000', '--log-level', 'info'],
      {},
      60_000,
    );
    starting.catch(() => undefined);
    // Like a balancer: send the client as soon as /readyz says ready.
    for (let i = 0; ; i++) {
      const ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then((r) => r.status === 200, () => false);
      if (ready) break;
      assert.ok(i < 3000, 'the relay became ready');
      await sleep(5);
    }
    const client = new DeltaClient(`127.0.0.1:${port}`, { nodeId: 'early' });
    const cli = await (async () => {
      try {
        const glob = C('pool7/*');
        client.subscribe(CLUSTER, [glob]);
        await client.waitFor(() => client.held(CLUSTER).size >= PER_GLOB, 'the whole glob', 30_000);
        return await starting;
      } catch (err) {
        client.close();
        await starting.then((c) => c.stop(), () => undefined);
        throw err;
      }
    })();
    try {
      const opened = cli.logs.findIndex((l) => l.msg === 'client stream opened');
      const loaded = cli.logs.findIndex((l) => l.msg === 'redis warm load done');
      assert.ok(opened >= 0 && loaded >= 0 && opened < loaded, 'the client arrived while Redis was still being read');
      // Its first answer is the glob, whole: never a part of it.
      const first = client.responses[0]!;
      assert.equal(first.resources?.length, PER_GLOB, `first response carried ${first.resources?.length} members`);
      assert.equal(client.held(CLUSTER).size, PER_GLOB);
      assert.deepEqual(client.removedNames(CLUSTER), []);
      assert.deepEqual(client.violations, []);
    } finally {
      client.close();
      await cli.stop();
    }
  });
});
