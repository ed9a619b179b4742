/**
 * Graceful shutdown: SIGTERM / SIGINT with clients connected exit 0 promptly;
 * clients are told UNAVAILABLE; a client that stopped reading cannot hold the
 * process past the grace period; the shared store is flushed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { RelayConfigInput } from '../src/config';
import type { SharedStore, StoreBatch } from '../src/cache/types';
import { startRelay } from '../src/relay';
import { deltaRequestCodec } from '../src/proto/messages';
import { spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { LISTENER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { freePort } from './support/ports';
import { http, pollUntil } from './support/admin';
import { DELTA_ADS_PATH, RawH2, grpcMessage } from './support/raw-h2';

const T = { timeout: 40_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

function exitOf(proc: ChildProcess, withinMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve({ code: proc.exitCode, signal: proc.signalCode });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the relay did not exit within ${withinMs} ms`)), withinMs);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

async function withCli(
  extraArgs: string[],
  body: (cli: SpawnedCli, origin: TestOrigin, client: (nodeId: string) => DeltaClient) => Promise<void>,
): Promise<void> {
  const origin = await TestOrigin.start();
  const clients: DeltaClient[] = [];
  let cli: SpawnedCli | undefined;
  try {
    cli = await spawnCli([
      '--listen', '127.0.0.1:0',
      '--admin', '127.0.0.1:0',
      '--authority', `a=${origin.uri}`,
      '--unsubscribe-grace', '0',
      '--log-level', 'info',
      ...extraArgs,
    ]);
    const port = cli.port;
    await body(cli, origin, (nodeId) => {
      const c = new DeltaClient(`127.0.0.1:${port}`, { nodeId });
      clients.push(c);
      return c;
    });
  } finally {
    for (const c of clients) c.close();
    if (cli && cli.proc.exitCode === null && cli.proc.signalCode === null) cli.proc.kill('SIGKILL');
    await origin.stop();
  }
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`${signal} with connected clients exits 0 within 10 s; clients get UNAVAILABLE`, T, async () => {
    await withCli([], async (cli, origin, client) => {
      const n = L('shutdown/one');
      origin.setResource(LISTENER, n, 'x', 'v1');
      const clients = [client('envoy-1'), client('envoy-2'), client('envoy-3')];
      for (const c of clients) c.subscribe(LISTENER, [n]);
      for (const c of clients) await c.waitForVersion(LISTENER, n, 'v1');

      cli.proc.kill(signal);
      const exit = await exitOf(cli.proc, 10_000);
      assert.deepEqual(exit, { code: 0, signal: null }, [...cli.text, ...cli.logs.map((l) => JSON.stringify(l))].join('\n'));
      for (const c of clients) {
        const st = await c.waitForEnd();
        assert.equal(st.code, grpc.status.UNAVAILABLE, st.details);
        assert.match(st.details, /shutting down/);
      }
      const done = cli.logs.find((l) => l.msg === 'shutdown complete');
      assert.ok(done, 'a "shutdown complete" log line');
      assert.equal(done.streams, 3);
      assert.equal(done.forced, false);
      assert.ok(cli.logs.some((l) => l.msg === 'signal received: graceful shutdown' && l.signal === signal));
      assert.ok(cli.logs.every((l) => typeof l.level === 'number'), 'every log line is pino JSON');
      // The upstream saw the relay go: its stream ended.
      await origin.waitFor(() => origin.streamCount === 0, 'upstream stream closed');
    });
  });
}

test('a client that stopped reading cannot hold the shutdown past the grace period', T, async () => {
  await withCli(['--shutdown-grace', '500'], async (cli, origin) => {
    const n = L('shutdown/stalled');
    origin.setResource(LISTENER, n, Buffer.alloc(128 * 1024, 7), 'v1');
    // A client that stopped reading at the HTTP/2 level: it never grants more
    // flow-control window, so a response above 64 KB can never be sent whole.
    const stalled = await RawH2.connect(cli.port);
    const stream = stalled.openStream(DELTA_ADS_PATH);
    stalled.sendData(stream, grpcMessage(deltaRequestCodec.encode({ node: { id: 'stalled' }, type_url: LISTENER, resource_names_subscribe: [n] })));
    await pollUntil(async () => {
      const r = await http(cli.adminPort!, 'GET', '/debug/clients');
      const clients = (r.json as { clients: Array<{ slow: boolean }> }).clients;
      return clients.length === 1 && clients[0]!.slow;
    }, 'the relay sees the client as slow');

    cli.proc.kill('SIGTERM');
    const exit = await exitOf(cli.proc, 10_000);
    assert.deepEqual(exit, { code: 0, signal: null });
    const done = cli.logs.find((l) => l.msg === 'shutdown complete');
    assert.ok(done, 'a "shutdown complete" log line');
    assert.equal(done.forced, true, 'connections were cut after the grace period');
    stalled.close();
  });
});

test('stop() flushes the shared store before it resolves', T, async () => {
  const origin = await TestOrigin.start();
  const events: string[] = [];
  const store: SharedStore & { batches: StoreBatch[] } = {
    batches: [],
    healthy: true,
    write(batch) {
      this.batches.push(batch);
      return Promise.resolve();
    },
    getResource: () => Promise.resolve(undefined),
    getGlobMembers: () => Promise.resolve(undefined),
    async close() {
      events.push('close');
      await new Promise((r) => setImmediate(r));
      events.push('flushed');
    },
  };
  const config: RelayConfigInput = {
    listen: '127.0.0.1:0',
    admin: null,
    authorities: [{ name: 'a', uris: [origin.uri] }],
    defaultUpstream: null,
    unsubscribeGraceMs: 0,
    nodeId: 'relay-shutdown-test',
    logLevel: 'silent',
  };
  const relay = await startRelay(config, { shared: store });
  const c = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: 'flush' });
  try {
    const n = L('shutdown/flush');
    origin.setResource(LISTENER, n, 'x', 'v1');
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    assert.ok(store.batches.some((b) => b.put.some((r) => r.version === 'v1')), 'written through');
    await relay.stop();
    events.push('stopped');
    assert.equal(events.at(-1), 'stopped');
    assert.deepEqual(events.slice(1), ['flushed', 'stopped'], events.join(', '));
    assert.equal((await c.waitForEnd()).code, grpc.status.UNAVAILABLE);
    await relay.stop(); // idempotent
  } finally {
    c.close();
    await relay.stop();
    await origin.stop();
  }
});

test('a start that fails part-way closes what it had opened: after a busy admin port the listen port is free again', T, async () => {
  const origin = await TestOrigin.start();
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const busyPort = (busy.address() as net.AddressInfo).port;
  const listenPort = await freePort();
  const config: RelayConfigInput = {
    listen: `127.0.0.1:${listenPort}`,
    admin: `127.0.0.1:${busyPort}`,
    authorities: [{ name: 'a', uris: [origin.uri] }],
    defaultUpstream: null,
    unsubscribeGraceMs: 0,
    nodeId: 'relay-failed-start',
    logLevel: 'silent',
  };
  const again = net.createServer();
  try {
    await assert.rejects(startRelay(config), /EADDRINUSE/);
    // The downstream listener was bound before the admin port failed; the teardown let go of it.
    await new Promise<void>((resolve, reject) => {
      again.once('error', reject);
      again.listen(listenPort, '127.0.0.1', resolve);
    });
    assert.equal(origin.subscribedKeys(LISTENER).size, 0, 'no upstream was started');
  } finally {
    again.close();
    busy.close();
    await origin.stop();
  }
});
