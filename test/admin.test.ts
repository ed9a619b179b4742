/**
 * The admin HTTP server: probes, debug views of a known scenario, drain and
 * run-time log level.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { createLogger } from '../src/log';
import { envoyTypes } from '../src/typed-json/envoy-types';
import { LISTENER, xdstp, keyOf } from './support/names';
import { metricValue, pollUntil, withAdminRelay, type HttpReply } from './support/admin';

const T = { timeout: 30_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const OPAQUE = 'type.googleapis.com/test.relay.Opaque';

type Json = Record<string, unknown>;
const body = (r: HttpReply): Json => r.json as Json;
const list = (v: unknown): Json[] => v as Json[];

function listenerPayload(name: string, port: number): Buffer {
  return envoyTypes().encodeAny({
    '@type': LISTENER,
    name,
    address: { socket_address: { address: '0.0.0.0', port_value: port } },
  }).value;
}

test('/healthz answers while the process is alive; unknown paths are 404', T, async () => {
  await withAdminRelay({}, async ({ get, post }) => {
    const h = await get('/healthz');
    assert.equal(h.status, 200);
    assert.match(h.contentType, /application\/json/);
    assert.deepEqual(h.json, { status: 'ok' });
    assert.equal((await get('/nope')).status, 404);
    assert.equal((await post('/healthz')).status, 405);
    const index = await get('/');
    assert.ok(Object.keys(body(index).endpoints as Json).includes('POST /drain?period=MS&wait=1'));
  });
});

test('/readyz flips with the upstream state when the cache holds nothing', T, async () => {
  await withAdminRelay({}, async ({ origin, get }) => {
    await pollUntil(async () => (await get('/readyz')).status === 200, 'ready once the upstream is connected');
    await origin.stop();
    const down = await pollUntil(async () => {
      const r = await get('/readyz');
      return r.status === 503 ? r : undefined;
    }, '/readyz 503 after the upstream went away');
    assert.equal(body(down).ready, false);
    assert.equal(body(down).upstreamConnected, false);
    assert.equal(body(down).cacheCanServe, false);
    assert.notEqual((body(down).upstreams as Record<string, Json>).a!.state, 'ready');
    await origin.restart();
    const up = await pollUntil(async () => {
      const r = await get('/readyz');
      return r.status === 200 ? r : undefined;
    }, '/readyz 200 after the upstream came back', 20_000);
    assert.equal(body(up).upstreamConnected, true);
  });
});

test('/readyz stays 200 without an upstream while the cache can serve', T, async () => {
  await withAdminRelay({}, async ({ origin, client, get }) => {
    const n = L('ready/cached');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    await origin.stop();
    const r = await pollUntil(async () => {
      const reply = await get('/readyz');
      return body(reply).upstreamConnected === false ? reply : undefined;
    }, 'upstream reported disconnected');
    assert.equal(r.status, 200);
    assert.equal(body(r).cacheCanServe, true);
    assert.equal(body(r).cachedResources, 1);
  });
});

/** Two Envoys, singletons and a glob, a typed payload and an opaque one. */
async function scenario(env: Parameters<Parameters<typeof withAdminRelay>[1]>[0]) {
  const { origin, client } = env;
  const one = L('dbg/one');
  const two = L('dbg/two');
  const glob = L('dbg/*');
  const opaque = xdstp('a', OPAQUE, 'blob');
  origin.setResource(LISTENER, one, listenerPayload('dbg-one', 8001), 'v1');
  origin.setResource(LISTENER, two, listenerPayload('dbg-two', 8002), 'v7');
  origin.setResource(OPAQUE, opaque, Buffer.from([1, 2, 3, 4]), 'o1');
  const envoy1 = client({ nodeId: 'envoy-1' });
  const envoy2 = client({ nodeId: 'envoy-2' });
  envoy1.subscribe(LISTENER, [two, one]);
  envoy1.subscribe(OPAQUE, [opaque]);
  envoy2.subscribe(LISTENER, [one, glob]);
  await envoy1.waitFor(() => envoy1.held(LISTENER).size === 2 && envoy1.held(OPAQUE).size === 1, 'envoy-1 holds 3');
  await envoy2.waitFor(() => envoy2.held(LISTENER).size === 2, 'envoy-2 holds 2');
  // Every response ACKed: the relay has seen the ACKs once the views say so.
  await pollUntil(async () => {
    const clients = list(body(await env.get('/debug/clients')).clients);
    return clients.length === 2 && clients.every((c) => (c.ack as Json).upToDate === true);
  }, 'both clients ACKed everything');
  return { one, two, glob, opaque, envoy1, envoy2 };
}

