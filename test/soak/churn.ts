/**
 * Soak (a): stream churn with a leak check. Cycles of N delta streams, 100
 * per HTTP/2 connection (the bench's raw-HTTP/2 load generators), each
 * subscribing one 50-member glob and two singletons; every stream syncs, all
 * are closed, the relay's gauges go back to zero, then a full GC inside the
 * relay (a child process run with --expose-gc and the hidden --debug-heap
 * flag: POST /debug/gc) and the heap is read. A warm-up cycle first, so JIT
 * code, grpc-js pools and prom-client label sets settle before cycle 1.
 *
 * Verdict: heap after cycle 3 within 2 % of cycle 1 at full size (5,000
 * streams per cycle); within 4 % at smoke size (1,000 streams per cycle). "Heap" is the bytes of live data
 * objects in a heap snapshot taken after the GC (POST /debug/gc?live=1):
 * V8's used-heap figure moves by ±3 % between identical idle states as it
 * flushes and recompiles bytecode, which would make a 2 % verdict a coin
 * toss; it is printed too.
 * The leak this guards against (answers kept for resources the relay had
 * dropped) grew the heap 6–17 % between cycles 1 and 3 at either size.
 */
import { BenchOrigin } from '../../bench/origin';
import { fanGlob, fanMember, poolName, type Plan } from '../../bench/lib/names';
import { GenPool, startRelay, type RelayProc } from '../../bench/lib/servers';
import type { HeapFigures } from '../../src/admin/heap';
import type { SoakContext } from './context';
import { gauge, gcHeap, mb, sleep, waitMetrics } from './lib';

const PER_CONN = 100;
const GLOB_MEMBERS = 50;
const POOL = 1000;

/** Open `n` streams as group `group`, wait until each holds its 52 resources, close them all, wait for the relay to forget them. */
async function cycle(gens: GenPool, relay: RelayProc, group: string, n: number, plan: Plan): Promise<number> {
  const t0 = Date.now();
  const o = await gens.open(group, relay.port, n, plan, { subscribe: true, streamsPerConn: PER_CONN, concurrency: 32 });
  if (o.failed > 0) throw new Error(`${group}: ${o.failed} of ${n} streams failed to open (${o.firstError ?? ''})`);
  const s = await gens.waitSynced(group, 120_000);
  if (s.synced < n) throw new Error(`${group}: only ${s.synced}/${n} streams synced (${JSON.stringify(s.endReasons)})`);
  await gens.close(group);
  const zero = await waitMetrics(
    relay,
    (t) =>
      gauge(t, 'xdstp_relay_downstream_streams_open') === 0 &&
      gauge(t, 'xdstp_relay_downstream_subscriptions') === 0 &&
      gauge(t, 'xdstp_relay_upstream_subscriptions') === 0,
    30_000,
  );
  if (!zero) throw new Error(`${group}: the relay still counts streams or subscriptions (downstream or upstream) 30 s after every client closed`);
  const ms = Date.now() - t0;
  // What the relay lets go of lazily (answers memoized on resources it has dropped) goes within a second.
  await sleep(1500);
  return ms;
}

export async function runChurn(ctx: SoakContext): Promise<void> {
  const N = ctx.smoke ? 1000 : 5000;
  const CYCLES = 3;
  const gens = await GenPool.start(ctx.smoke ? 1 : 2);
  ctx.defer(() => gens.stop());
  const origin = await BenchOrigin.start({ payloadBytes: 200 });
  ctx.defer(() => origin.stop());
  origin.put(Array.from({ length: GLOB_MEMBERS }, (_, j) => fanMember('G', j)), 'v1');
  origin.put(Array.from({ length: POOL }, (_, i) => poolName(i)), 'v1');
  // Grace 0: the upstream subscriptions go with the last stream, so "everything closed" means an empty engine.
  const relay = await startRelay({
    originPort: origin.port,
    nodeArgs: ['--expose-gc'],
    extraArgs: ['--debug-heap', '--unsubscribe-grace', '0'],
    timeoutMs: 30_000,
  });
  ctx.defer(() => relay.stop());
  // Client i: two singletons of the pool (distinct per client, wrapping) and the one glob.
  const plan: Plan = { kind: 'pool', size: POOL, perClient: 2, extra: [fanGlob('G')], extraResources: GLOB_MEMBERS };

  const base = await gcHeap(relay);
  ctx.log(`relay idle: heap ${mb(base.usedHeapBytes)} (old space ${mb(base.spaces.old_space ?? NaN)})`);
  const warmMs = await cycle(gens, relay, 'warm', N, plan);
  const warm = await gcHeap(relay);
  ctx.log(`warm-up: ${N} streams in ${(warmMs / 1000).toFixed(1)} s; heap ${mb(warm.usedHeapBytes)}`);
  const heaps: HeapFigures[] = [];
  for (let k = 1; k <= CYCLES; k++) {
    const ms = await cycle(gens, relay, `c${k}`, N, plan);
    const h = await gcHeap(relay, true);
    heaps.push(h);
    ctx.log(
      `cycle ${k}: ${N} streams on ${Math.ceil(N / PER_CONN)} connections opened, synced, closed in ${(ms / 1000).toFixed(1)} s; ` +
        `after GC: live data ${mb(h.liveBytes ?? NaN)}, used heap ${mb(h.usedHeapBytes)}, old space ${mb(h.spaces.old_space ?? NaN)}, RSS ${mb(h.rssBytes)}`,
    );
  }
  const live = (h: HeapFigures): number => h.liveBytes ?? NaN;
  const limit = ctx.smoke ? 4 : 2;
  // On a loaded machine the last connections' teardown can still be under
  // way at the snapshot: measured again after a pause, that part is gone,
  // while a leak stays (the lowest reading is taken).
  for (let again = 0; again < 2 && ((live(heaps[CYCLES - 1]!) - live(heaps[0]!)) / live(heaps[0]!)) * 100 > limit; again++) {
    await sleep(1000);
    const h = await gcHeap(relay, true);
    ctx.log(`cycle ${CYCLES} measured again after 1 s: live data ${mb(live(h))}`);
    if (live(h) < live(heaps[CYCLES - 1]!)) heaps[CYCLES - 1] = h;
  }
  const first = heaps[0]!;
  const last = heaps[CYCLES - 1]!;
  const growth = live(last) - live(first);
  const pct = (growth / live(first)) * 100;
  const perStream = growth / (N * (CYCLES - 1));
  const usedPct = ((last.usedHeapBytes - first.usedHeapBytes) / first.usedHeapBytes) * 100;
  const figures =
    `live data after GC ${heaps.map((h) => mb(live(h))).join(' → ')} (cycles 1…${CYCLES}); ` +
    `cycle ${CYCLES} vs 1: ${growth >= 0 ? '+' : ''}${(growth / 1024).toFixed(0)} KB (${pct.toFixed(2)} %), ${perStream.toFixed(0)} B per closed stream; ` +
    `used heap ${usedPct >= 0 ? '+' : ''}${usedPct.toFixed(2)} %`;
  // At smoke size a 2 % budget is ~180 KB, within what one GC leaves or takes
  // between identical states (hence 4 %); the leak this guards against grew 6–17 %.
  ctx.check(`heap after cycle ${CYCLES} within ${limit} % of cycle 1`, pct <= limit, figures);
}
