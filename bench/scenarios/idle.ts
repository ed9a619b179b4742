/**
 * Scenario 4: idle memory per connected client (one stream each, 10
 * subscriptions answered from the cache), relay state included. The baseline
 * is a bare grpc-js server holding the same streams after writing each one a
 * 10-resource response: the runtime's own cost per connection.
 */
import { BenchOrigin } from '../origin';
import type { BenchContext, ScenarioResult } from '../lib/context';
import { IDLE_RSS_RATIO, SCRAPE_MS, atMost } from '../lib/targets';
import { poolName, type Plan } from '../lib/names';
import { memStatus, sleep } from '../lib/proc';
import { GenPool, metricValue, startCeiling, startRelay, type RelayProc } from '../lib/servers';
import { fmt, fmtRatio, median } from '../lib/stats';

const POOL = 1000;
const SUBS = 10;

interface Level {
  clients: number;
  relayRss: number;
  relayHeap: number;
  ceilingRss: number;
  /** (RSS − RSS with no clients) / clients. */
  relayRssPerClientKB: number;
  relayHeapPerClientKB: number;
  ceilingRssPerClientKB: number;
  /** Slope from the previous level: what each added client cost. */
  relayMarginalKB: number;
  ceilingMarginalKB: number;
  /** Wall time of one GET /metrics (it runs on the relay's event loop). */
  metricsScrapeMs: number;
}

async function sampleRelay(relay: RelayProc, n = 4): Promise<{ rss: number; heap: number; scrapeMs: number }> {
  const rss: number[] = [];
  const heap: number[] = [];
  const scrape: number[] = [];
  for (let i = 0; i < n; i++) {
    rss.push(relay.mem().rss);
    const t0 = process.hrtime.bigint();
    const text = await relay.metrics();
    scrape.push(Number(process.hrtime.bigint() - t0) / 1e6);
    heap.push(metricValue(text, 'nodejs_heap_size_used_bytes'));
    await sleep(200);
  }
  return { rss: median(rss), heap: median(heap), scrapeMs: median(scrape) };
}

