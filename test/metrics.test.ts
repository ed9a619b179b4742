/**
 * Prometheus metrics move as traffic flows through a relay, and their labels
 * stay bounded.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayMetrics } from '../src/metrics';
import { makeResource } from './support/origin';
import { LISTENER, CLUSTER, xdstp } from './support/names';
import { metricValue, pollUntil, withAdminRelay, type Sample } from './support/admin';

const T = { timeout: 30_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const LISTENER_LABEL = { type: 'envoy.config.listener.v3.Listener' };

test('subscribing raises the stream and subscription gauges; leaving lowers them', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    let m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_downstream_streams_open'), 0);
    assert.equal(metricValue(m, 'xdstp_relay_downstream_subscriptions', LISTENER_LABEL), 0);

    origin.setResource(LISTENER, L('g/one'), 'one', 'v1');
    origin.setResource(LISTENER, L('g/two'), 'two', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('g/one'), L('g/two')]);
    await c.waitFor(() => c.held(LISTENER).size === 2, 'both listeners');
    m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_downstream_streams_open'), 1);
    assert.equal(metricValue(m, 'xdstp_relay_downstream_streams_total'), 1);
    assert.equal(metricValue(m, 'xdstp_relay_downstream_subscriptions', LISTENER_LABEL), 2);
    assert.equal(metricValue(m, 'xdstp_relay_upstream_subscriptions', { authority: 'a' }), 2);
    assert.equal(metricValue(m, 'xdstp_relay_cache_resources'), 2);
    assert.ok(metricValue(m, 'xdstp_relay_cache_bytes') > 0, 'cache bytes');

    c.unsubscribe(LISTENER, [L('g/two')]);
    await origin.waitFor(() => origin.unsubscribeCount(L('g/two')) === 1, 'upstream unsubscribe');
    m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_downstream_subscriptions', LISTENER_LABEL), 1);
    assert.equal(metricValue(m, 'xdstp_relay_upstream_subscriptions', { authority: 'a' }), 1);

    c.close();
    await origin.waitFor(() => origin.unsubscribeCount(L('g/one')) === 1, 'upstream unsubscribe on disconnect');
    m = await pollUntil(async () => {
      const s = await scrape();
      return metricValue(s, 'xdstp_relay_downstream_streams_open') === 0 ? s : undefined;
    }, 'stream gauge back to 0');
    assert.equal(metricValue(m, 'xdstp_relay_downstream_subscriptions', LISTENER_LABEL), 0);
    assert.equal(metricValue(m, 'xdstp_relay_upstream_subscriptions', { authority: 'a' }), 0);
    assert.equal(metricValue(m, 'xdstp_relay_downstream_streams_total'), 1);
  });
});

test('the dedup ratio is client subscriptions divided by upstream subscriptions', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    assert.equal(metricValue(await scrape(), 'xdstp_relay_dedup_ratio'), 1, 'no subscriptions: 1');
    origin.setResource(LISTENER, L('d/shared'), 'x', 'v1');
    const clients = [client(), client(), client(), client()];
    for (const c of clients) c.subscribe(LISTENER, [L('d/shared')]);
    for (const c of clients) await c.waitForVersion(LISTENER, L('d/shared'), 'v1');
    const m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_downstream_subscriptions', LISTENER_LABEL), 4);
    assert.equal(metricValue(m, 'xdstp_relay_upstream_subscriptions', { authority: 'a' }), 1);
    assert.equal(metricValue(m, 'xdstp_relay_dedup_ratio'), 4);
  });
});

test('an upstream update moves the push counters and the push-latency histogram', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const n = L('u/one');
    origin.setResource(LISTENER, n, 'first', 'v1');
    const a = client();
    const b = client();
    a.subscribe(LISTENER, [n]);
    b.subscribe(LISTENER, [n]);
    await a.waitForVersion(LISTENER, n, 'v1');
    await b.waitForVersion(LISTENER, n, 'v1');
    const before = await scrape();

    origin.setResource(LISTENER, n, 'second, a bit longer', 'v2');
    await a.waitForVersion(LISTENER, n, 'v2');
    await b.waitForVersion(LISTENER, n, 'v2');
    const after = await scrape();

    const delta = (name: string, labels: Record<string, string> = {}): number =>
      metricValue(after, name, labels) - metricValue(before, name, labels);
    assert.equal(delta('xdstp_relay_responses_sent_total', LISTENER_LABEL), 2, 'one response per client');
    assert.equal(delta('xdstp_relay_resources_sent_total', LISTENER_LABEL), 2, 'one resource per client');
    assert.ok(delta('xdstp_relay_sent_bytes_total') > 0, 'bytes sent');
    assert.equal(delta('xdstp_relay_responses_encoded_total'), 1, 'both clients share one encoding');
    assert.equal(delta('xdstp_relay_upstream_responses_total', { authority: 'a' }), 1);
    assert.equal(delta('xdstp_relay_push_latency_seconds_count'), 1, 'one upstream response pushed');
    assert.ok(delta('xdstp_relay_push_latency_seconds_sum') >= 0);
    assert.equal(
      metricValue(after, 'xdstp_relay_push_latency_seconds_bucket', { le: '+Inf' }),
      metricValue(after, 'xdstp_relay_push_latency_seconds_count'),
      'histogram buckets are cumulative',
    );
    assert.ok(delta('xdstp_relay_upstream_requests_total', { authority: 'a', kind: 'ack' }) >= 1, 'the relay ACKed upstream');
  });
});

test('cache hits and misses are counted for new subscriptions', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const n = L('c/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const first = client();
    first.subscribe(LISTENER, [n]);
    await first.waitForVersion(LISTENER, n, 'v1');
    let m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_cache_misses_total'), 1, 'the first subscriber waits for upstream');
    assert.equal(metricValue(m, 'xdstp_relay_cache_hits_total'), 0);
    const second = client();
    second.subscribe(LISTENER, [n]);
    await second.waitForVersion(LISTENER, n, 'v1');
    m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_cache_hits_total', { tier: 'memory' }), 1, 'the second is answered from memory');
    assert.equal(metricValue(m, 'xdstp_relay_cache_misses_total'), 1);
  });
});

test('a NACK is counted under its type', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const n = L('nack/one');
    origin.setResource(LISTENER, n, 'bad', 'v1');
    const c = client({ reject: () => 'listener is invalid' });
    c.subscribe(LISTENER, [n]);
    await c.waitFor(() => c.nacked.length === 1, 'client NACKed');
    const m = await pollUntil(async () => {
      const s = await scrape();
      return metricValue(s, 'xdstp_relay_nacks_total') === 1 ? s : undefined;
    }, 'nack counted');
    assert.equal(metricValue(m, 'xdstp_relay_nacks_total', LISTENER_LABEL), 1);
  });
});

test('resources not forwarded are counted by reason: unsubscribed and foreign authority', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const n = L('drop/wanted');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    origin.injectRaw(LISTENER, [
      makeResource(LISTENER, L('drop/unwanted'), 'y', 'v1'),
      makeResource(LISTENER, xdstp('elsewhere', LISTENER, 'drop/foreign'), 'z', 'v1'),
    ]);
    const m = await pollUntil(async () => {
      const s = await scrape();
      return metricValue(s, 'xdstp_relay_dropped_resources_total') >= 2 ? s : undefined;
    }, 'two dropped resources');
    assert.equal(metricValue(m, 'xdstp_relay_dropped_resources_total', { reason: 'unsubscribed' }), 1);
    assert.equal(metricValue(m, 'xdstp_relay_dropped_resources_total', { reason: 'foreign_authority' }), 1);
  });
});

test('upstream state, connection and reconnects are exported per authority', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const n = L('r/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    let m = await scrape();
    assert.equal(metricValue(m, 'xdstp_relay_upstream_connected', { authority: 'a' }), 1);
    assert.equal(metricValue(m, 'xdstp_relay_upstream_state', { authority: 'a', state: 'ready' }), 1);
    assert.equal(metricValue(m, 'xdstp_relay_upstream_state', { authority: 'a' }), 1, 'exactly one state is current');
    const reconnectsBefore = metricValue(m, 'xdstp_relay_upstream_reconnects_total', { authority: 'a' });

    await origin.stop();
    m = await pollUntil(async () => {
      const s = await scrape();
      return metricValue(s, 'xdstp_relay_upstream_connected', { authority: 'a' }) === 0 ? s : undefined;
    }, 'upstream disconnected');
    assert.equal(metricValue(m, 'xdstp_relay_upstream_state', { authority: 'a', state: 'ready' }), 0);

    await origin.restart();
    m = await pollUntil(async () => {
      const s = await scrape();
      return metricValue(s, 'xdstp_relay_upstream_connected', { authority: 'a' }) === 1 ? s : undefined;
    }, 'upstream reconnected', 20_000);
    assert.ok(metricValue(m, 'xdstp_relay_upstream_reconnects_total', { authority: 'a' }) > reconnectsBefore, 'reconnect counted');
    assert.equal(metricValue(m, 'xdstp_relay_upstream_state', { authority: 'a', state: 'ready' }), 1);
  });
});

test('no metric label carries a client, node or resource name', T, async () => {
  await withAdminRelay({ authorities: ['a', 'b'] }, async ({ origins, client, scrape }) => {
    const names = [L('card/one'), L('card/two'), xdstp('b', CLUSTER, 'card/three')];
    origins.a!.setResource(LISTENER, names[0]!, 'x', 'v1');
    origins.a!.setResource(LISTENER, names[1]!, 'x', 'v1');
    origins.b!.setResource(CLUSTER, names[2]!, 'x', 'v1');
    const c1 = client({ nodeId: 'node-with-a-unique-id-1' });
    const c2 = client({ nodeId: 'node-with-a-unique-id-2', reject: () => 'nope' });
    c1.subscribe(LISTENER, [names[0]!, names[1]!, L('card/missing')]);
    c1.subscribe(CLUSTER, [names[2]!]);
    c2.subscribe(LISTENER, [names[0]!]);
    await c1.waitFor(() => c1.held(LISTENER).size === 2 && c1.held(CLUSTER).size === 1, 'c1 resources');
    await c2.waitFor(() => c2.nacked.length > 0, 'c2 NACKed');
    const samples: Sample[] = await scrape();
    // Every label the relay's own metrics use; each has a small, fixed (or config-bounded) value set.
    const allowed = new Set(['type', 'authority', 'state', 'reason', 'tier', 'kind', 'op', 'le', 'version', 'nodejs', 'protocol', 'status', 'limit']);
    for (const s of samples) {
      for (const [k, v] of Object.entries(s.labels)) {
        assert.ok(!v.includes('xdstp:') && !v.includes('node-with-a-unique-id') && !v.includes('127.0.0.1'), `${s.name}{${k}="${v}"}`);
        if (s.name.startsWith('nodejs_') || s.name.startsWith('process_')) continue;
        assert.ok(allowed.has(k), `unexpected label ${k} on ${s.name}`);
      }
    }
  });
});

test('every relay metric follows the Prometheus naming conventions under the xdstp_relay_ prefix; process and Node metrics keep their standard names', async () => {
  const metrics = new RelayMetrics();
  const all = await metrics.registry.getMetricsAsJSON();
  assert.ok(all.length > 20);
  const families = new Map<string, string>();
  for (const m of all) {
    const type = String(m.type);
    // OpenMetrics names a counter's family without `_total`: no two families may meet there.
    const family = type === 'counter' ? m.name.replace(/_total$/, '') : m.name;
    assert.equal(families.get(family), undefined, `${m.name} and ${families.get(family)} are one family in OpenMetrics`);
    families.set(family, m.name);
    // prom-client's default metrics keep their own standard names (and e.g. a gauge nodejs_active_resources_total).
    if (/^(nodejs|process)_/.test(m.name)) continue;
    assert.match(m.name, /^xdstp_relay_[a-z0-9_]+$/, m.name);
    assert.ok(m.help && m.help.length > 10, `${m.name} has help text`);
    if (type === 'counter') assert.match(m.name, /_total$/, `counter ${m.name} ends in _total`);
    else assert.doesNotMatch(m.name, /_total$/, `${type} ${m.name} does not end in _total`);
    if (type === 'histogram') assert.match(m.name, /_(seconds|bytes)$/, `histogram ${m.name} carries its unit`);
  }
  assert.ok(!all.some((m) => /^xdstp_relay_(process|nodejs)_/.test(m.name)), 'no default metric under the relay prefix');
  const names = new Set(all.map((m) => m.name));
  for (const required of [
    'process_cpu_seconds_total',
    'nodejs_heap_size_total_bytes',
    'xdstp_relay_downstream_streams_open',
    'xdstp_relay_downstream_subscriptions',
    'xdstp_relay_upstream_connected',
    'xdstp_relay_upstream_state',
    'xdstp_relay_upstream_subscriptions',
    'xdstp_relay_upstream_reconnects_total',
    'xdstp_relay_dedup_ratio',
    'xdstp_relay_cache_resources',
    'xdstp_relay_cache_bytes',
    'xdstp_relay_cache_hits_total',
    'xdstp_relay_cache_misses_total',
    'xdstp_relay_redis_errors_total',
    'xdstp_relay_responses_sent_total',
    'xdstp_relay_resources_sent_total',
    'xdstp_relay_sent_bytes_total',
    'xdstp_relay_nacks_total',
    'xdstp_relay_dropped_resources_total',
    'xdstp_relay_push_latency_seconds',
    'xdstp_relay_draining',
    'xdstp_relay_goaways_total',
    'xdstp_relay_clients',
  ]) {
    assert.ok(names.has(required), `${required} is declared`);
  }
});

test('two relays in one process keep separate registries', async () => {
  const a = new RelayMetrics({ defaultMetrics: false });
  const b = new RelayMetrics({ defaultMetrics: false });
  a.nacks.inc({ type: a.typeLabel(LISTENER) });
  const bJson = await b.registry.getSingleMetric('xdstp_relay_nacks_total')!.get();
  assert.equal(bJson.values.reduce((s, v) => s + v.value, 0), 0);
});
