/**
 * What deploy/prometheus/ ships, checked by the real tools: `promtool check`
 * on the configuration and the rules, `promtool test rules` on the alert unit
 * tests, `promtool check metrics` on a live relay's /metrics, and a real
 * Prometheus (scrape config derived from prometheus.yml) scraping two relay
 * processes and evaluating the alert rules.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import YAML from 'yaml';
import { http } from './support/admin';
import { binariesSkip } from './support/binaries';
import { spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { alertRules, seriesUsedByDeploy } from './support/deploy-files';
import { CLUSTER, xdstp } from './support/names';
import { makeResource, TestOrigin } from './support/origin';
import { freePort } from './support/ports';
import { Prometheus, PROMETHEUS_DIR, promtool, promtoolWithInput } from './support/prometheus';
import { RedisServer, redisSkip } from './support/redis-server';
import { sleep } from './support/wait';

const toolSkip = binariesSkip(['promtool'], 'promtool checks');
const liveSkip = redisSkip('relays scraped by Prometheus') || binariesSkip(['prometheus'], 'relays scraped by Prometheus');
const T = { timeout: 60_000 };

describe('promtool on deploy/prometheus', { skip: toolSkip }, () => {
  test('promtool check config accepts prometheus.yml and the rule file it loads', T, () => {
    const r = promtool('check', 'config', 'prometheus.yml');
    assert.equal(r.code, 0, r.output);
    assert.match(r.output, /SUCCESS: 1 rule files found/);
  });

  test('promtool check rules accepts alerts.yaml', T, () => {
    const r = promtool('check', 'rules', 'alerts.yaml');
    assert.equal(r.code, 0, r.output);
    assert.match(r.output, new RegExp(`SUCCESS: ${alertRules().length} rules found`));
  });

  test('promtool test rules: every alert fires when it should and stays quiet when it should not', T, () => {
    const suite = YAML.parse(fs.readFileSync(path.join(PROMETHEUS_DIR, 'alerts.test.yaml'), 'utf8')) as {
      rule_files: string[];
      tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
    };
    assert.deepEqual(suite.rule_files, ['alerts.yaml']);
    const cases = suite.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const { alert } of alertRules()) {
      const mine = cases.filter((c) => c.alertname === alert);
      assert.ok(mine.some((c) => (c.exp_alerts ?? []).length > 0), `${alert} has a case where it fires`);
      assert.ok(mine.some((c) => (c.exp_alerts ?? []).length === 0), `${alert} has a case where it stays quiet`);
    }
    const r = promtool('test', 'rules', 'alerts.test.yaml');
    assert.equal(r.code, 0, r.output);
    assert.match(r.output, /SUCCESS/);
  });
});

test('every alert has a runbook section in docs/alerts.md', () => {
  const doc = fs.readFileSync(path.join(PROMETHEUS_DIR, '..', '..', 'docs', 'alerts.md'), 'utf8');
  const headings = new Set([...doc.matchAll(/^## (\S+)\s*$/gm)].map((m) => m[1]));
  for (const { alert } of alertRules()) assert.ok(headings.has(alert), `docs/alerts.md has a "## ${alert}" section`);
  assert.deepEqual([...headings].filter((h) => !alertRules().some((r) => r.alert === h)), [], 'no section for an alert that does not exist');
});

/** prom-client's default gauges named like counters: its library's naming, left as they are. */
const PROM_CLIENT_LINT = /^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/;

