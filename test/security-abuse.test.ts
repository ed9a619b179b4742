/**
 * Connection limits and HTTP/2 abuse against a real relay: each hostile
 * client is a raw HTTP/2 connection (test/support/raw-h2.ts) doing one bad
 * thing, while a well-behaved delta client keeps receiving updates from the
 * origin. The hostile connection is closed; nothing else is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type { DeltaClient } from './support/delta-client';
import { LISTENER, xdstp } from './support/names';
import type { TestOrigin } from './support/origin';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { RelayMetrics } from '../src/metrics';
import { ConnectionGuard, OVERSIZE_CUT_FACTOR } from '../src/security/connection-guard';
import { DEFAULT_LIMITS } from '../src/security/limits';
import { FRAME, RawH2, grpcMessage } from './support/raw-h2';
import { TestPki, opensslSkip } from './support/certs';
import { withSecureRelay, type SecureRelayEnv } from './support/secure-relay';
import { sleep } from './support/wait';
import type { RunningRelay } from '../src/relay';

const T = { timeout: 30_000 };
const NAME = xdstp('a', LISTENER, 'abuse/watched');
/** How long a well-behaved client may wait for an update while another client misbehaves. */
const ON_TIME_MS = 2000;
const ENHANCE_YOUR_CALM = http2.constants.NGHTTP2_ENHANCE_YOUR_CALM;
const REFUSED_STREAM = http2.constants.NGHTTP2_REFUSED_STREAM;

/** A subscribed, synced delta client, and a function that pushes an update and waits for it to arrive on time. */
async function normalClient(env: SecureRelayEnv): Promise<{ client: DeltaClient; updateArrives(version: string): Promise<void> }> {
  const { origin, client } = env;
  origin.setResource(LISTENER, NAME, 'payload-v1', 'v1');
  const c = client();
  c.subscribe(LISTENER, [NAME]);
  await c.waitForVersion(LISTENER, NAME, 'v1');
  return {
    client: c,
    updateArrives: async (version: string) => {
      (origin as TestOrigin).setResource(LISTENER, NAME, `payload-${version}`, version);
      await c.waitForVersion(LISTENER, NAME, version, ON_TIME_MS);
    },
  };
}

