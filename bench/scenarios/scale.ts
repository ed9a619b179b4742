/**
 * Scenario 8: scale. 50,000 client streams, multiplexed 100 per HTTP/2
 * connection (500 connections): one box's open-file limit stops clients with
 * a connection each near 10k, while gRPC clients behind a proxy or a mesh do
 * share connections. All streams subscribe one glob. Measured against bare
 * grpc-js holding the same streams with the same multiplexing:
 *
 *  - idle memory per stream: RSS growth over the server's RSS with no
 *    clients, once every stream has its first response (the relay's: the
 *    glob's members from its cache; the ceiling's: a pre-encoded response of
 *    as many resources);
 *  - fan-out: one change reaching every stream, rounds interleaved with the
 *    ceiling writing one pre-encoded response to every stream (as row 1).
 *
 * With --profile, the relay and the ceiling run under --cpu-prof and their
 * fan-out rounds are summarized.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { BenchOrigin } from '../origin';
import { logProfile, profileIn } from '../lib/cpuprofile';
import type { BenchContext, ScenarioResult } from '../lib/context';
import { fanGlob, fanMember, type Plan } from '../lib/names';
import { memStatus, sleep } from '../lib/proc';
import { GenPool, metricValue, startCeiling, startRelay, type RelayProc } from '../lib/servers';
import { IDLE_RSS_RATIO, SCALE_CPU_RATIO, SCALE_FANOUT_SPEED, SCRAPE_MS, atLeast, atMost } from '../lib/targets';
import { fmt, fmtRatio, median } from '../lib/stats';
import { ceilingTarget, interleave, relayTarget, summarize } from './fanout';

const PER_CONN = 100;
const MEMBERS = 4;

/** Median of a few RSS readings a little apart. */
async function rssOf(pid: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < 3; i++) {
    xs.push(memStatus(pid).rss);
    await sleep(200);
  }
  return median(xs);
}

/** Median wall time of five GET /metrics, a little apart. */
async function scrapeTime(relay: RelayProc): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = process.hrtime.bigint();
    await relay.metrics();
    xs.push(Number(process.hrtime.bigint() - t0) / 1e6);
    await sleep(200);
  }
  return median(xs);
}