describe('promtool check metrics on a live relay', { skip: toolSkip }, () => {
  test('promtool reports nothing about the relay\'s families; no two families share an OpenMetrics name; process and Node metrics are unprefixed; known counters start at 0', T, async () => {
    const origin = await TestOrigin.start({ label: 'lint-origin' });
    const S = xdstp('a', CLUSTER, 'lint');
    origin.setResource(CLUSTER, S, 'v1 body', 'v1');
    const relay = await spawnCli(['--listen', '127.0.0.1:0', '--authority', `a=${origin.uri}`, '--node-id', 'lint-relay'], {}, 20_000);
    const c = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: 'lint-client', reject: (resp) => ((resp.resources ?? []).some((r) => r.version === 'v2') ? 'lint: v2 rejected' : undefined) });
    try {
      c.subscribe(CLUSTER, [S, xdstp('nowhere', CLUSTER, 'x')]);
      await c.waitForVersion(CLUSTER, S, 'v1');
      origin.setResource(CLUSTER, S, 'v2 body', 'v2');
      await c.waitFor(() => c.nacked.length > 0, 'the client NACKed v2');
      const text = (await http(relay.adminPort!, 'GET', '/metrics')).text;

      const r = promtoolWithInput(text, 'check', 'metrics');
      const complaints = r.output.split('\n').filter((l) => l.trim() !== '' && !PROM_CLIENT_LINT.test(l.trim()));
      assert.deepEqual(complaints, [], `promtool check metrics:\n${r.output}`);

      // OpenMetrics drops a counter's `_total` from its family name: no two families may meet there.
      const families = new Map<string, string>();
      for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
        const family = type === 'counter' ? name!.replace(/_total$/, '') : name!;
        assert.equal(families.get(family), undefined, `${name} and ${families.get(family)} share the OpenMetrics family ${family}`);
        families.set(family, name!);
      }
      assert.ok(families.has('xdstp_relay_downstream_streams_open') && families.has('xdstp_relay_downstream_streams'), 'the open-streams gauge and the accepted-streams counter');
      for (const m of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_total_bytes', 'nodejs_eventloop_lag_p99_seconds']) {
        assert.match(text, new RegExp(`^${m} `, 'm'), `${m} under its standard name`);
      }
      assert.doesNotMatch(text, /^xdstp_relay_(process|nodejs)_/m, 'no default metric under the relay prefix');
      // Counters with known label values are there at 0 before anything happened to them.
      for (const series of [
        'xdstp_relay_upstream_nacks_total{authority="a",reason="undecodable"} 0',
        'xdstp_relay_upstream_rejected_names_total{authority="a"} 0',
        'xdstp_relay_goaways_total{reason="drain"} 0',
        'xdstp_relay_limit_exceeded_total{limit="subscription_rate"} 0',
        'xdstp_relay_dropped_resources_total{reason="foreign_authority"} 0',
        'xdstp_relay_rejected_subscriptions_total{reason="malformed"} 0',
      ]) {
        assert.ok(text.split('\n').includes(series), `${series} in\n${text}`);
      }
      // …and the ones that moved show it.
      assert.match(text, /^xdstp_relay_rejected_subscriptions_total\{reason="unknown_authority"\} 1$/m);
      assert.match(text, /^xdstp_relay_clients\{type="envoy.config.cluster.v3.Cluster",status="nacked"\} 1$/m);
    } finally {
      c.close();
      await relay.stop();
      await origin.stop();
    }
  });
});

/** deploy/prometheus/prometheus.yml pointed at loopback relays, scraping every second. */
function scrapeConfig(relayTargets: string[]): string {
  const cfg = YAML.parse(fs.readFileSync(path.join(PROMETHEUS_DIR, 'prometheus.yml'), 'utf8')) as {
    global: Record<string, string>;
    rule_files: string[];
    scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[]; labels?: Record<string, string> }> }>;
  };
  cfg.global.scrape_interval = '1s';
  cfg.global.evaluation_interval = '1s';
  cfg.rule_files = cfg.rule_files.map((f) => path.resolve(PROMETHEUS_DIR, f));
  const job = cfg.scrape_configs.find((j) => j.job_name === 'xdstp-relay');
  assert.ok(job, 'prometheus.yml has the xdstp-relay job');
  const relays = job.static_configs.find((s) => s.labels?.role === 'relay');
  assert.ok(relays, 'prometheus.yml has the relay targets');
  // Same job, labels and path; the targets are ours (no example origin here).
  job.static_configs = [{ ...relays, targets: relayTargets }];
  return YAML.stringify(cfg);
}

