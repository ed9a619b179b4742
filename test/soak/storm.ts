/**
 * Soak (e): a bad-input storm next to well-behaved clients. 50 good delta
 * clients hold one glob whose members the origin updates round-robin every
 * 50 ms (each member once a second); the delivery latency of every version
 * to every good client is measured, first without the storm (baseline),
 * then while a child process (bad-clients.ts) keeps hundreds of hostile
 * streams going: random bytes, invalid UTF-8, 10,000-name requests, unknown
 * types, NACK floods, foreign authorities, HTTP/2 PING/SETTINGS floods.
 *
 * Then the same storm (same sizes, a fresh bad-clients child) against a bare
 * grpc-js server that forwards the glob the same way (bare-forwarder.ts), in
 * the relay's place on the server core, with 50 fresh good clients: the
 * latency any Node.js server on grpc-js gets under this storm on this machine
 * in this run, so the relay's figure is read against it.
 *
 * Verdicts: the relay survives, no good client's stream ends, every good
 * client ends holding every member's last version (hard checks); p99 of
 * delivery under the storm within the fair share (see fairShareMs) with no
 * version skipped — a target, so it only warns.
 */
import * as path from 'node:path';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { metricValue, startRelay } from '../../bench/lib/servers';
import { LOAD_CORE, SERVER_CORE, cpuSeconds, pinSelf, spawnPinned } from '../../bench/lib/proc';
import { RpcChild } from '../../bench/lib/rpc';
import { DeltaClient } from '../support/delta-client';
import { CLUSTER } from '../support/names';
import { TestOrigin, type RecordedRequest } from '../support/origin';
import type { BadClientsConfig, BadClientsReport } from './bad-clients';
import type { BareForwarderConfig } from './bare-forwarder';
import type { SoakContext } from './context';
import { DeliveryRecorder, gauge, percentile, sleep, waitFor } from './lib';
import { World } from './world';

const FAIR_P99_MS = 50;
/**
 * How far above the bare grpc-js server's p99 (same storm, same run) the
 * relay's may be and still count as its fair share. The relay does work the
 * bare server skips and must keep doing: it answers every request (10,000
 * names refused or resolved, NACKs tracked, foreign names answered as not
 * existing), enforces limits, keeps per-stream state, logs and counts. Its
 * own push path is a few ms at p99, so a tenth over the bare figure is what
 * that work may add; more than that is the relay's to remove. Below
 * FAIR_P99_MS the bound does not bite (the target as first set).
 */
const OVER_BARE = 1.1;

function fairShareMs(bareP99: number): number {
  return Math.max(FAIR_P99_MS, bareP99 * OVER_BARE);
}

interface Phase {
  samples: number[];
  published: Array<{ name: string; version: string }>;
}

/** Good clients on one server, and what they were delivered. */
interface GoodSide {
  clients: DeltaClient[];
  rec: DeliveryRecorder;
}