export async function runScale(ctx: BenchContext): Promise<ScenarioResult> {
  const N = ctx.full ? 50_000 : 5_000;
  const rounds = ctx.rounds ?? (ctx.full ? 10 : 6);
  const gens = await GenPool.start(ctx.full ? 4 : 2);
  ctx.defer(() => gens.stop());
  const origin = await BenchOrigin.start({ payloadBytes: ctx.payloadBytes });
  ctx.defer(() => origin.stop());
  const members = Array.from({ length: MEMBERS }, (_, j) => fanMember('S', j));
  origin.put(members, 'v0');
  // Profiles are large and not results: they go to the temp dir.
  const profDir = path.join(os.tmpdir(), `xdstp-bench-prof-${ctx.runId}-scale`);
  const ceilProfDir = path.join(os.tmpdir(), `xdstp-bench-prof-${ctx.runId}-scale-ceiling`);
  const relay = await startRelay({ originPort: origin.port, timeoutMs: 30_000, nodeArgs: ctx.profile ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [] });
  ctx.defer(() => relay.stop());
  const ceil = await startCeiling('grpc', ctx.profile ? ['--cpu-prof', `--cpu-prof-dir=${ceilProfDir}`] : []);
  ctx.defer(() => ceil.stop());
  // The ceiling's first answer to every stream: as many resources as the relay's glob has.
  await ceil.rpc.call({ cmd: 'syncResponse', names: members, payloadBytes: ctx.payloadBytes });
  await sleep(500);
  const relayBase = await rssOf(relay.pid);
  const heapBase = metricValue(await relay.metrics(), 'nodejs_heap_size_used_bytes');
  const ceilBase = await rssOf(ceil.pid);

  const plan: Plan = { kind: 'same', names: [fanGlob('S')], expect: MEMBERS };
  const connect = async (group: string, port: number): Promise<number> => {
    const o = await gens.open(group, port, N, plan, { subscribe: true, streamsPerConn: PER_CONN, concurrency: 64 });
    if (o.failed > 0) throw new Error(`${group}: ${o.failed} of ${N} streams failed (${o.firstError ?? ''})`);
    const s = await gens.waitSynced(group, 300_000);
    if (s.synced < N) throw new Error(`${group}: only ${s.synced}/${N} streams synced (${JSON.stringify(s.endReasons)})`);
    ctx.log(`  ${group}: ${N} streams on ${Math.ceil(N / PER_CONN)} connections open and synced in ${fmt(o.ms / 1000, 1)} s`);
    return o.ms;
  };
  const relayOpenMs = await connect('relay', relay.port);
  const ceilOpenMs = await connect('ceil', ceil.port);
  await sleep(1500);
  const relayRss = await rssOf(relay.pid);
  const ceilRss = await rssOf(ceil.pid);
  const relayHeap = metricValue(await relay.metrics(), 'nodejs_heap_size_used_bytes');
  const scrapeMs = await scrapeTime(relay);
  const relayKB = (relayRss - relayBase) / N / 1024;
  const ceilKB = (ceilRss - ceilBase) / N / 1024;
  ctx.log(`  idle: relay ${fmt(relayKB)} KB RSS per stream, ceiling ${fmt(ceilKB)} KB`);

  const ceilName = fanMember('S', 0);
  const payloadBytes = ctx.payloadBytes;
  const targets = [ceilingTarget(ceil, ceilName, payloadBytes), relayTarget(relay, origin, 'S', MEMBERS)];
  const phase = await interleave(ctx, gens, targets, 2, rounds, 0);
  const r = summarize('relay', phase.records.get('relay')!);
  const c = summarize('ceiling', phase.records.get('ceiling')!);
  if (ctx.profile) {
    // A --cpu-prof profile is written when its process exits.
    await gens.close('relay');
    await gens.close('ceil');
    await Promise.all([relay.stop(), ceil.stop()]);
    await sleep(500);
    const rp = profileIn(profDir, phase.windows.get('relay')!);
    if (rp) logProfile(ctx, 'relay (scale fan-out)', rp);
    const cp = profileIn(ceilProfDir, phase.windows.get('ceiling')!);
    if (cp) logProfile(ctx, 'ceiling (scale fan-out)', cp);
  }
  const streams = N.toLocaleString('en-US');
  return {
    id: '8',
    title: `Scale: ${streams} streams, ${PER_CONN} per connection, one glob`,
    figures:
      `idle: relay ${fmt(relayKB)} KB RSS per stream (heap ${fmt((relayHeap - heapBase) / N / 1024)} KB; relay ${fmt(relayRss / 2 ** 20)} MiB), ` +
      `ceiling ${fmt(ceilKB)} KB; GET /metrics ${fmt(scrapeMs)} ms; all streams synced in ${fmt(relayOpenMs / 1000, 1)} s (ceiling ${fmt(ceilOpenMs / 1000, 1)} s); ` +
      `fan-out: relay p50 ${fmt(r.lastP50Ms)} / p99 ${fmt(r.lastP99Ms)} ms, CPU ${fmt(r.cpuMsPer1k)} ms/1k, ${fmt(r.encodesPerUpdate, 0)} encoding(s)/update; ` +
      `ceiling p50 ${fmt(c.lastP50Ms)} / p99 ${fmt(c.lastP99Ms)} ms, CPU ${fmt(c.cpuMsPer1k)} ms/1k; delivered ${fmt(r.minDelivered * 100, 0)}%; ${rounds} rounds`,
    ratio:
      `idle RSS per stream relay ÷ bare grpc-js ${fmtRatio(relayKB / ceilKB)}; fan-out speed (ceiling time ÷ relay time) ${fmt(c.lastP50Ms / r.lastP50Ms, 2)} p50, ` +
      `${fmt(c.lastP99Ms / r.lastP99Ms, 2)} p99; CPU ${fmtRatio(r.cpuMsPer1k / c.cpuMsPer1k)}`,
    targets: [
      atMost(`idle RSS per stream at ${streams}, of bare grpc-js`, relayKB / ceilKB, IDLE_RSS_RATIO, 2, '×'),
      atLeast('fan-out speed, of the ceiling (p50)', c.lastP50Ms / r.lastP50Ms, SCALE_FANOUT_SPEED),
      atLeast('fan-out speed, of the ceiling (p99)', c.lastP99Ms / r.lastP99Ms, SCALE_FANOUT_SPEED),
      atMost('fan-out CPU, of the ceiling', r.cpuMsPer1k / c.cpuMsPer1k, SCALE_CPU_RATIO, 2, '×'),
      atMost('GET /metrics at 50,000 streams', N >= 50_000 ? scrapeMs : undefined, SCRAPE_MS, 1, ' ms'),
    ],
    data: { scrapeMs, N, perConnection: PER_CONN, members: MEMBERS, idle: { relayBase, relayRss, heapBase, relayHeap, ceilBase, ceilRss, relayKB, ceilKB }, relay: r, ceiling: c },
  };
}
