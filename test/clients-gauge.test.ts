/**
 * xdstp_relay_clients (per type: client streams by their worst status) is
 * computed at scrape time without walking what clients subscribe; CSDS lists
 * every name with its status. The two must tell the same story: for each
 * client stream and type, the worst of CSDS's statuses is the status the
 * gauge counts it under. Checked over real gRPC in the states where a cheap
 * shortcut would go wrong: names un-ACKed, NACKed, unsubscribed or deleted
 * while un-ACKed, refused, and a slow reader.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withAdminRelay, metricValue, pollUntil, type AdminRelayEnv, type Sample } from './support/admin';
import { fetchStatus } from './support/csds';
import { LISTENER, CLUSTER, xdstp } from './support/names';
import { SotwClient } from './support/sotw-client';
import type { ClientStatusResponse } from '../src/proto/csds-messages';

const T = { timeout: 30_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const STATUSES = ['synced', 'stale', 'nacked'] as const;
const TYPES = [LISTENER, CLUSTER];
const label = (typeUrl: string): string => typeUrl.replace(/^type\.googleapis\.com\//, '');

/** "type status" → client streams, from CSDS: each stream's worst status per type. */
function fromCsds(res: ClientStatusResponse): Map<string, number> {
  const out = new Map<string, number>();
  for (const c of res.config ?? []) {
    if (!(c.client_scope ?? '').startsWith('stream/')) continue;
    const worst = new Map<string, number>();
    for (const g of c.generic_xds_configs ?? []) {
      const rank = g.config_status === 'ERROR' || g.client_status === 'NACKED' ? 2 : g.config_status === 'STALE' ? 1 : 0;
      worst.set(g.type_url ?? '', Math.max(worst.get(g.type_url ?? '') ?? 0, rank));
    }
    for (const [typeUrl, rank] of worst) {
      const k = `${label(typeUrl)} ${STATUSES[rank]}`;
      out.set(k, (out.get(k) ?? 0) + 1);
    }
  }
  return out;
}

function fromGauge(samples: readonly Sample[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of TYPES) {
    for (const s of STATUSES) {
      const v = metricValue(samples, 'xdstp_relay_clients', { type: label(t), status: s });
      if (v > 0) out.set(`${label(t)} ${s}`, v);
    }
  }
  return out;
}

const show = (m: Map<string, number>): string => JSON.stringify([...m].sort());