test('/debug/clients shows each stream with its node id, subscriptions and ack state', T, async () => {
  await withAdminRelay({}, async (env) => {
    const { one, two, glob, opaque } = await scenario(env);
    const all = body(await env.get('/debug/clients'));
    assert.equal(all.streams, 2);
    const clients = list(all.clients);
    assert.deepEqual(clients.map((c) => (c.node as Json).id).sort(), ['envoy-1', 'envoy-2']);
    const e1 = clients.find((c) => (c.node as Json).id === 'envoy-1')!;
    // The client's address and port, as grpc-js's getPeer() writes them.
    assert.match(String(e1.peer), /^127\.0\.0\.1:\d+$/);
    const other = clients.find((c) => (c.node as Json).id === 'envoy-2')!;
    assert.notEqual(other.peer, e1.peer, 'two connections, two client ports');
    assert.equal((e1.ack as Json).nacks, 0);
    assert.ok(String((e1.ack as Json).lastNonce).length > 0);
    const types = list(e1.types);
    assert.deepEqual(types.map((t) => t.typeUrl), [LISTENER, OPAQUE].sort());
    const listeners = types.find((t) => t.typeUrl === LISTENER)!;
    assert.deepEqual(listeners.subscriptions, [one, two].sort());
    assert.equal(listeners.held, 2);
    assert.equal(list(types.find((t) => t.typeUrl === OPAQUE)!.subscriptions).length, 1);
    assert.deepEqual(types.find((t) => t.typeUrl === OPAQUE)!.subscriptions, [opaque]);

    const only2 = body(await env.get('/debug/clients?node=envoy-2&held=1'));
    assert.equal(only2.matched, 1);
    const e2 = list(only2.clients)[0]!;
    const e2Listeners = list(e2.types)[0]!;
    assert.deepEqual(e2Listeners.subscriptions, [glob, one].sort());
    assert.deepEqual(e2Listeners.versions, { [keyOf(one)]: 'v1', [keyOf(two)]: 'v7' });
  });
});

test('/debug/clients counts a name the client was told does not exist apart from what it holds, with no version', T, async () => {
  await withAdminRelay({}, async ({ origin, client, get }) => {
    const gone = L('admin/gone');
    const versions = { [gone]: 'v1', [L('admin/kept')]: 'v2' };
    for (const [name, version] of Object.entries(versions)) origin.setResource(LISTENER, name, 'x', version);
    const c = client({ nodeId: 'told-absent' });
    c.subscribe(LISTENER, Object.keys(versions));
    for (const [name, version] of Object.entries(versions)) await c.waitForVersion(LISTENER, name, version);
    origin.removeResource(LISTENER, gone);
    await c.waitFor(() => !c.held(LISTENER).has(gone), 'the removal');
    const listeners = list(list(body(await get('/debug/clients?node=told-absent&held=1')).clients)[0]!.types)[0]!;
    assert.equal(listeners.held, 1);
    assert.equal(listeners.toldAbsent, 1);
    assert.deepEqual(Object.values(listeners.versions as Json).sort(), ['v2', null].sort());
  });
});

