/**
 * Relays in tiers: a tier-2 relay whose upstream is a tier-1 relay whose
 * origin is a directory. Clients of tier 2, tier 1 and the files form one
 * pipeline: an edit to a file reaches a tier-2 client.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RelayConfigInput } from '../src/config';
import { startRelay, type RunningRelay } from '../src/relay';
import { assertWellFormed } from './support/assertions';
import { DeltaClient } from './support/delta-client';
import { CapturedLog, cluster, entry, listener, removeFile, resourcesFile, tempDir, withFileRelay, writeFile } from './support/files';
import { CLUSTER, LISTENER, xdstp } from './support/names';
import { withTimeout } from './support/wait';

const T = { timeout: 30_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const C = (rest: string): string => xdstp('a', CLUSTER, rest);

test('a file edit travels file → tier-1 relay → tier-2 relay → client', T, async () => {
  const dir = tempDir();
  writeFile(dir, 'listeners.yaml', resourcesFile(entry(L('chain/one'), listener(L('chain/one'), 1001))));
  writeFile(dir, 'clusters.yaml', resourcesFile(entry(C('web'), cluster(C('web'), '1s'))));
  await withFileRelay({ a: dir }, async (tier1) => {
    const log = new CapturedLog();
    const config: RelayConfigInput = {
      listen: '127.0.0.1:0',
      admin: null,
      authorities: [{ name: 'a', uris: [`grpc://${tier1.address}`] }],
      defaultUpstream: null,
      unsubscribeGraceMs: 0,
      nodeId: 'tier-2',
      logLevel: 'info',
    };
    let tier2: RunningRelay | undefined;
    const clients: DeltaClient[] = [];
    try {
      tier2 = await startRelay(config, { logger: log.logger });
      const edge = new DeltaClient(`127.0.0.1:${tier2.port}`, { nodeId: 'edge-envoy' });
      const direct = tier1.client({ nodeId: 'tier-1-envoy' });
      clients.push(edge);

      edge.subscribe(LISTENER, [L('chain/*')]);
      edge.subscribe(CLUSTER, [C('web')]);
      direct.subscribe(CLUSTER, [C('web')]);
      await edge.waitFor(() => edge.held(LISTENER).has(L('chain/one')) && edge.held(CLUSTER).has(C('web')), 'initial resources at tier 2');
      await direct.waitFor(() => direct.held(CLUSTER).has(C('web')), 'initial cluster at tier 1');
      const before = edge.held(CLUSTER).get(C('web'));
      assert.equal(before, direct.held(CLUSTER).get(C('web')), 'both tiers serve the same version');

      // Change the cluster in its file: the new version reaches the tier-2 client.
      writeFile(dir, 'clusters.yaml', resourcesFile(entry(C('web'), cluster(C('web'), '3s'))));
      await edge.waitFor(() => {
        const v = edge.held(CLUSTER).get(C('web'));
        return v !== undefined && v !== before;
      }, 'the edited cluster at tier 2');
      await direct.waitFor(() => direct.held(CLUSTER).get(C('web')) === edge.held(CLUSTER).get(C('web')), 'tier 1 on the same version');
      const payload = edge.resource(CLUSTER, C('web'))?.resource;
      assert.ok(payload);
      assert.deepEqual(
        Buffer.from(payload.value),
        Buffer.from(direct.resource(CLUSTER, C('web'))!.resource!.value),
        'the payload bytes are the ones the origin encoded',
      );

      // A new glob member, then a deleted file, arrive as deltas.
      writeFile(dir, 'more.yaml', resourcesFile(entry(L('chain/two'), listener(L('chain/two'), 1002))));
      await edge.waitFor(() => edge.held(LISTENER).has(L('chain/two')), 'a new glob member at tier 2');
      removeFile(dir, 'listeners.yaml');
      await edge.waitForRemoved(LISTENER, L('chain/one'));
      assert.deepEqual([...edge.held(LISTENER).keys()], [L('chain/two')]);
      assert.equal(edge.received(LISTENER, L('chain/one')).length, 1, 'chain/one was sent once, then removed');

      // Tier 1 is an ordinary upstream to tier 2.
      assert.ok(log.find((l) => l.msg === 'upstream connected'), 'tier 2 connected to tier 1');
      assertWellFormed(edge, direct);
    } finally {
      for (const c of clients) c.close();
      if (tier2) await withTimeout(tier2.stop(), 5000, 'tier2.stop()').catch(() => undefined);
    }
  });
});