/** Waits until the gauge and CSDS agree (ACKs travel asynchronously) and returns what they say; fails if they never do. */
async function agreed(env: AdminRelayEnv): Promise<Map<string, number>> {
  let last = '';
  return pollUntil(
    async () => {
      const csds = fromCsds(await fetchStatus(env.address));
      const gauge = fromGauge(await env.scrape());
      last = `CSDS ${show(csds)} gauge ${show(gauge)}`;
      return show(csds) === show(gauge) ? gauge : undefined;
    },
    'the clients gauge to agree with CSDS',
    5000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${last}`);
  });
}

test('a client that never ACKs is stale, next to synced ones, in the gauge as in CSDS', T, async () => {
  await withAdminRelay({}, async (env) => {
    for (let i = 0; i < 50; i++) env.origin.setResource(LISTENER, L(`g1/${i}`), 'p', 'v1');
    const names = Array.from({ length: 50 }, (_, i) => L(`g1/${i}`));
    const good = env.client();
    const lazy = env.client({ autoAck: false });
    good.subscribe(LISTENER, names);
    lazy.subscribe(LISTENER, names);
    await good.waitFor(() => good.held(LISTENER).size === 50, 'all held');
    await lazy.waitFor(() => lazy.held(LISTENER).size === 50, 'all held');
    const m = await agreed(env);
    assert.equal(m.get('envoy.config.listener.v3.Listener stale'), 1);
    assert.equal(m.get('envoy.config.listener.v3.Listener synced'), 1);
  });
});

test('names unsubscribed while un-ACKed no longer make the client stale, in the gauge as in CSDS', T, async () => {
  await withAdminRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('g2/kept'), 'p', 'v1');
    for (let i = 0; i < 20; i++) env.origin.setResource(LISTENER, L(`g2/gone/${i}`), 'p', 'v1');
    const c = env.client({ autoAck: false });
    c.subscribe(LISTENER, [L('g2/kept')]);
    await c.waitForVersion(LISTENER, L('g2/kept'), 'v1');
    c.ack(LISTENER, c.responses.at(-1)!.nonce!);
    const gone = Array.from({ length: 20 }, (_, i) => L(`g2/gone/${i}`));
    c.subscribe(LISTENER, gone);
    await c.waitFor(() => c.held(LISTENER).size === 21, 'all held');
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener stale'), 1, 'un-ACKed: stale');
    // Still never ACKed; but the client no longer asks for any of them.
    c.unsubscribe(LISTENER, gone);
    const m = await pollUntil(async () => {
      const a = await agreed(env);
      return a.get('envoy.config.listener.v3.Listener synced') === 1 && a;
    }, 'synced once they are unsubscribed');
    assert.equal(m.get('envoy.config.listener.v3.Listener stale'), undefined);
  });
});

test('glob members deleted while their removal is un-ACKed leave the client synced, in the gauge as in CSDS', T, async () => {
  await withAdminRelay({}, async (env) => {
    for (let i = 0; i < 10; i++) env.origin.setResource(LISTENER, L(`g3/${i}`), 'p', 'v1');
    const c = env.client({ autoAck: false });
    c.subscribe(LISTENER, [L('g3/*')]);
    await c.waitFor(() => c.held(LISTENER).size === 10, 'members held');
    c.ack(LISTENER, c.responses.at(-1)!.nonce!);
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener synced'), 1);
    // The removals stay un-ACKed, but the names they carry are no longer members.
    for (let i = 0; i < 9; i++) env.origin.removeResource(LISTENER, L(`g3/${i}`));
    await c.waitFor(() => c.held(LISTENER).size === 1, 'removals received');
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener synced'), 1);
    // A change to the remaining member, un-ACKed: stale.
    env.origin.setResource(LISTENER, L('g3/9'), 'p2', 'v2');
    await c.waitForVersion(LISTENER, L('g3/9'), 'v2');
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener stale'), 1);
  });
});

test('a NACKed name makes the client nacked until it is unsubscribed, in the gauge as in CSDS', T, async () => {
  await withAdminRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('g4/ok'), 'p', 'v1');
    env.origin.setResource(LISTENER, L('g4/bad'), 'p', 'v1');
    const c = env.client({ reject: (r) => (r.resources?.some((x) => x.name === L('g4/bad')) ? 'bad listener' : undefined) });
    c.subscribe(LISTENER, [L('g4/ok')]);
    await c.waitForVersion(LISTENER, L('g4/ok'), 'v1');
    c.subscribe(LISTENER, [L('g4/bad')]);
    await c.waitFor(() => c.nacked.length === 1, 'the NACK');
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener nacked'), 1);
    c.unsubscribe(LISTENER, [L('g4/bad')]);
    await pollUntil(async () => (await agreed(env)).get('envoy.config.listener.v3.Listener synced') === 1, 'synced once the NACKed name is unsubscribed');
  });
});

test('refused names only, and a second type: the gauge and CSDS agree', T, async () => {
  await withAdminRelay({}, async (env) => {
    env.origin.setResource(CLUSTER, xdstp('a', CLUSTER, 'g5/c'), 'p', 'v1');
    const c = env.client();
    c.subscribe(LISTENER, [xdstp('nowhere', LISTENER, 'g5/x'), 'not-xdstp']);
    c.subscribe(CLUSTER, [xdstp('a', CLUSTER, 'g5/c')]);
    await c.waitForVersion(CLUSTER, xdstp('a', CLUSTER, 'g5/c'), 'v1');
    const m = await agreed(env);
    assert.equal(m.get('envoy.config.listener.v3.Listener synced'), 1);
    assert.equal(m.get('envoy.config.cluster.v3.Cluster synced'), 1);
  });
});

test('a client that stopped reading while updates pile up is stale, in the gauge as in CSDS', T, async () => {
  await withAdminRelay({}, async (env) => {
    const big = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 20; i++) env.origin.setResource(LISTENER, L(`g6/${i}`), big, 'v1');
    const slow = env.client();
    slow.subscribe(LISTENER, [L('g6/*')]);
    await slow.waitFor(() => slow.held(LISTENER).size === 20, 'members held');
    await agreed(env);
    slow.pause();
    for (let round = 2; round < 8; round++) for (let i = 0; i < 20; i++) env.origin.setResource(LISTENER, L(`g6/${i}`), big + round, `v${round}`);
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener stale'), 1);
    slow.resume();
    await slow.waitForVersion(LISTENER, L('g6/19'), 'v7', 10_000);
    assert.equal((await agreed(env)).get('envoy.config.listener.v3.Listener synced'), 1);
  });
});

test('state-of-the-world clients: the gauge and CSDS agree, ACKing or not', T, async () => {
  await withAdminRelay({}, async (env) => {
    for (let i = 0; i < 5; i++) env.origin.setResource(LISTENER, L(`g7/${i}`), 'p', 'v1');
    const names = Array.from({ length: 5 }, (_, i) => L(`g7/${i}`));
    const acking = new SotwClient(env.address, { nodeId: 'sotw-acking' });
    const silent = new SotwClient(env.address, { nodeId: 'sotw-silent', autoAck: false });
    try {
      acking.request(LISTENER, names);
      silent.request(LISTENER, names);
      await acking.waitFor(() => acking.of(LISTENER).length > 0, 'a response');
      await silent.waitFor(() => silent.of(LISTENER).length > 0, 'a response');
      const m = await agreed(env);
      assert.equal(m.get('envoy.config.listener.v3.Listener stale'), 1);
      assert.equal(m.get('envoy.config.listener.v3.Listener synced'), 1);
    } finally {
      acking.close();
      silent.close();
    }
  });
});

test('the gauge follows a client from stale to synced when it ACKs late, and drops it when its stream closes', T, async () => {
  await withAdminRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('g8/a'), 'p', 'v1');
    const keeper = env.client();
    keeper.subscribe(LISTENER, [L('g8/a')]);
    await keeper.waitForVersion(LISTENER, L('g8/a'), 'v1');
    const late = env.client({ autoAck: false });
    late.subscribe(LISTENER, [L('g8/a')]);
    await late.waitForVersion(LISTENER, L('g8/a'), 'v1');
    const stale = await agreed(env);
    assert.equal(stale.get('envoy.config.listener.v3.Listener stale'), 1);
    late.ack(LISTENER, late.responses.at(-1)!.nonce!);
    await pollUntil(async () => (await agreed(env)).get('envoy.config.listener.v3.Listener synced') === 2 || undefined, 'both synced', 5000);
    late.close();
    await pollUntil(async () => {
      const m = fromGauge(await env.scrape());
      return m.get('envoy.config.listener.v3.Listener synced') === 1 && !m.has('envoy.config.listener.v3.Listener stale') ? true : undefined;
    }, 'the closed stream gone from the gauge', 5000);
  });
});
