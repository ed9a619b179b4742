/**
 * The encode-once ablation of bench/ scenario 2 (bench/README.md): the real
 * CLI with the hidden `--no-share-responses` encodes one change once per
 * client; without it, once for all of them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { http, metricValue, parsePrometheus } from './support/admin';
import { LISTENER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';

const T = { timeout: 30_000 };
const CLIENTS = 3;

/** How many encodings one change to a resource CLIENTS clients hold costs the relay started with `extraArgs`. */
async function encodingsOfOneChange(extraArgs: string[]): Promise<number> {
  const origin = await TestOrigin.start();
  const clients: DeltaClient[] = [];
  let cli: SpawnedCli | undefined;
  try {
    // Info level: spawnCli waits for the "relay listening" line.
    cli = await spawnCli(['--listen', '127.0.0.1:0', '--authority', `a=${origin.uri}`, '--log-level', 'info', ...extraArgs]);
    const { port, adminPort } = cli;
    const encoded = async (): Promise<number> => {
      const reply = await http(adminPort!, 'GET', '/metrics');
      return metricValue(parsePrometheus(reply.text), 'xdstp_relay_responses_encoded_total');
    };
    const name = xdstp('a', LISTENER, 'ablation/one');
    origin.setResource(LISTENER, name, 'first', 'v1');
    for (let i = 0; i < CLIENTS; i++) {
      const c = new DeltaClient(`127.0.0.1:${port}`, { nodeId: `client-${i}` });
      clients.push(c);
      c.subscribe(LISTENER, [name]);
      await c.waitForVersion(LISTENER, name, 'v1');
    }
    const before = await encoded();
    origin.setResource(LISTENER, name, 'second', 'v2');
    for (const c of clients) await c.waitForVersion(LISTENER, name, 'v2');
    return (await encoded()) - before;
  } finally {
    for (const c of clients) c.close();
    await cli?.stop();
    await origin.stop();
  }
}

test('with --no-share-responses each client of a change gets its own encoding; without it they share one', T, async () => {
  assert.equal(await encodingsOfOneChange(['--no-share-responses']), CLIENTS, 'one encoding per client');
  assert.equal(await encodingsOfOneChange([]), 1, 'one encoding for all clients');
});
