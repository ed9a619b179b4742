/**
 * The real CLI process, end to end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TestOrigin } from './support/origin';
import { DeltaClient } from './support/delta-client';
import { runCliToExit, spawnCli, type SpawnedCli } from './support/cli';
import { freePort } from './support/ports';
import { LISTENER, xdstp } from './support/names';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

async function withCli(
  args: (origin: TestOrigin) => string[],
  env: Record<string, string>,
  body: (cli: SpawnedCli, origin: TestOrigin, client: () => DeltaClient) => Promise<void>,
): Promise<void> {
  const origin = await TestOrigin.start();
  const clients: DeltaClient[] = [];
  let cli: SpawnedCli | undefined;
  try {
    cli = await spawnCli(args(origin), env);
    const port = cli.port;
    await body(cli, origin, () => {
      const c = new DeltaClient(`127.0.0.1:${port}`, { nodeId: `cli-client-${clients.length}` });
      clients.push(c);
      return c;
    });
  } finally {
    for (const c of clients) c.close();
    await cli?.stop();
    await origin.stop();
  }
}

test('the CLI started with --authority serves clients end to end', T, async () => {
  await withCli(
    (o) => ['--listen', '127.0.0.1:0', '--authority', `a=${o.uri}`, '--unsubscribe-grace', '0', '--node-id', 'cli-relay', '--log-level', 'info'],
    {},
    async (cli, origin, client) => {
      assert.ok(cli.port > 0);
      origin.setResource(LISTENER, L('cli/one'), 'one', 'v1');
      const c = client();
      c.subscribe(LISTENER, [L('cli/one')]);
      await c.waitForVersion(LISTENER, L('cli/one'), 'v1');
      origin.setResource(LISTENER, L('cli/one'), 'two', 'v2');
      await c.waitForVersion(LISTENER, L('cli/one'), 'v2');
      assert.equal(origin.requests[0]!.node?.id, 'cli-relay', 'the relay presents --node-id upstream');
    },
  );
});

test('the CLI rejects an invalid configuration with a one-line reason and a non-zero exit', T, async () => {
  const res = await runCliToExit(['--listen', '127.0.0.1:0', '--authority', 'nonsense', '--log-level', 'info']);
  const output = `${res.stderr}\n${res.stdout}`;
  assert.ok(res.code !== null && res.code !== 0, `exit code ${res.code} (signal ${res.signal})\n${output}`);
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  assert.ok(
    lines.some((l) => /nonsense|authority/i.test(l)),
    `no line names the problem:\n${output}`,
  );
  assert.ok(!/^\s+at /m.test(output), `a stack trace instead of a one-line reason:\n${output}`);
  assert.ok(!lines.some((l) => l.includes('relay listening')), 'it must not start');
});

test('the CLI honours XDSTP_RELAY_LISTEN', T, async () => {
  const port = await freePort();
  await withCli(
    (o) => ['--authority', `a=${o.uri}`, '--log-level', 'info'],
    { XDSTP_RELAY_LISTEN: `127.0.0.1:${port}` },
    async (cli, origin, client) => {
      assert.equal(cli.port, port);
      origin.setResource(LISTENER, L('cli/env'), 'env', 'v1');
      const c = client();
      c.subscribe(LISTENER, [L('cli/env')]);
      await c.waitForVersion(LISTENER, L('cli/env'), 'v1');
    },
  );
});

test('the CLI admin server answers /healthz and /metrics', T, async () => {
  await withCli(
    (o) => ['--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--authority', `a=${o.uri}`, '--log-level', 'info'],
    {},
    async (cli) => {
      assert.ok(cli.adminPort !== null && cli.adminPort > 0, 'adminPort is logged');
      const health = await fetch(`http://127.0.0.1:${cli.adminPort}/healthz`);
      assert.equal(health.status, 200);
      await health.text();
      const metrics = await fetch(`http://127.0.0.1:${cli.adminPort}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^# (HELP|TYPE) /m);
    },
  );
});