test('/debug/subscriptions shows upstream keys, refcounts and sync state', T, async () => {
  await withAdminRelay({}, async (env) => {
    const { one, two, glob, opaque } = await scenario(env);
    const view = body(await env.get('/debug/subscriptions'));
    assert.equal(view.upstreamSubscriptions, 4);
    assert.equal(view.clientSubscriptions, 5);
    assert.equal(view.dedupRatio, 5 / 4);
    const upstreams = list(view.upstreams);
    assert.equal(upstreams.length, 1);
    assert.equal(upstreams[0]!.state, 'ready');
    assert.equal(upstreams[0]!.subscriptions, 4);
    const byKey = new Map(list(view.subscriptions).map((s) => [s.key as string, s]));
    assert.deepEqual([...byKey.keys()].sort(), [one, two, glob, opaque].map(keyOf).sort());
    assert.deepEqual(
      { refcount: byKey.get(keyOf(one))!.refcount, state: byKey.get(keyOf(one))!.state, version: byKey.get(keyOf(one))!.version },
      { refcount: 2, state: 'synced', version: 'v1' },
    );
    assert.equal(byKey.get(keyOf(two))!.refcount, 1);
    assert.equal(byKey.get(keyOf(two))!.version, 'v7');
    const g = byKey.get(keyOf(glob))!;
    assert.equal(g.kind, 'glob');
    assert.equal(g.members, 2);
    assert.equal(g.state, 'synced');
    assert.equal(byKey.get(keyOf(one))!.authority, 'a');
    assert.equal(byKey.get(keyOf(one))!.releasing, false);

    const filtered = body(await env.get(`/debug/subscriptions?prefix=${encodeURIComponent(keyOf(two))}`));
    assert.deepEqual(list(filtered.subscriptions).map((s) => s.key), [keyOf(two)]);
  });
});

test('/debug/cache lists names and versions and decodes payloads of known types', T, async () => {
  await withAdminRelay({}, async (env) => {
    const { one, two, opaque } = await scenario(env);
    const prefix = 'xdstp://a/envoy.config.listener.v3.Listener/dbg/';
    const view = body(await env.get(`/debug/cache?prefix=${encodeURIComponent(prefix)}`));
    assert.equal(view.resources, 3);
    assert.equal(view.matched, 2);
    const entries = list(view.entries);
    assert.deepEqual(entries.map((e) => [e.name, e.version]), [[keyOf(one), 'v1'], [keyOf(two), 'v7']]);
    assert.deepEqual(entries[0]!.payload, {
      '@type': LISTENER,
      name: 'dbg-one',
      address: { socket_address: { address: '0.0.0.0', port_value: 8001 } },
    });
    assert.equal(entries[0]!.typeUrl, LISTENER);
    assert.ok(Number(entries[0]!.bytes) > 0);

    const blob = list(body(await env.get(`/debug/cache?prefix=${encodeURIComponent(keyOf(opaque))}`)).entries);
    assert.equal(blob.length, 1);
    assert.deepEqual(blob[0]!.payload, { '@type': OPAQUE, bytes: 4, value: Buffer.from([1, 2, 3, 4]).toString('base64') });

    const bare = list(body(await env.get('/debug/cache?payloads=false')).entries);
    assert.equal(bare.length, 3);
    assert.ok(bare.every((e) => !('payload' in e)));
    const limited = body(await env.get('/debug/cache?limit=1&payloads=0'));
    assert.equal(list(limited.entries).length, 1);
    assert.equal(limited.truncated, true);
  });
});

test('GETs never change state', T, async () => {
  await withAdminRelay({}, async (env) => {
    await scenario(env);
    const { origin } = env;
    const project = async (): Promise<unknown> => {
      const clients = list(body(await env.get('/debug/clients?held=1')).clients).map((c) => ({ ...c, ageSeconds: 0 }));
      return { clients, subscriptions: body(await env.get('/debug/subscriptions')), cache: body(await env.get('/debug/cache?payloads=0')) };
    };
    await origin.waitSettled();
    const requestsBefore = origin.requests.length;
    const before = await project();
    for (let i = 0; i < 2; i++) {
      for (const path of ['/', '/healthz', '/readyz', '/metrics', '/debug/clients?held=1', '/debug/subscriptions', '/debug/upstreams', '/debug/cache', '/log-level', '/drain']) {
        const r = await env.get(path);
        assert.ok(r.status < 500, `${path}: ${r.status}`);
      }
    }
    assert.deepEqual(await project(), before);
    assert.equal(origin.requests.length, requestsBefore, 'no upstream traffic');
    assert.equal((await env.get('/readyz')).status, 200, 'GET /drain did not drain');
  });
});