async function counter(relay: RunningRelay, name: 'connectionsCut' | 'connectionsRefused', reason: string): Promise<number> {
  const m = await relay.metrics.security[name].get();
  return m.values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

/** Runs `step` in a loop (yielding to the event loop between rounds) until `conn` is closed or `maxRounds` pass. */
async function hammer(conn: RawH2, step: () => void, maxRounds = 2000): Promise<number> {
  let rounds = 0;
  while (!conn.closed && rounds < maxRounds) {
    step();
    rounds++;
    await new Promise((r) => setImmediate(r));
  }
  return rounds;
}

test('a ping flood closes that connection (GOAWAY too_many_pings) while another client keeps receiving updates', T, async () => {
  await withSecureRelay({}, async (env) => {
    const normal = await normalClient(env);
    const attacker = await RawH2.connect(env.relay.port);
    const flood = hammer(attacker, () => {
      for (let i = 0; i < 50; i++) attacker.ping();
    });
    await normal.updateArrives('v2');
    await attacker.waitClosed();
    await flood;
    assert.equal(attacker.goaway()?.code, ENHANCE_YOUR_CALM);
    assert.equal(attacker.goaway()?.debug, 'too_many_pings');
    assert.equal(await counter(env.relay, 'connectionsCut', 'ping_flood'), 1);
    await normal.updateArrives('v3');
    assert.equal(normal.client.status, undefined, 'the well-behaved stream is untouched');
  });
});

test('pings no more often than --min-ping-interval keep the connection open', T, async () => {
  await withSecureRelay({ security: { minPingInterval: 100 } }, async (env) => {
    const keepalive = await RawH2.connect(env.relay.port);
    for (let i = 0; i < 6; i++) {
      keepalive.ping();
      await sleep(150);
    }
    assert.equal(keepalive.closed, false);
    assert.equal(keepalive.goaway(), undefined);
    keepalive.close();
  });
});

test('a SETTINGS flood closes that connection while another client keeps receiving updates', T, async () => {
  await withSecureRelay({}, async (env) => {
    const normal = await normalClient(env);
    const attacker = await RawH2.connect(env.relay.port);
    const flood = hammer(attacker, () => {
      for (let i = 0; i < 20; i++) attacker.settings();
    });
    await normal.updateArrives('v2');
    await attacker.waitClosed();
    await flood;
    assert.equal(attacker.goaway()?.code, ENHANCE_YOUR_CALM);
    assert.equal(await counter(env.relay, 'connectionsCut', 'settings_flood'), 1);
    await normal.updateArrives('v3');
  });
});

test('rapid reset: opening and resetting streams in a loop closes that connection and leaves no stream behind', T, async () => {
  await withSecureRelay({}, async (env) => {
    const normal = await normalClient(env);
    const attacker = await RawH2.connect(env.relay.port);
    const rounds = hammer(attacker, () => {
      for (let i = 0; i < 20; i++) attacker.reset(attacker.openStream());
    });
    await normal.updateArrives('v2');
    await attacker.waitClosed();
    assert.ok((await rounds) < 2000, 'cut off long before the loop gave up');
    assert.equal(attacker.goaway()?.code, ENHANCE_YOUR_CALM);
    assert.equal(await counter(env.relay, 'connectionsCut', 'rapid_reset'), 1);
    await normal.updateArrives('v3');
    const open = await env.relay.metrics.downstreamStreams.get();
    assert.equal(open.values[0]?.value, 1, 'only the well-behaved stream is open');
  });
});

test('a declared 100 MB message closes that connection while another client keeps receiving updates', T, async () => {
  await withSecureRelay({}, async (env) => {
    const normal = await normalClient(env);
    const attacker = await RawH2.connect(env.relay.port);
    const stream = attacker.openStream();
    // The 5-byte prefix announces 100 MB; then a trickle that would never end.
    attacker.sendData(stream, grpcMessage(Buffer.alloc(16), 100 * 1024 * 1024));
    const trickle = hammer(attacker, () => attacker.sendData(stream, Buffer.alloc(1024)), 500);
    await normal.updateArrives('v2');
    await attacker.waitClosed();
    await trickle;
    assert.equal(await counter(env.relay, 'connectionsCut', 'oversized_message'), 1);
    await normal.updateArrives('v3');
  });
});

test('a stream beyond --max-concurrent-streams is refused; the connection\'s other streams stay open', T, async () => {
  await withSecureRelay({ security: { maxConcurrentStreams: 4 } }, async (env) => {
    const normal = await normalClient(env);
    const greedy = await RawH2.connect(env.relay.port);
    const ids = [1, 2, 3, 4, 5].map(() => greedy.openStream());
    await greedy.waitUntilFrame((f) => f.type === 0x3 && f.streamId === ids[4], 'RST_STREAM on the fifth stream');
    assert.equal(greedy.resets().get(ids[4]!), REFUSED_STREAM);
    for (const id of ids.slice(0, 4)) assert.equal(greedy.resets().has(id), false, `stream ${id} is not reset`);
    assert.equal(greedy.closed, false, 'one refused stream does not cost the connection');
    await normal.updateArrives('v2');
    greedy.close();
  });
});

test('connections over --max-connections-per-peer are refused; open ones keep working', T, async () => {
  // The well-behaved client is one of the peer's connections.
  await withSecureRelay({ security: { maxConnectionsPerPeer: 3, maxConnections: 0 } }, async (env) => {
    const normal = await normalClient(env);
    const kept = [await RawH2.connect(env.relay.port), await RawH2.connect(env.relay.port)];
    const refused = await RawH2.connect(env.relay.port);
    await refused.waitClosed();
    assert.equal(refused.frames.length, 0, 'refused before HTTP/2: not even SETTINGS');
    assert.equal(await counter(env.relay, 'connectionsRefused', 'per_peer'), 1);
    await sleep(100);
    for (const k of kept) assert.equal(k.closed, false);
    await normal.updateArrives('v2');
    kept[0]!.close();
    await sleep(100);
    const again = await RawH2.connect(env.relay.port);
    await again.waitUntilFrame((f) => f.type === 0x4, 'SETTINGS: a freed slot admits a new connection');
    again.close();
    kept[1]!.close();
  });
});

test('connections over --max-connections are refused; open ones keep working', T, async () => {
  await withSecureRelay({ security: { maxConnections: 2, maxConnectionsPerPeer: 0 } }, async (env) => {
    const normal = await normalClient(env);
    const kept = await RawH2.connect(env.relay.port);
    const refused = await RawH2.connect(env.relay.port);
    await refused.waitClosed();
    assert.equal(await counter(env.relay, 'connectionsRefused', 'total'), 1);
    await sleep(100);
    assert.equal(kept.closed, false);
    await normal.updateArrives('v2');
    kept.close();
  });
});

test('a connection without any stream is closed after --max-connection-idle; one with a stream stays', T, async () => {
  await withSecureRelay({ security: { maxConnectionIdle: 300 } }, async (env) => {
    const normal = await normalClient(env);
    const idle = await RawH2.connect(env.relay.port);
    await idle.waitClosed(5000);
    assert.equal(idle.goaway()?.code, http2.constants.NGHTTP2_NO_ERROR, 'a polite GOAWAY first');
    await normal.updateArrives('v2');
    assert.equal(normal.client.status, undefined);
  });
});

test('a connection is closed --max-connection-idle after its last stream ended, not while one is open', T, async () => {
  await withSecureRelay({ security: { maxConnectionIdle: 300 } }, async (env) => {
    const conn = await RawH2.connect(env.relay.port);
    const stream = conn.openStream();
    await sleep(900);
    assert.equal(conn.closed, false, 'an open stream keeps its connection');
    const ended = performance.now();
    conn.reset(stream);
    await conn.waitClosed(5000);
    assert.ok(performance.now() - ended >= 250, 'closed only once idle for the limit');
    assert.equal(conn.goaway()?.code, http2.constants.NGHTTP2_NO_ERROR, 'a polite GOAWAY first');
  });
});

test('a TLS connection that never completes its handshake is closed', { ...T, skip: opensslSkip('TLS handshake timeout test') }, async () => {
  const pki = TestPki.create();
  try {
    const cert = pki.issue('relay', { dns: ['localhost'], ips: ['127.0.0.1'] });
    await withSecureRelay({ security: { tlsCert: cert.cert, tlsKey: cert.key }, limits: { handshakeTimeoutMs: 300 } }, async (env) => {
      // A TCP connection that says nothing: no ClientHello, ever.
      const silent = net.connect(env.relay.port, '127.0.0.1');
      silent.on('error', () => {});
      await new Promise((resolve) => silent.once('close', resolve));
      assert.equal(await counter(env.relay, 'connectionsCut', 'handshake_timeout'), 1);
    });
  } finally {
    pki.cleanup();
  }
});

test('a TLS connection whose handshake completed outlives the handshake deadline', { ...T, skip: opensslSkip('TLS handshake timeout test') }, async () => {
  const pki = TestPki.create();
  try {
    const cert = pki.issue('relay', { dns: ['localhost'], ips: ['127.0.0.1'] });
    await withSecureRelay({ security: { tlsCert: cert.cert, tlsKey: cert.key }, limits: { handshakeTimeoutMs: 300 } }, async (env) => {
      env.origin.setResource(LISTENER, NAME, 'payload-v1', 'v1');
      const c = env.client({
        credentials: grpc.credentials.createSsl(pki.caPem),
        channelOptions: { 'grpc.ssl_target_name_override': 'localhost' },
      });
      c.subscribe(LISTENER, [NAME]);
      await c.waitForVersion(LISTENER, NAME, 'v1');
      await sleep(600);
      (env.origin as TestOrigin).setResource(LISTENER, NAME, 'payload-v2', 'v2');
      await c.waitForVersion(LISTENER, NAME, 'v2', ON_TIME_MS);
      assert.equal(c.status, undefined, 'the stream is still open');
      assert.equal(await counter(env.relay, 'connectionsCut', 'handshake_timeout'), 0);
    });
  } finally {
    pki.cleanup();
  }
});

/** A bare grpc-js server with a 1 KiB receive limit and an echo method, guarded like the relay's listener. */
async function withGuardedEcho(body: (port: number, metrics: RelayMetrics) => Promise<void>): Promise<void> {
  const metrics = new RelayMetrics({ defaultMetrics: false });
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 1024 });
  server.register(
    '/test.Echo/Echo',
    (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (b: Buffer) => call.write(b));
      call.on('error', () => {});
    },
    (b: Buffer) => b,
    (b: Buffer) => b,
    'bidi',
  );
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  const guard = new ConnectionGuard(DEFAULT_LIMITS, { logger: pino({ level: 'silent' }), metrics: metrics.security });
  guard.attach(server);
  try {
    await body(port, metrics);
  } finally {
    guard.close();
    server.forceShutdown();
  }
}