describe('two relays scraped by a real Prometheus', { skip: liveSkip }, () => {
  let redis: RedisServer;
  let origin: TestOrigin;
  let prometheus: Prometheus;
  let tokenDir: string | undefined;
  const relays: SpawnedCli[] = [];
  const clients: DeltaClient[] = [];
  const G = xdstp('a', CLUSTER, 'prom/*');
  const S = xdstp('a', CLUSTER, 'prom-single');

  before(async () => {
    redis = await RedisServer.start();
    origin = await TestOrigin.start({ label: 'prom-origin' });
    for (let i = 0; i < 5; i++) origin.setResource(CLUSTER, xdstp('a', CLUSTER, `prom/m${i}`), `m${i}`, 'v1');
    origin.setResource(CLUSTER, S, 'single', 'v1');
    // relay-2's Redis is a closed port: its errors are what XdstpRelayRedisErrors watches.
    const redisOf = [redis.url, `redis://127.0.0.1:${await freePort()}`];
    // relay-1 watches an admin token file: its reload counters are what XdstpRelayReloadFailed watches.
    tokenDir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-prom-token-'));
    fs.writeFileSync(path.join(tokenDir, 'token'), 'prom-test-token\n');
    const extra = [['--admin-token', path.join(tokenDir, 'token')], []];
    for (let i = 0; i < 2; i++) {
      relays.push(
        await spawnCli(
          ['--listen', '127.0.0.1:0', '--admin', `127.0.0.1:${await freePort()}`, '--authority', `a=${origin.uri}`, '--redis', redisOf[i]!,
            '--redis-warm-timeout', '500', '--node-id', `relay-${i + 1}`, '--log-level', 'info', ...extra[i]!],
          {},
          20_000,
        ),
      );
    }
    prometheus = await Prometheus.start(scrapeConfig(relays.map((r) => `127.0.0.1:${r.adminPort}`)));
  });

  after(async () => {
    for (const c of clients) c.close();
    await prometheus?.stop();
    await Promise.all(relays.map((r) => r.stop()));
    await origin?.stop();
    await redis?.dispose();
    if (tokenDir) fs.rmSync(tokenDir, { recursive: true, force: true });
  });

  function client(relay: SpawnedCli, opts: ConstructorParameters<typeof DeltaClient>[1] = {}): DeltaClient {
    const c = new DeltaClient(`127.0.0.1:${relay.port}`, opts);
    clients.push(c);
    return c;
  }

  /** Traffic that makes every series of the dashboard and the alerts appear, on both relays. */
  async function exercise(): Promise<void> {
    for (const relay of relays) {
      const a = client(relay, { nodeId: 'prom-a' });
      a.subscribe(CLUSTER, [G, S]);
      await a.waitFor(() => a.held(CLUSTER).size === 6, 'synced');
      // A second subscriber of the same names: a cache hit.
      const b = client(relay, { nodeId: 'prom-b', reject: (resp) => ((resp.resources ?? []).some((r) => r.version === 'v2') ? 'rejected v2' : undefined) });
      b.subscribe(CLUSTER, [S]);
      await b.waitFor(() => b.held(CLUSTER).size === 1, 'cache hit');
      // A name no upstream serves: a rejected subscription.
      a.subscribe(CLUSTER, [xdstp('nowhere', CLUSTER, 'x')]);
      // A request without a type: a bad request (ends that stream).
      const bad = client(relay, { nodeId: 'prom-bad' });
      bad.send({ resource_names_subscribe: [S] });
      await bad.waitForEnd();
    }
    // An update the second clients NACK; a resource nobody asked for (dropped).
    origin.setResource(CLUSTER, S, 'single v2', 'v2');
    origin.injectRaw(CLUSTER, [makeResource(CLUSTER, xdstp('a', CLUSTER, 'unasked'), 'x', 'v1')]);
    for (const c of clients.filter((x) => x.status === undefined && x.sent[0]?.node?.id === 'prom-a')) await c.waitForVersion(CLUSTER, S, 'v2');
    for (const c of clients.filter((x) => x.sent[0]?.node?.id === 'prom-b')) await c.waitFor(() => c.nacked.length > 0, 'a NACK');
    // The control plane restarts: upstream reconnects.
    await origin.restart();
    for (const relay of relays) {
      const deadline = Date.now() + 15_000;
      while (!((await http(relay.adminPort!, 'GET', '/readyz')).json as { upstreamConnected?: boolean }).upstreamConnected) {
        assert.ok(Date.now() < deadline, 'upstream reconnected');
        await sleep(50);
      }
    }
    // relay-2 is drained (streams sent away: goaways; draining = 1). It is still scraped.
    const drained = await http(relays[1]!.adminPort!, 'POST', '/drain?period=0&wait=1');
    assert.equal(drained.status, 200, drained.text);
  }

  test('up is 1 for both relays, every relay series of the dashboard and the alert rules has data, and the rules evaluate', T, async () => {
    await exercise();
    const wanted = seriesUsedByDeploy();
    assert.ok(wanted.length > 25, `${wanted.length} series`);
    let missing: string[] = wanted;
    let up: Record<string, string> = {};
    const deadline = Date.now() + 20_000;
    for (;;) {
      up = Object.fromEntries((await prometheus.query('up{job="xdstp-relay"}')).map((s) => [s.metric.instance!, s.value[1]]));
      const have = await Promise.all(wanted.map(async (m) => (await prometheus.query(`${m}{job="xdstp-relay"}`)).length > 0));
      missing = wanted.filter((_, i) => !have[i]);
      const goaways = await prometheus.query('xdstp_relay_goaways_total{job="xdstp-relay"}');
      if (missing.length === 0 && Object.values(up).filter((v) => v === '1').length === 2 && goaways.length > 0) break;
      if (Date.now() > deadline) break;
      await sleep(500);
    }
    assert.deepEqual(up, Object.fromEntries(relays.map((r) => [`127.0.0.1:${r.adminPort}`, '1'])), 'up == 1 for both');
    assert.deepEqual(missing, [], 'series without data in Prometheus');
    // The series carry the labels the rules group by.
    const connected = await prometheus.query('xdstp_relay_upstream_connected{job="xdstp-relay"}');
    assert.deepEqual(new Set(connected.map((s) => s.metric.instance)), new Set(Object.keys(up)));
    assert.ok(connected.every((s) => s.metric.authority === 'a' && s.metric.role === 'relay'));
    const redisErrors = await prometheus.query('sum by (instance) (xdstp_relay_redis_errors_total{job="xdstp-relay"}) > 0');
    assert.deepEqual(redisErrors.map((s) => s.metric.instance), [`127.0.0.1:${relays[1]!.adminPort}`], 'only relay-2 fails to reach its Redis');
    assert.equal((await prometheus.query('xdstp_relay_draining{job="xdstp-relay"} == 1')).length, 1, 'relay-2 reports draining');

    // Prometheus loaded every alert rule and evaluates it without error.
    const groups = await prometheus.rules();
    const rules = groups.flatMap((g) => g.rules).filter((r) => r.type === 'alerting');
    assert.deepEqual(rules.map((r) => r.name).sort(), alertRules().map((r) => r.alert).sort());
    for (const r of rules) assert.equal(r.health, 'ok', `${r.name}: ${r.lastError ?? ''}`);
  });
});
