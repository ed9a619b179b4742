/**
 * Scenario 4: idle memory per connected client (one stream each, 10
 * subscriptions answered from the cache), relay state included. The baseline
 * is a bare grpc-js server holding the same streams after writing each one a
 * 10-resource response: the runtime's own cost per connection. Then what a
 * client's node costs: more clients whose node lists an Envoy-like build
 * (hundreds of extensions, the same for all) against as many more with a
 * plain node, added to the relay one after the other.
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
/** Extensions in the Envoy-like node (an official Envoy build lists hundreds). */
const ENVOY_EXTENSIONS = 300;

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

/** What a batch of added clients left: the server's RSS (and relay heap) after it, and their cost per client. */
interface Batch {
  rss: number;
  heap: number;
  perClientKB: number;
  heapPerClientKB: number;
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

  // What a node costs: as many more plain clients, then Envoy-like ones, each batch's RSS over the
  // one before; on the relay, then on bare grpc-js (which receives the same nodes and keeps none).
  const more = ctx.full ? 2_000 : 1_000;
  let ceilHave = have;
  const ceilingAt = (): number => median([0, 1, 2].map(() => memStatus(ceil.pid).rss));
  const batch = async (server: 'relay' | 'ceiling', envoyExtensions: number, from: { rss: number; heap: number }): Promise<Batch> => {
    const group = `${server}-${envoyExtensions > 0 ? 'envoy' : 'plain'}-node`;
    const port = server === 'relay' ? relay.port : ceil.port;
    const first = server === 'relay' ? have : ceilHave;
    const o = await gens.open(group, port, more, plan, { concurrency: 256, envoyExtensions }, first);
    const s = await gens.waitSynced(group, 120_000);
    if (o.failed > 0 || s.synced < more) throw new Error(`${group}: ${s.synced}/${more} synced (failed ${o.failed})`);
    if (server === 'relay') have += more;
    else ceilHave += more;
    await sleep(1500);
    const m = server === 'relay' ? await sampleRelay(relay) : { rss: ceilingAt(), heap: NaN };
    return { rss: m.rss, heap: m.heap, perClientKB: (m.rss - from.rss) / more / 1024, heapPerClientKB: (m.heap - from.heap) / more / 1024 };
  };
  const relayPlain = await batch('relay', 0, { rss: last.relayRss, heap: last.relayHeap });
  const relayEnvoy = await batch('relay', ENVOY_EXTENSIONS, relayPlain);
  const ceilPlain = await batch('ceiling', 0, { rss: last.ceilingRss, heap: NaN });
  const ceilEnvoy = await batch('ceiling', ENVOY_EXTENSIONS, ceilPlain);
  ctx.log(
    `  ${more} more clients, RSS per client: plain node relay +${fmt(relayPlain.perClientKB)} KB (heap +${fmt(relayPlain.heapPerClientKB)} KB), bare +${fmt(ceilPlain.perClientKB)} KB; ` +
      `Envoy-like node (${ENVOY_EXTENSIONS} extensions) relay +${fmt(relayEnvoy.perClientKB)} KB (heap +${fmt(relayEnvoy.heapPerClientKB)} KB), bare +${fmt(ceilEnvoy.perClientKB)} KB`,
  );
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
        .join('; ') +
      ` — with no clients: RSS ${fmt(base.rss / 2 ** 20)} MiB, GET /metrics ${fmt(base.scrapeMs)} ms; ` +
      `${more.toLocaleString('en-US')} more with a plain node: +${fmt(relayPlain.perClientKB)} KB RSS, +${fmt(relayPlain.heapPerClientKB)} KB heap per client (bare grpc-js +${fmt(ceilPlain.perClientKB)} KB RSS); ` +
      `with an Envoy-like node (${ENVOY_EXTENSIONS} extensions): +${fmt(relayEnvoy.perClientKB)} KB RSS, +${fmt(relayEnvoy.heapPerClientKB)} KB heap (bare grpc-js +${fmt(ceilEnvoy.perClientKB)} KB RSS)`,
    ratio:
      `relay ÷ bare grpc-js RSS/client ${out.map((l) => `${fmtRatio(l.relayRssPerClientKB / l.ceilingRssPerClientKB)} at ${l.clients / 1000}k`).join(', ')} (runtime alone: ${out.map((l) => `${fmt(l.ceilingRssPerClientKB)} KB`).join(', ')}); ` +
      `RSS per added client with an Envoy-like node ${fmtRatio(relayEnvoy.perClientKB / ceilEnvoy.perClientKB)} of bare grpc-js (with a plain node ${fmtRatio(relayPlain.perClientKB / ceilPlain.perClientKB)})`,
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
      {
        target: `idle RSS per added client with an Envoy-like node (${ENVOY_EXTENSIONS} extensions), of bare grpc-js`,
        value: `${fmtRatio(relayEnvoy.perClientKB / ceilEnvoy.perClientKB)} (+${fmt(relayEnvoy.perClientKB)} vs +${fmt(ceilEnvoy.perClientKB)} KB per client, ${more.toLocaleString('en-US')} clients)`,
        verdict: 'info',
      },
    ],
    data: { nodes: { clients: more, envoyExtensions: ENVOY_EXTENSIONS, relayPlain, relayEnvoy, ceilingPlain: ceilPlain, ceilingEnvoy: ceilEnvoy }, levels: out, baseline: { relayRss: base.rss, relayHeap: base.heap, ceilingRss: ceilBase, metricsScrapeMs: base.scrapeMs }, pool: POOL, subsPerClient: SUBS },
  };
}
