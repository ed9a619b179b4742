/**
 * Soak (b): control-plane flapping. The origin is stopped (like a crash:
 * connections torn down) and restarted every few seconds for a minute while
 * its resources keep changing — updates, glob members coming and going, also
 * while it is down. Delta and SotW clients stay connected to the relay the
 * whole time.
 *
 * Verdicts: no client ever sees a removal of a resource that still exists
 * (stable resources are never removed; an ephemeral member is seen removed
 * at most as often as the origin removed it; a SotW Cluster response never
 * drops a name it carried before); every client converges to the origin's
 * final state once the origin stays up; no client stream ended and no
 * client saw a protocol violation.
 */
import { startRelay } from '../../bench/lib/servers';
import { DeltaClient } from '../support/delta-client';
import { CLUSTER } from '../support/names';
import { TestOrigin } from '../support/origin';
import { SotwClient } from '../support/sotw-client';
import type { SoakContext } from './context';
import { gauge, sleep, waitFor } from './lib';
import { World } from './world';

export async function runFlap(ctx: SoakContext): Promise<void> {
  const DURATION_MS = ctx.smoke ? 12_000 : 60_000;
  const DELTA_CLIENTS = ctx.smoke ? 8 : 40;
  const SOTW_CLIENTS = ctx.smoke ? 2 : 10;
  const origin = await TestOrigin.start({ label: 'flap-origin' });
  ctx.defer(() => origin.stop());
  const world = new World(origin, { prefix: 'flap', stableMembers: ctx.smoke ? 10 : 30, ephemeralMembers: ctx.smoke ? 6 : 12, singletons: 20, seed: 21 });
  const relay = await startRelay({ originPort: origin.port, timeoutMs: 30_000 });
  ctx.defer(() => relay.stop());
  const target = `127.0.0.1:${relay.port}`;

  const deltas: Array<{ client: DeltaClient; singletons: string[] }> = [];
  for (let i = 0; i < DELTA_CLIENTS; i++) {
    const client = new DeltaClient(target, { nodeId: `flap-delta-${i}` });
    ctx.defer(() => client.close());
    const singletons = [world.singletons[i % world.singletons.length]!, world.singletons[(i * 7 + 3) % world.singletons.length]!];
    client.subscribe(CLUSTER, [world.glob, ...new Set(singletons)]);
    deltas.push({ client, singletons: [...new Set(singletons)] });
  }
  const sotws: Array<{ client: SotwClient; names: string[] }> = [];
  for (let i = 0; i < SOTW_CLIENTS; i++) {
    const client = new SotwClient(target, { nodeId: `flap-sotw-${i}` });
    ctx.defer(() => client.close());
    const names = [...world.stable.slice(0, 3), ...world.singletons.slice(i % 5, (i % 5) + 3)];
    client.request(CLUSTER, names);
    sotws.push({ client, names });
  }
  const converged = (): boolean =>
    deltas.every((d) => world.deltaMismatch(d.client, d.singletons).length === 0) &&
    sotws.every((s) => {
      const held = World.sotwHeld(s.client);
      return s.names.every((n) => held.get(n) === world.versions.get(n));
    });
  await waitFor(converged, 20_000, 'clients did not sync before the flapping started');

  // The flapping: changes every 150 ms; the origin down for 0.3–1.5 s every 2–4 s (smoke) or 3–5 s.
  const t0 = Date.now();
  let restarts = 0;
  let nextFlap = t0 + 1000;
  let downUntil = 0;
  while (Date.now() - t0 < DURATION_MS) {
    const now = Date.now();
    if (origin.running && now >= nextFlap) {
      await origin.stop();
      downUntil = now + 300 + world.rand.int(1200);
    } else if (!origin.running && now >= downUntil) {
      await origin.restart();
      restarts++;
      nextFlap = Date.now() + (ctx.smoke ? 2000 : 3000) + world.rand.int(2000);
    }
    if (world.rand.chance(0.2)) world.toggleOne();
    else world.updateOne();
    await sleep(150);
  }
  // A last outage with changes in it, so convergence is measured from a restart.
  if (origin.running) await origin.stop();
  for (let i = 0; i < 5; i++) world.updateOne();
  world.toggleOne();
  await sleep(500);
  await origin.restart();
  restarts++;
  const settledAt = Date.now();
  const ok = await waitFor(converged, 30_000, '');
  const convergeMs = Date.now() - settledAt;

  const wrong = [...deltas.flatMap((d) => world.wrongRemovals(d.client)), ...sotws.flatMap((s) => World.sotwWrongRemovals(s.client))];
  const ended = [...deltas.map((d) => d.client.status), ...sotws.map((s) => s.client.status)].filter((s) => s !== undefined);
  const violations = deltas.flatMap((d) => d.client.violations);
  const m = await relay.metrics();
  const reconnects = gauge(m, 'xdstp_relay_upstream_reconnects_total');
  ctx.log(
    `${((Date.now() - t0 - convergeMs) / 1000).toFixed(0)} s of flapping: origin restarted ${restarts}×, ${world.changes} changes ` +
      `(${world.removals.size} members removed at least once); relay reconnected upstream ${reconnects}×; ` +
      `${DELTA_CLIENTS} delta + ${SOTW_CLIENTS} SotW clients`,
  );
  ctx.check('no client saw a removal of a resource that still existed', wrong.length === 0, wrong.length === 0 ? '0 wrong removals' : `${wrong.length}: ${wrong.slice(0, 3).join('; ')}`);
  const lagging = deltas.filter((d) => world.deltaMismatch(d.client, d.singletons).length > 0);
  ctx.check(
    'every client converged to the origin once it stayed up',
    ok,
    ok
      ? `converged ${convergeMs} ms after the last restart`
      : `${lagging.length}/${DELTA_CLIENTS} delta clients differ after 30 s, e.g. ${lagging[0] ? world.deltaMismatch(lagging[0].client, lagging[0].singletons).slice(0, 2).join('; ') : 'a SotW client'}`,
  );
  ctx.check(
    'no client stream ended and no protocol violation',
    ended.length === 0 && violations.length === 0,
    `${ended.length} streams ended${ended[0] ? ` (${ended[0].code} ${ended[0].details})` : ''}, ${violations.length} violations${violations[0] ? ` (${violations[0]})` : ''}`,
  );
}
