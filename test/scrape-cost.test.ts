/**
 * A scrape costs the same whatever clients hold: GET /metrics must not walk
 * clients' un-ACKed responses or per-name state, or any client could freeze
 * the relay (every client waits for a scrape) just by never ACKing. Measured
 * against a baseline scrape of the same relay while idle, in the same run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withAdminRelay, http, metricValue, parsePrometheus } from './support/admin';
import { LISTENER, xdstp } from './support/names';
import { fetchStatus } from './support/csds';

const T = { timeout: 120_000 };
const STREAMS = 10;
const NAMES = 10_000;
/** The target: one scrape under this many ms at 10 × 10,000 never-ACKed names. */
const TARGET_MS = 50;

/** Median wall-clock ms of `n` GET /metrics (one warm-up first), and the last body. */
async function timeScrapes(adminPort: number, n = 7): Promise<{ ms: number; text: string }> {
  let text = (await http(adminPort, 'GET', '/metrics')).text;
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    text = (await http(adminPort, 'GET', '/metrics')).text;
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(n / 2)]!, text };
}

test('one GET /metrics with 10 never-ACKing delta streams of 10,000 names each costs about what an idle scrape does', T, async (t) => {
  await withAdminRelay({}, async ({ origin, client, adminPort }) => {
    const names = Array.from({ length: NAMES }, (_, i) => xdstp('a', LISTENER, `scrape/${i}`));
    for (const n of names) origin.setResource(LISTENER, n, 'p', 'v1');
    const idle = await timeScrapes(adminPort);

    const clients = Array.from({ length: STREAMS }, () => client({ autoAck: false }));
    for (const c of clients) c.subscribe(LISTENER, names);
    for (const c of clients) await c.waitFor(() => c.held(LISTENER).size === NAMES, `${NAMES} names held`, 60_000);
    const loaded = await timeScrapes(adminPort);

    t.diagnostic(`scrape: idle ${idle.ms.toFixed(1)} ms, ${STREAMS} × ${NAMES} un-ACKed names ${loaded.ms.toFixed(1)} ms`);
    // The figures are still right: every stream is behind on Listeners.
    const m = parsePrometheus(loaded.text);
    assert.equal(metricValue(m, 'xdstp_relay_clients', { type: 'envoy.config.listener.v3.Listener', status: 'stale' }), STREAMS);
    assert.ok(loaded.ms < Math.max(TARGET_MS, idle.ms * 5), `a scrape took ${loaded.ms.toFixed(1)} ms (idle: ${idle.ms.toFixed(1)} ms)`);
  });
});

test('one GET /metrics with 10 never-ACKing streams on a 10,000-member glob costs about what an idle scrape does', T, async (t) => {
  await withAdminRelay({}, async ({ origin, client, adminPort }) => {
    for (let i = 0; i < NAMES; i++) origin.setResource(LISTENER, xdstp('a', LISTENER, `scrape-glob/${i}`), 'p', 'v1');
    const idle = await timeScrapes(adminPort);

    const clients = Array.from({ length: STREAMS }, () => client({ autoAck: false }));
    for (const c of clients) c.subscribe(LISTENER, [xdstp('a', LISTENER, 'scrape-glob/*')]);
    for (const c of clients) await c.waitFor(() => c.held(LISTENER).size === NAMES, `${NAMES} members held`, 60_000);
    const loaded = await timeScrapes(adminPort);

    t.diagnostic(`scrape: idle ${idle.ms.toFixed(1)} ms, ${STREAMS} × ${NAMES} un-ACKed glob members ${loaded.ms.toFixed(1)} ms`);
    const m = parsePrometheus(loaded.text);
    assert.equal(metricValue(m, 'xdstp_relay_clients', { type: 'envoy.config.listener.v3.Listener', status: 'stale' }), STREAMS);
    assert.ok(loaded.ms < Math.max(TARGET_MS, idle.ms * 5), `a scrape took ${loaded.ms.toFixed(1)} ms (idle: ${idle.ms.toFixed(1)} ms)`);
  });
});

test('one GET /metrics with 10 streams that NACKed 10,000 names each costs about what an idle scrape does, and counts them nacked', T, async (t) => {
  await withAdminRelay({}, async ({ origin, client, adminPort }) => {
    const names = Array.from({ length: NAMES }, (_, i) => xdstp('a', LISTENER, `scrape-nack/${i}`));
    for (const n of names) origin.setResource(LISTENER, n, 'p', 'v1');
    const idle = await timeScrapes(adminPort);

    const clients = Array.from({ length: STREAMS }, () => client({ reject: () => 'not today' }));
    for (const c of clients) c.subscribe(LISTENER, names);
    // A large request is answered in several responses: wait for all of them, each NACKed.
    for (const c of clients) await c.waitFor(() => c.received(LISTENER).length === NAMES && c.responses.length === c.nacked.length, 'every response NACKed', 60_000);
    const loaded = await timeScrapes(adminPort);

    t.diagnostic(`scrape: idle ${idle.ms.toFixed(1)} ms, ${STREAMS} × ${NAMES} NACKed names ${loaded.ms.toFixed(1)} ms`);
    const m = parsePrometheus(loaded.text);
    assert.equal(metricValue(m, 'xdstp_relay_clients', { type: 'envoy.config.listener.v3.Listener', status: 'nacked' }), STREAMS);
    assert.ok(loaded.ms < Math.max(TARGET_MS, idle.ms * 5), `a scrape took ${loaded.ms.toFixed(1)} ms (idle: ${idle.ms.toFixed(1)} ms)`);
  });
});

test('CSDS for a client that never ACKed 10,000 names costs about what it does for one that ACKed them', T, async (t) => {
  await withAdminRelay({}, async ({ origin, client, address }) => {
    const names = Array.from({ length: NAMES }, (_, i) => xdstp('a', LISTENER, `csds-cost/${i}`));
    for (const n of names) origin.setResource(LISTENER, n, 'p', 'v1');
    const timed = async (nodeId: string): Promise<number> => {
      const t0 = performance.now();
      const res = await fetchStatus(address, { node_matchers: [{ node_id: { exact: nodeId } }] });
      const ms = performance.now() - t0;
      assert.equal(res.config?.[0]?.generic_xds_configs?.length, NAMES);
      return ms;
    };
    const acking = client({ nodeId: 'csds-acking' });
    acking.subscribe(LISTENER, names);
    await acking.waitFor(() => acking.held(LISTENER).size === NAMES, 'all held', 60_000);
    const lazy = client({ nodeId: 'csds-lazy', autoAck: false });
    lazy.subscribe(LISTENER, names);
    await lazy.waitFor(() => lazy.held(LISTENER).size === NAMES, 'all held', 60_000);
    await timed('csds-acking');
    const acked = Math.min(await timed('csds-acking'), await timed('csds-acking'));
    const unacked = Math.min(await timed('csds-lazy'), await timed('csds-lazy'));
    t.diagnostic(`CSDS of ${NAMES} names: ACKed ${acked.toFixed(1)} ms, un-ACKed ${unacked.toFixed(1)} ms`);
    assert.ok(unacked < Math.max(acked * 3, acked + 50), `un-ACKed ${unacked.toFixed(1)} ms vs ACKed ${acked.toFixed(1)} ms`);
  });
});