test('POST /drain flips /readyz to 503 and sends clients away gradually with UNAVAILABLE', T, async () => {
  await withAdminRelay({ config: { drainPeriodMs: 1500 } }, async ({ origin, client, get, post, scrape }) => {
    const n = L('drain/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const clients = Array.from({ length: 5 }, () => client());
    for (const c of clients) c.subscribe(LISTENER, [n]);
    for (const c of clients) await c.waitForVersion(LISTENER, n, 'v1');
    assert.equal((await get('/readyz')).status, 200);

    const started = await post('/drain');
    assert.equal(started.status, 202);
    assert.equal(body(started).streams, 5);
    assert.equal(body(started).periodMs, 1500);
    const ready = await get('/readyz');
    assert.equal(ready.status, 503);
    assert.equal(body(ready).draining, true);

    // Gradual: when the first client is sent away, the others are still connected.
    await Promise.race(clients.map((c) => c.ended));
    const stillOpen = clients.filter((c) => c.status === undefined).length;
    assert.ok(stillOpen >= 1, `all ${clients.length} clients were sent away at once`);

    const done = await post('/drain?wait=1');
    assert.equal(done.status, 200);
    assert.equal(body(done).complete, true);
    assert.equal(body(done).streams, 5);
    assert.ok(Number(body(done).batches) >= 2, `batches: ${String(body(done).batches)}`);
    for (const c of clients) {
      const st = await c.waitForEnd();
      assert.equal(st.code, grpc.status.UNAVAILABLE, st.details);
      assert.match(st.details, /draining/);
    }
    const m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_goaways_total', { reason: 'drain' }), 5);
    assert.equal(metricValue(m, 'xdstp_relay_draining'), 1);

    // A client arriving after the drain is sent on at once.
    const late = client();
    late.subscribe(LISTENER, [n]);
    assert.equal((await late.waitForEnd()).code, grpc.status.UNAVAILABLE);
    assert.equal((await get('/readyz')).status, 503, 'stays unready');
    const again = await post('/drain');
    assert.equal(body(again).alreadyDraining, true);
  });
});

test('POST /drain rejects a malformed period', T, async () => {
  await withAdminRelay({}, async ({ post, get }) => {
    assert.equal((await post('/drain?period=soon')).status, 400);
    assert.equal((await get('/readyz')).status, 200);
  });
});

test('POST /log-level changes the level at run time, children included', T, async () => {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (s: string) => void lines.push(s) });
  const child = logger.child({ component: 'made-before' });
  await withAdminRelay({ options: { logger } }, async ({ origin, client, get, post }) => {
    assert.deepEqual((await get('/log-level')).json, { level: 'info' });
    const changed = await post('/log-level?level=debug');
    assert.equal(changed.status, 200);
    assert.deepEqual(changed.json, { level: 'debug', previous: 'info' });
    assert.equal(logger.level, 'debug');
    assert.equal(child.level, 'debug');
    assert.ok(lines.some((l) => l.includes('"msg":"log level changed"')));

    // A debug-level event now shows up: a resource dropped as unsubscribed.
    const n = L('log/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    origin.injectRaw(LISTENER, [{ name: L('log/unwanted'), version: 'v1', resource: { type_url: LISTENER, value: Buffer.from('y') } }]);
    await pollUntil(async () => lines.some((l) => l.includes('upstream resource dropped')), 'debug line');

    assert.equal((await post('/log-level?level=loud')).status, 400);
    assert.equal((await post('/log-level')).status, 400);
    assert.equal(logger.level, 'debug');
    await post('/log-level?level=warn');
    assert.equal(child.level, 'warn');
  });
});