export async function runIdle(ctx: BenchContext): Promise<ScenarioResult> {
  const levels = ctx.full ? [1_000, 5_000, 10_000] : [1_000, 5_000];
  const gens = await GenPool.start(ctx.full ? 4 : 2);
  ctx.defer(() => gens.stop());
  const origin = await BenchOrigin.start({ payloadBytes: ctx.payloadBytes });
  ctx.defer(() => origin.stop());
  origin.put(Array.from({ length: POOL }, (_, i) => poolName(i)), 'v1');
  const relay = await startRelay({ originPort: origin.port });
  ctx.defer(() => relay.stop());
  const ceil = await startCeiling('grpc');
  ctx.defer(() => ceil.stop());
  await ceil.rpc.call({ cmd: 'syncResponse', names: Array.from({ length: SUBS }, (_, i) => poolName(i)), payloadBytes: ctx.payloadBytes });

  await gens.open('warm', relay.port, 1, { kind: 'pool', size: POOL, perClient: POOL, extra: [], extraResources: 0 });
  if ((await gens.waitSynced('warm', 30_000)).synced !== 1) throw new Error('warm-up client did not sync');
  await sleep(1000);
  const base = await sampleRelay(relay);
  const ceilBase = median([0, 1, 2].map(() => memStatus(ceil.pid).rss));
  ctx.log(`  baseline: relay RSS ${fmt(base.rss / 2 ** 20)} MiB, heap ${fmt(base.heap / 2 ** 20)} MiB; ceiling RSS ${fmt(ceilBase / 2 ** 20)} MiB`);

  const plan: Plan = { kind: 'pool', size: POOL, perClient: SUBS, extra: [], extraResources: 0 };
  const out: Level[] = [];
  let have = 0;
  let prev = { rss: base.rss, ceil: ceilBase };
  for (const level of levels) {
    const add = level - have;
    const o1 = await gens.open(`relay-${level}`, relay.port, add, plan, { concurrency: 256 }, have);
    const s1 = await gens.waitSynced(`relay-${level}`, 120_000);
    const o2 = await gens.open(`ceil-${level}`, ceil.port, add, plan, { concurrency: 256 }, have);
    const s2 = await gens.waitSynced(`ceil-${level}`, 120_000);
    if (o1.failed + o2.failed > 0 || s1.synced < add || s2.synced < add) {
      throw new Error(`level ${level}: relay ${s1.synced}/${add} synced, ceiling ${s2.synced}/${add} (failed ${o1.failed}/${o2.failed})`);
    }
    const before = have;
    have = level;
    await sleep(1500);
    const m = await sampleRelay(relay);
    const c = median([0, 1, 2].map(() => memStatus(ceil.pid).rss));
    const lv: Level = {
      clients: level,
      relayRss: m.rss,
      relayHeap: m.heap,
      ceilingRss: c,
      relayRssPerClientKB: (m.rss - base.rss) / level / 1024,
      relayHeapPerClientKB: (m.heap - base.heap) / level / 1024,
      ceilingRssPerClientKB: (c - ceilBase) / level / 1024,
      relayMarginalKB: (m.rss - prev.rss) / (level - before) / 1024,
      ceilingMarginalKB: (c - prev.ceil) / (level - before) / 1024,
      metricsScrapeMs: m.scrapeMs,
    };
    prev = { rss: m.rss, ceil: c };
    out.push(lv);
    ctx.log(`  ${level} clients: relay ${fmt(lv.relayRssPerClientKB)} KB RSS / ${fmt(lv.relayHeapPerClientKB)} KB heap per client; ceiling ${fmt(lv.ceilingRssPerClientKB)} KB RSS`);
  }
  const last = out[out.length - 1]!;
  return {
    id: '4',
    title: `Idle memory per client (1 stream, ${SUBS} subscriptions)`,
    figures:
      out
        .map(
          (l) =>
            `${l.clients.toLocaleString('en-US')}: RSS ${fmt(l.relayRssPerClientKB)} KB, heap ${fmt(l.relayHeapPerClientKB)} KB per client ` +
            `(marginal ${fmt(l.relayMarginalKB)} KB; relay ${fmt(l.relayRss / 2 ** 20)} MiB; GET /metrics ${fmt(l.metricsScrapeMs)} ms)`,
        )
        .join('; ') + ` — with no clients: RSS ${fmt(base.rss / 2 ** 20)} MiB, GET /metrics ${fmt(base.scrapeMs)} ms`,
    ratio: `relay ÷ bare grpc-js RSS/client ${out.map((l) => `${fmtRatio(l.relayRssPerClientKB / l.ceilingRssPerClientKB)} at ${l.clients / 1000}k`).join(', ')} (runtime alone: ${out.map((l) => `${fmt(l.ceilingRssPerClientKB)} KB`).join(', ')})`,
    targets: [
      {
        target: '≤ 48 KB RSS per idle client',
        value: `${fmt(last.relayRssPerClientKB)} KB at ${last.clients.toLocaleString('en-US')} (${out.map((l) => `${fmt(l.relayRssPerClientKB)} KB at ${l.clients / 1000}k`).join(', ')})`,
        verdict: last.relayRssPerClientKB <= 48 ? 'met' : 'missed',
      },
      ...[5_000, 10_000].map((n) => {
        const l = out.find((x) => x.clients === n);
        return atMost(`idle RSS per client at ${n / 1000}k, of bare grpc-js`, l && l.relayRssPerClientKB / l.ceilingRssPerClientKB, IDLE_RSS_RATIO, 2, '×');
      }),
      atMost('GET /metrics at 10k idle clients', out.find((x) => x.clients === 10_000)?.metricsScrapeMs, SCRAPE_MS, 1, ' ms'),
    ],
    data: { levels: out, baseline: { relayRss: base.rss, relayHeap: base.heap, ceilingRss: ceilBase, metricsScrapeMs: base.scrapeMs }, pool: POOL, subsPerClient: SUBS },
  };
}