export async function runStorm(ctx: SoakContext): Promise<void> {
  const GOOD = 50;
  const BAD = ctx.smoke ? 70 : 500;
  const BASE_MS = ctx.smoke ? 3000 : 10_000;
  const STORM_MS = ctx.smoke ? 12_000 : 60_000;
  const origin = await TestOrigin.start({ label: 'storm-origin' });
  ctx.defer(() => origin.stop());
  const world = new World(origin, { prefix: 'storm', stableMembers: 20, ephemeralMembers: 0, singletons: 0, seed: 5 });
  const relay = await startRelay({ originPort: origin.port, timeoutMs: 30_000 });
  ctx.defer(() => relay.stop());

  const synced = (clients: DeltaClient[]): boolean => clients.every((c) => world.deltaMismatch(c, []).length === 0);
  /** GOOD delta clients on `port`, each holding the glob, synced, their deliveries recorded from now on. */
  const openGood = async (port: number, label: string): Promise<GoodSide> => {
    const clients: DeltaClient[] = [];
    for (let i = 0; i < GOOD; i++) {
      const c = new DeltaClient(`127.0.0.1:${port}`, { nodeId: `${label}-${i}` });
      ctx.defer(() => c.close());
      c.subscribe(CLUSTER, [world.glob]);
      clients.push(c);
    }
    await waitFor(() => synced(clients), 20_000, `${label} clients did not sync`);
    const rec = new DeliveryRecorder((v) => world.publishedAt.get(v));
    for (const c of clients) rec.attach(c);
    return { clients, rec };
  };
  const good = await openGood(relay.port, 'good');

  /** Publishes one member update every 50 ms, round-robin, for `ms`. */
  const publish = async (side: GoodSide, ms: number): Promise<Phase> => {
    const from = side.rec.samples.length;
    const published: Phase['published'] = [];
    const t0 = performance.now();
    for (let i = 0; performance.now() - t0 < ms; i++) {
      const name = world.stable[i % world.stable.length]!;
      published.push({ name, version: world.put(name) });
      // Keep the 50 ms cadence however long this loop's own work took.
      const next = t0 + (i + 1) * 50;
      await sleep(Math.max(0, next - performance.now()));
    }
    // What is still in flight arrives within this; later is counted as skipped.
    await sleep(1000);
    return { samples: side.rec.samples.slice(from), published };
  };
  const skipped = (side: GoodSide, p: Phase): number => {
    let n = 0;
    for (const c of side.clients) {
      const got = side.rec.received.get(c)!;
      for (const x of p.published) if (!got.has(x.version)) n++;
    }
    return n;
  };

  // The relay's own cost of the storm as an operator sees it: log lines (it runs at --log-level warn) and scrape time.
  let logLines = 0;
  const countLines = (d: Buffer): void => {
    for (const b of d) if (b === 0x0a) logLines++;
  };
  relay.child.stdout?.on('data', countLines);
  relay.child.stderr?.on('data', countLines);
  const scrapeMs: number[] = [];
  // The relay's event-loop delay over each second (prom-client resets its histogram at every scrape).
  const lagP99Ms: number[] = [];
  const lagMaxMs: number[] = [];
  let scraping = true;
  const scraper = (async () => {
    while (scraping) {
      const t = performance.now();
      const text = await relay.metrics().catch(() => '');
      scrapeMs.push(performance.now() - t);
      if (text !== '') {
        lagP99Ms.push(gauge(text, 'nodejs_eventloop_lag_p99_seconds') * 1000);
        lagMaxMs.push(gauge(text, 'nodejs_eventloop_lag_max_seconds') * 1000);
      }
      await sleep(1000);
    }
  })();

  const base = await publish(good, BASE_MS);
  const baseLines = logLines;
  const baseScrapes = scrapeMs.length;
  const baseLags = lagMaxMs.length;

  // The good clients and the origin (this process) share the load core with the bad clients; the relay keeps its core to itself.
  if (!pinSelf(LOAD_CORE)) ctx.log('warning: could not pin the good clients to the load core');
  const relayBad = startBadClients(ctx, { port: relay.port, durationMs: STORM_MS + 1000, slots: BAD, glob: world.glob });
  await sleep(1000);
  const pushesBefore = await relay.metrics();
  const ownDelay = monitorEventLoopDelay({ resolution: 10 });
  ownDelay.enable();
  const originBefore = origin.requests.length;
  const relayCpuBefore = relay.cpu();
  const storm = await publish(good, STORM_MS);
  const relayCpu = relay.cpu() - relayCpuBefore;
  ownDelay.disable();
  const originDuring = upstreamAsks(origin.requests.slice(originBefore));
  const pushesDuring = pushLatencyBuckets(await relay.metrics(), pushesBefore);
  const stormLines = logLines - baseLines;
  scraping = false;
  await scraper;
  const stormScrapes = scrapeMs.slice(baseScrapes);
  const stormLagP99 = lagP99Ms.slice(baseLags);
  const stormLagMax = lagMaxMs.slice(baseLags);
  const relayBadOutcome = await relayBad;

  const relayAlive = relay.child.exitCode === null && relay.child.signalCode === null;
  const converged = relayAlive && (await waitFor(() => synced(good.clients), 10_000, ''));
  const ended = good.clients.filter((c) => c.status !== undefined);
  ctx.log(`bad clients: ${BAD} at a time, ${describeBad(relayBadOutcome, 'relay')}`);
  const fmt = (side: GoodSide, p: Phase): string =>
    `p50 ${percentile(p.samples, 50).toFixed(1)} ms, p99 ${percentile(p.samples, 99).toFixed(1)} ms, max ${Math.max(...p.samples).toFixed(0)} ms over ${p.samples.length} deliveries; ${skipped(side, p)} of ${p.published.length * GOOD} skipped`;
  ctx.log(`${GOOD} good clients, one update every 50 ms — baseline: ${fmt(good, base)}`);
  ctx.log(`under the storm: ${fmt(good, storm)}`);
  ctx.log(
    `relay log under the storm: ${stormLines} lines at warn and above (${(stormLines / (STORM_MS / 1000)).toFixed(0)}/s; ${baseLines} before it); ` +
      `GET /metrics once a second: p50 ${percentile(stormScrapes, 50).toFixed(1)} ms, max ${Math.max(...stormScrapes).toFixed(1)} ms (${stormScrapes.length} scrapes)`,
  );
  ctx.log(
    `relay push latency under the storm (upstream response received → its client responses written, every round): ` +
      `${pushesDuring.count} rounds, ${pushesDuring.within50msPct.toFixed(1)}% within 50 ms, p99 ≤ ${pushesDuring.p99Bound}`,
  );
  const fmtDelay = (h: IntervalHistogram): string => `p99 ${(h.percentile(99) / 1e6).toFixed(0)} ms, max ${(h.max / 1e6).toFixed(0)} ms`;
  ctx.log(`this process's event-loop delay under the storm (the good clients and the origin): ${fmtDelay(ownDelay)}; the origin was sent ${originDuring}`);
  if (stormLagMax.length > 0) {
    ctx.log(
      `relay event-loop delay per second under the storm: p99 median ${percentile(stormLagP99, 50).toFixed(0)} ms, worst p99 ${Math.max(...stormLagP99).toFixed(0)} ms, ` +
        `worst max ${Math.max(...stormLagMax).toFixed(0)} ms (baseline worst max ${Math.max(...lagMaxMs.slice(0, baseLags)).toFixed(0)} ms)`,
    );
  }
  ctx.check('the relay survived the storm and no good client stream ended', relayAlive && ended.length === 0, `relay ${relayAlive ? 'up' : 'exited'}; ${ended.length} good streams ended${ended[0]?.status ? ` (${ended[0].status.code} ${ended[0].status.details})` : ''}`);
  ctx.check('every good client ends holding every last version (no lost update)', converged, converged ? 'converged' : `${good.clients.filter((c) => world.deltaMismatch(c, []).length > 0).length}/${GOOD} clients differ 10 s after the storm`);

  // The same storm against a bare grpc-js server in the relay's place: the relay and its clients go
  // first, so the server core and the load core carry what they carried in the relay's phase.
  for (const c of good.clients) c.close();
  await relay.stop();
  const bare = await startBareForwarder(ctx, { upstreamPort: origin.port, typeUrl: CLUSTER, glob: world.glob });
  const bareGood = await openGood(bare.port, 'good-bare');
  const bareBad = startBadClients(ctx, { port: bare.port, durationMs: STORM_MS + 1000, slots: BAD, glob: world.glob });
  await sleep(1000);
  const bareDelay = monitorEventLoopDelay({ resolution: 10 });
  bareDelay.enable();
  const bareOriginBefore = origin.requests.length;
  const bareCpuBefore = cpuSeconds(bare.pid);
  const bareStorm = await publish(bareGood, STORM_MS);
  const bareCpu = cpuSeconds(bare.pid) - bareCpuBefore;
  bareDelay.disable();
  const bareOriginDuring = upstreamAsks(origin.requests.slice(bareOriginBefore));
  const bareBadOutcome = await bareBad;
  ctx.log(`bare grpc-js server: bad clients ${describeBad(bareBadOutcome, 'bare server')}`);
  ctx.log(`bare grpc-js server under the storm: ${fmt(bareGood, bareStorm)}; this process's event-loop delay ${fmtDelay(bareDelay)}; the origin was sent ${bareOriginDuring}`);

  const p99 = percentile(storm.samples, 99);
  const bareP99 = percentile(bareStorm.samples, 99);
  const fairMs = fairShareMs(bareP99);
  ctx.log(`under the storm: relay p99 ${p99.toFixed(1)} ms, bare grpc-js p99 ${bareP99.toFixed(1)} ms (same run)`);
  // CPU time on the server core is steadier than a p99 on a shared machine: what the storm costs each server.
  const cpuShare = (s: number): string => `${s.toFixed(1)} s (${((100 * s) / (STORM_MS / 1000)).toFixed(0)}% of its core)`;
  ctx.log(`CPU under the storm: relay ${cpuShare(relayCpu)}, bare grpc-js ${cpuShare(bareCpu)}`);
  ctx.check(
    `fair share: good clients' p99 under the storm ≤ max(${FAIR_P99_MS} ms, ${OVER_BARE} × bare grpc-js p99), no update skipped`,
    p99 <= fairMs && skipped(good, storm) === 0,
    `p99 ${p99.toFixed(1)} ms ≤ ${fairMs.toFixed(1)} ms? (bare grpc-js ${bareP99.toFixed(1)} ms, relay baseline ${percentile(base.samples, 99).toFixed(1)} ms), ${skipped(good, storm)} skipped`,
    { warnOnly: true },
  );
}

