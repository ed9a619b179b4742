/**
 * Soak (c) and (d): the shared Redis tier under the two failures operators
 * meet — the relay killed outright and started again (warm, from Redis), and
 * Redis itself killed and restarted under load.
 */
import { startRelay, type RelayProc } from '../../bench/lib/servers';
import { httpGet } from '../../bench/lib/proc';
import { DeltaClient } from '../support/delta-client';
import { CLUSTER } from '../support/names';
import { TestOrigin } from '../support/origin';
import { RedisServer } from '../support/redis-server';
import type { SoakContext } from './context';
import { DeliveryRecorder, gauge, percentile, sleep, waitFor } from './lib';
import { World } from './world';

interface Subscriber {
  client: DeltaClient;
  singletons: string[];
}

function subscribeAll(ctx: SoakContext, world: World, relay: RelayProc, n: number, tag: string, claims?: (i: number) => Record<string, string> | undefined): Subscriber[] {
  const out: Subscriber[] = [];
  for (let i = 0; i < n; i++) {
    const client = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: `${tag}-${i}` });
    ctx.defer(() => client.close());
    const singletons = [...new Set([world.singletons[i % world.singletons.length]!, world.singletons[(i * 7 + 3) % world.singletons.length]!])];
    const initialVersions = claims?.(i);
    client.subscribe(CLUSTER, [world.glob, ...singletons], initialVersions ? { initialVersions } : {});
    out.push({ client, singletons });
  }
  return out;
}

const synced = (world: World, subs: Subscriber[]): boolean => subs.every((s) => world.deltaMismatch(s.client, s.singletons).length === 0);

function firstMismatch(world: World, subs: Subscriber[]): string {
  const s = subs.find((x) => world.deltaMismatch(x.client, x.singletons).length > 0);
  return s ? world.deltaMismatch(s.client, s.singletons).slice(0, 2).join('; ') : '';
}

/**
 * (c) Relay SIGKILL and warm restart on Redis. Clients synced through relay 1
 * while resources change; relay 1 is SIGKILLed and the control plane goes
 * down with it; relay 2 starts on the same Redis and the clients come back
 * (half claiming what they held, as Envoy does, half fresh): everything must
 * come from Redis. Then the control plane returns with changes made while it
 * was away, and every client converges.
 */
export async function runWarmRestart(ctx: SoakContext): Promise<void> {
  const N = ctx.smoke ? 10 : 50;
  const redis = await RedisServer.start();
  ctx.defer(() => redis.dispose());
  const origin = await TestOrigin.start({ label: 'warm-origin' });
  ctx.defer(() => origin.stop());
  const world = new World(origin, { prefix: 'warm', stableMembers: 40, ephemeralMembers: 8, singletons: 20, seed: 3 });
  const redisArgs = ['--redis', redis.url];
  const relay1 = await startRelay({ originPort: origin.port, extraArgs: redisArgs, timeoutMs: 30_000 });
  ctx.defer(() => relay1.stop());
  const first = subscribeAll(ctx, world, relay1, N, 'warm1');
  await waitFor(() => synced(world, first), 20_000, `relay 1: clients did not sync (${firstMismatch(world, first)})`);
  const loadEnd = Date.now() + (ctx.smoke ? 2000 : 8000);
  while (Date.now() < loadEnd) {
    if (world.rand.chance(0.2)) world.toggleOne();
    else world.updateOne();
    await sleep(50);
  }
  await waitFor(() => synced(world, first), 10_000, `relay 1: clients did not follow the changes (${firstMismatch(world, first)})`);
  // The shared tier is written behind the answers: give its last batch a moment before the kill.
  await sleep(500);
  const held = first.map((s) => Object.fromEntries(s.client.held(CLUSTER)));
  relay1.child.kill('SIGKILL');
  await origin.stop();
  for (const s of first) s.client.close();

  const t0 = Date.now();
  const relay2 = await startRelay({ originPort: origin.port, extraArgs: redisArgs, timeoutMs: 30_000 });
  ctx.defer(() => relay2.stop());
  const readyMs = Date.now() - t0;
  const t1 = Date.now();
  const second = subscribeAll(ctx, world, relay2, N, 'warm2', (i) => (i % 2 === 0 ? held[i] : undefined));
  const fresh = second.filter((_, i) => i % 2 === 1);
  const servedFromRedis = await waitFor(() => synced(world, fresh), 15_000, '');
  const syncMs = Date.now() - t1;
  ctx.log(`relay 1 SIGKILLed with ${N} clients and ${world.versions.size} resources; relay 2 ready in ${readyMs} ms with the control plane down`);
  ctx.check(
    'a warm restart serves every fresh client its whole state from Redis, control plane down',
    servedFromRedis,
    servedFromRedis ? `${fresh.length} fresh clients synced in ${syncMs} ms` : `not within 15 s: ${firstMismatch(world, fresh)}`,
  );

  // The control plane comes back with what changed while it was away.
  for (let i = 0; i < 6; i++) world.updateOne();
  world.toggleOne();
  await origin.restart();
  const t2 = Date.now();
  const converged = await waitFor(() => synced(world, second), 20_000, '');
  const wrong = second.flatMap((s) => world.wrongRemovals(s.client));
  ctx.check(
    'after the control plane returns every client converges, none saw an existing resource removed',
    converged && wrong.length === 0,
    `${converged ? `converged in ${Date.now() - t2} ms` : `not converged in 20 s (${firstMismatch(world, second)})`}; ${wrong.length} wrong removals${wrong[0] ? ` (${wrong[0]})` : ''}`,
  );
}

