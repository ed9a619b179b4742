/**
 * The real CLI process, end to end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
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

/** How many of `count` TCP connections to `port` complete their handshake within `ms`; all are closed after. */
async function handshakesWithin(port: number, count: number, ms: number): Promise<number> {
  const sockets: net.Socket[] = [];
  let connected = 0;
  for (let i = 0; i < count; i++) {
    const s = net.connect(port, '127.0.0.1', () => connected++);
    s.on('error', () => undefined);
    sockets.push(s);
  }
  await new Promise((resolve) => setTimeout(resolve, ms));
  const done = connected;
  for (const s of sockets) s.destroy();
  return done;
}

/** The kernel's cap on a listener's accept queue, where it says (Linux); undefined elsewhere. */
function kernelAcceptQueueCap(): number | undefined {
  try {
    const cap = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    return Number.isFinite(cap) ? cap : undefined;
  } catch {
    return undefined;
  }
}

test('a relay that stops accepting for a moment still completes the handshakes of 800 clients connecting at once', T, async (t) => {
  // Node's own accept queue is 511: with the relay stopped, the kernel would complete 512 handshakes and drop the
  // rest of the SYNs, which their clients retry only after a second.
  const CLIENTS = 800;
  const cap = kernelAcceptQueueCap();
  if (cap === undefined || !(cap >= CLIENTS)) {
    t.skip(`the kernel caps a listener's accept queue at ${cap ?? 'an unknown length'} (net.core.somaxconn), below ${CLIENTS}`);
    return;
  }
  await withCli(
    // Every test connection comes from 127.0.0.1: the per-peer bound would refuse the burst once it is accepted.
    (o) => ['--listen', '127.0.0.1:0', '--authority', `a=${o.uri}`, '--max-connections-per-peer', '0', '--log-level', 'info'],
    {},
    async (cli, origin, client) => {
      cli.proc.kill('SIGSTOP');
      let completed: number;
      try {
        completed = await handshakesWithin(cli.port, CLIENTS, 700);
      } finally {
        cli.proc.kill('SIGCONT');
      }
      assert.equal(completed, CLIENTS, `${completed} of ${CLIENTS} handshakes completed while the relay was stopped`);
      origin.setResource(LISTENER, L('cli/after-burst'), 'one', 'v1');
      const c = client();
      c.subscribe(LISTENER, [L('cli/after-burst')]);
      await c.waitForVersion(LISTENER, L('cli/after-burst'), 'v1');
    },
  );
});