const END_STREAM = 0x1;

test('a message announced slightly above the receive limit ends only its stream; the connection keeps working', T, async () => {
  await withGuardedEcho(async (port, metrics) => {
    const conn = await RawH2.connect(port);
    const over = conn.openStream('/test.Echo/Echo');
    conn.sendData(over, grpcMessage(Buffer.alloc(0), 2048));
    await conn.waitUntilFrame((f) => f.type === FRAME.HEADERS && f.streamId === over && (f.flags & END_STREAM) !== 0, 'the refusal (trailers) on that stream');
    const next = conn.openStream('/test.Echo/Echo');
    conn.sendData(next, grpcMessage(Buffer.from('still here')));
    await conn.waitUntilFrame((f) => f.type === FRAME.DATA && f.streamId === next, 'the echo on a second stream');
    assert.equal(conn.closed, false);
    assert.equal((await metrics.security.limitExceeded.get()).values.find((v) => v.labels.limit === 'request_size')?.value, 1);
    assert.equal((await metrics.security.connectionsCut.get()).values.reduce((n, v) => n + v.value, 0), 0, 'no connection cut');
    conn.close();
  });
});

test(`a message announced at ${OVERSIZE_CUT_FACTOR}× the receive limit or more closes its connection`, T, async () => {
  await withGuardedEcho(async (port, metrics) => {
    const conn = await RawH2.connect(port);
    const probe = conn.openStream('/test.Echo/Echo');
    conn.sendData(probe, grpcMessage(Buffer.alloc(0), OVERSIZE_CUT_FACTOR * 1024));
    await conn.waitClosed();
    assert.equal((await metrics.security.connectionsCut.get()).values.find((v) => v.labels.reason === 'oversized_message')?.value, 1);
  });
});