/**
 * (d) Redis flapping: redis-server SIGKILLed and restarted (empty: no
 * persistence) every few seconds while resources change. The relay must keep
 * serving from memory and upstream: /readyz stays 200, no client stream ends,
 * and every client converges to the last versions (no update lost); versions
 * superseded before delivery are counted and printed.
 */
export async function runRedisFlap(ctx: SoakContext): Promise<void> {
  const N = ctx.smoke ? 10 : 50;
  const DURATION_MS = ctx.smoke ? 12_000 : 50_000;
  const redis = await RedisServer.start();
  ctx.defer(() => redis.dispose());
  const origin = await TestOrigin.start({ label: 'redis-flap-origin' });
  ctx.defer(() => origin.stop());
  const world = new World(origin, { prefix: 'rflap', stableMembers: 30, ephemeralMembers: 8, singletons: 20, seed: 4 });
  const relay = await startRelay({ originPort: origin.port, extraArgs: ['--redis', redis.url], timeoutMs: 30_000 });
  ctx.defer(() => relay.stop());
  const subs = subscribeAll(ctx, world, relay, N, 'rflap');
  await waitFor(() => synced(world, subs), 20_000, `clients did not sync (${firstMismatch(world, subs)})`);
  const rec = new DeliveryRecorder((v) => world.publishedAt.get(v));
  for (const s of subs) rec.attach(s.client);

  let kills = 0;
  let notReady = 0;
  let probes = 0;
  let probing = true;
  const prober = (async () => {
    while (probing) {
      probes++;
      const r = await httpGet(relay.adminPort, '/readyz', 2000).catch(() => ({ status: 0 }));
      if (r.status !== 200) notReady++;
      await sleep(250);
    }
  })();
  const t0 = Date.now();
  let nextKill = t0 + 1000;
  let downUntil = 0;
  const published: Array<{ name: string; version: string }> = [];
  while (Date.now() - t0 < DURATION_MS) {
    const now = Date.now();
    if (redis.running && now >= nextKill) {
      await redis.kill();
      kills++;
      downUntil = now + 500 + world.rand.int(1000);
    } else if (!redis.running && now >= downUntil) {
      await redis.restart();
      nextKill = Date.now() + 2000 + world.rand.int(2000);
    }
    if (world.rand.chance(0.1)) world.toggleOne();
    else published.push(world.updateOne());
    await sleep(100);
  }
  if (!redis.running) await redis.restart();
  probing = false;
  await prober;
  const converged = await waitFor(() => synced(world, subs), 15_000, '');
  // A version a client covers but never received was skipped: allowed (a newer one superseded it
  // before delivery, the relay coalesces), so it is a figure; the final state is the check.
  let skipped = 0;
  for (const s of subs) {
    const covers = new Set([...world.stable, ...s.singletons]);
    const got = rec.received.get(s.client)!;
    for (const p of published) if (covers.has(p.name) && !got.has(p.version)) skipped++;
  }
  const m = await relay.metrics();
  const ended = subs.filter((s) => s.client.status !== undefined).length;
  ctx.log(
    `${(DURATION_MS / 1000).toFixed(0)} s: redis-server SIGKILLed and restarted ${kills}×, ${world.changes} changes; ` +
      `relay counted ${gauge(m, 'xdstp_relay_redis_errors_total')} Redis errors; delivery p50 ${percentile(rec.samples, 50).toFixed(1)} ms, p99 ${percentile(rec.samples, 99).toFixed(1)} ms; ` +
      `${skipped} versions skipped (superseded before delivery)`,
  );
  ctx.check('the relay stayed ready while Redis flapped', notReady === 0, `${notReady}/${probes} /readyz probes not 200`);
  ctx.check(
    'no update lost (every client converged to the last versions) and no stream ended',
    ended === 0 && converged,
    `${ended} streams ended, ${converged ? 'converged' : `not converged (${firstMismatch(world, subs)})`}`,
  );
}
