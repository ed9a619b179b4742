/**
 * Scenario 5: dedup. C clients × S subscriptions drawn Zipf-like from a pool
 * of K entries (90% singletons, 10% globs of 3), each spelled with its context
 * parameters in either order. Upstream subscriptions must equal the unique
 * canonical keys (computed here from the plan, not by the relay's parser),
 * and each upstream change must travel upstream once and reach exactly its
 * subscribers once.
 */
import { BenchOrigin } from '../origin';
import type { BenchContext, ScenarioResult } from '../lib/context';
import { dedupIsGlob, dedupResources, expectedResources, stampedVersion, zipfPicks, type Plan } from '../lib/names';
import { nowUs, sleep } from '../lib/proc';
import { GenPool, metricValue, startRelay } from '../lib/servers';
import { fmt, percentile, prng } from '../lib/stats';


export async function runDedup(ctx: BenchContext): Promise<ScenarioResult> {
  const C = ctx.full ? 5_000 : 1_000;
  const S = 20;
  const K = ctx.full ? 10_000 : 2_000;
  const plan: Extract<Plan, { kind: 'zipf' }> = { kind: 'zipf', size: K, perClient: S, s: 1.0, seed: 42 };

  // The truth, from the plan alone.
  const subscribers = new Map<number, number>();
  let clientSubs = 0;
  let expectedResourcesTotal = 0;
  let swappedSpellings = 0;
  for (let i = 0; i < C; i++) {
    for (const p of zipfPicks(plan, i)) {
      subscribers.set(p.idx, (subscribers.get(p.idx) ?? 0) + 1);
      clientSubs++;
      if (p.swapped) swappedSpellings++;
    }
    expectedResourcesTotal += expectedResources(plan, i);
  }
  const uniqueKeys = subscribers.size;

  const gens = await GenPool.start(2);
  ctx.defer(() => gens.stop());
  const origin = await BenchOrigin.start({ payloadBytes: ctx.payloadBytes });
  ctx.defer(() => origin.stop());
  for (let idx = 0; idx < K; idx++) origin.put(dedupResources(idx), 'v1');
  const relay = await startRelay({ originPort: origin.port });
  ctx.defer(() => relay.stop());

  const o = await gens.open('dedup', relay.port, C, plan, { concurrency: 256 });
  const synced = await gens.waitSynced('dedup', 120_000);
  if (o.failed > 0 || synced.synced < C) throw new Error(`only ${synced.synced}/${C} clients synced (${o.failed} failed to connect)`);
  await sleep(500);
  const m = await relay.metrics();
  const relayUpstreamSubs = metricValue(m, 'xdstp_relay_upstream_subscriptions');
  const relayClientSubs = metricValue(m, 'xdstp_relay_downstream_subscriptions');
  const relayDedupRatio = metricValue(m, 'xdstp_relay_dedup_ratio');
  const originSubs = origin.subscribedKeys().size;
  const before = origin.snapshot();

  // Changes: M distinct subscribed entries (a glob changes one member).
  const used = [...subscribers.keys()].sort((a, b) => a - b);
  const rand = prng(7);
  const M = Math.min(used.length, ctx.full ? 500 : 200);
  const chosen = new Set<number>();
  while (chosen.size < M) chosen.add(used[Math.floor(rand() * used.length)]!);
  let expectedDeliveries = 0;
  const upResp0 = metricValue(m, 'xdstp_relay_upstream_responses_total');
  await gens.record('dedup', true, nowUs());
  for (const idx of chosen) {
    const name = dedupResources(idx)[0]!;
    origin.change([name], stampedVersion(nowUs()));
    expectedDeliveries += subscribers.get(idx)!;
    await sleep(2);
  }
  await sleep(1000);
  const got = await gens.collect('dedup');
  await gens.record('dedup', false, 0);
  const m2 = await relay.metrics();
  const upstreamResponses = metricValue(m2, 'xdstp_relay_upstream_responses_total') - upResp0;
  const originResponses = origin.snapshot().responses - before.responses;
  const samples = got.samples.concat(got.stalledSamples);
  const originNamesSubscribed = before.namesSubscribed;

  const ratio = clientSubs / relayUpstreamSubs;
  // The live sets must match exactly; names ever subscribed upstream is reported (re-subscribing would show there).
  const subsExact = relayUpstreamSubs === uniqueKeys && originSubs === uniqueKeys;
  const onceUpstream = originResponses === M && upstreamResponses === M;
  const onceDown = samples.length === expectedDeliveries;
  return {
    id: '5',
    title: `Dedup: ${C.toLocaleString('en-US')} clients × ${S} subscriptions, Zipf(1.0) over ${K.toLocaleString('en-US')} names/globs`,
    figures:
      `client subscriptions ${clientSubs.toLocaleString('en-US')} (${swappedSpellings} with reordered ctx params); unique canonical keys ${uniqueKeys}; ` +
      `upstream subscriptions ${relayUpstreamSubs} (relay) / ${originSubs} (origin), names ever sent upstream ${originNamesSubscribed}; ` +
      `${M} changes → ${originResponses} upstream responses, ${samples.length}/${expectedDeliveries} client deliveries (p50 ${fmt(percentile(samples, 50))} / p99 ${fmt(percentile(samples, 99))} ms)`,
    ratio: `client subscriptions ÷ upstream subscriptions = ${fmt(ratio, 2)} (relay gauge ${fmt(relayDedupRatio, 2)})`,
    targets: [
      { target: 'upstream subscriptions = unique canonical keys', value: `${relayUpstreamSubs} vs ${uniqueKeys}`, verdict: subsExact ? 'met' : 'missed' },
      { target: 'each upstream change received once', value: `${originResponses} responses for ${M} changes; ${samples.length}/${expectedDeliveries} deliveries`, verdict: onceUpstream && onceDown ? 'met' : 'missed' },
    ],
    data: {
      C,
      S,
      K,
      zipfS: plan.s,
      globShare: 0.1,
      clientSubs,
      relayClientSubs,
      swappedSpellings,
      uniqueKeys,
      uniqueGlobs: [...subscribers.keys()].filter(dedupIsGlob).length,
      relayUpstreamSubs,
      originSubs,
      originNamesSubscribed,
      originSubscribeRequests: before.subscribeRequests,
      expectedResourcesTotal,
      changes: M,
      originResponses,
      upstreamResponses,
      deliveries: samples.length,
      expectedDeliveries,
      dedupRatio: ratio,
      relayDedupRatio,
    },
  };
}