/** What a server asked the origin for: requests, and names subscribed and unsubscribed. */
function upstreamAsks(requests: readonly RecordedRequest[]): string {
  let subscribed = 0;
  let unsubscribed = 0;
  for (const r of requests) {
    subscribed += r.subscribe.length;
    unsubscribed += r.unsubscribe.length;
  }
  return `${requests.length} requests (${subscribed} names subscribed, ${unsubscribed} unsubscribed)`;
}

interface BadOutcome {
  report: BadClientsReport | undefined;
  /** Exit code, 'timeout', and the end of its output, when there is no report. */
  failure: string;
}

/**
 * Starts the bad-clients child against `cfg.port`; resolves when it has exited (at most 30 s after its run).
 * On the load core with the good clients and the origin, like the bench's load generators, but at the
 * lowest priority: the bad clients take whatever CPU the good ones leave, so a good client's latency is
 * the server's doing and not the attacker's generator's on the shared core. (In production the
 * attackers are on other machines.)
 */
function startBadClients(ctx: SoakContext, cfg: BadClientsConfig): Promise<BadOutcome> {
  const child = spawnPinned(LOAD_CORE, 'nice', ['-n', '19', process.execPath, path.join(__dirname, 'bad-clients.js'), JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'pipe'] });
  ctx.defer(() => (child.exitCode === null ? child.kill('SIGKILL') : undefined));
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return Promise.race([exited, sleep(cfg.durationMs + 30_000).then(() => 'timeout' as const)]).then((code) => {
    try {
      return { report: JSON.parse(out.trim().split('\n').pop() ?? '') as BadClientsReport, failure: '' };
    } catch {
      return { report: undefined, failure: `no report: exit ${String(code)} ${out.slice(-300)}` };
    }
  });
}

function describeBad(o: BadOutcome, server: string): string {
  const r = o.report;
  if (!r) return o.failure;
  const streams = Object.values(r.streams).reduce((a, b) => a + b, 0);
  return (
    `${streams} streams/connections in all (${Object.entries(r.streams).map(([k, v]) => `${k} ${v}`).join(', ')}); ` +
    `${server} ended them with ${JSON.stringify(r.endings)}`
  );
}

/** The bare grpc-js forwarder (bare-forwarder.ts), pinned to the server core like the relay. */
async function startBareForwarder(ctx: SoakContext, cfg: BareForwarderConfig): Promise<{ port: number; pid: number }> {
  const child = spawnPinned(SERVER_CORE, process.execPath, [path.join(__dirname, 'bare-forwarder.js'), JSON.stringify(cfg)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const rpc = new RpcChild('bare-forwarder', child);
  ctx.defer(() => rpc.stop());
  const hello = (await rpc.hello) as { port: number };
  return { port: hello.port, pid: rpc.pid };
}

/** The push-latency histogram's observations between two scrapes: how many, the share within 50 ms, the bucket holding the p99. */
function pushLatencyBuckets(after: string, before: string): { count: number; within50msPct: number; p99Bound: string } {
  const NAME = 'xdstp_relay_push_latency_seconds_bucket';
  const bounds: Array<{ le: string; n: number }> = [];
  for (const m of after.matchAll(/^xdstp_relay_push_latency_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)) {
    const le = m[1]!;
    bounds.push({ le, n: Number(m[2]) - metricValue(before, NAME, { le }) });
  }
  const count = bounds.find((b) => b.le === '+Inf')?.n ?? 0;
  const within50 = bounds.find((b) => b.le === '0.05')?.n ?? 0;
  const p99 = bounds.find((b) => b.n >= count * 0.99);
  return {
    count,
    within50msPct: count > 0 ? (100 * within50) / count : 100,
    p99Bound: p99 === undefined ? 'n/a' : p99.le === '+Inf' ? 'more than 2.5 s' : `${Number(p99.le) * 1000} ms`,
  };
}
