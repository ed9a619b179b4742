/**
 * Subscription lifetime: grace periods, reconnecting clients, NACKs, upstream
 * restarts and slow clients.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withRelay, type RelayEnv } from './support/relay-fixture';
import type { DeltaClient } from './support/delta-client';
import { LISTENER, keyOf, xdstp } from './support/names';
import { assertWellFormed, receivedNames } from './support/assertions';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

// ------------------------------------------------------------ unsubscribe

test('the last client unsubscribing is passed upstream at once with zero grace', T, async () => {
  await withRelay({ unsubscribeGraceMs: 0 }, async ({ origin, client }) => {
    const n = L('grace/zero');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    c.unsubscribe(LISTENER, [n]);
    await origin.waitFor(() => origin.unsubscribeCount(n) === 1, `upstream unsubscribe of ${n}`);
    assert.ok(!origin.subscribedKeys(LISTENER).has(n));
  });
});

test('the last client disconnecting unsubscribes upstream with zero grace', T, async () => {
  await withRelay({ unsubscribeGraceMs: 0 }, async ({ origin, client }) => {
    const n = L('grace/disconnect');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    c.close();
    await origin.waitFor(() => origin.unsubscribeCount(n) === 1, `upstream unsubscribe of ${n}`);
    assert.ok(!origin.subscribedKeys(LISTENER).has(n));
  });
});

test('a client leaving while others remain subscribed does not unsubscribe upstream', T, async () => {
  await withRelay({ unsubscribeGraceMs: 0 }, async ({ origin, client }) => {
    const n = L('grace/shared');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const a = client();
    const b = client();
    a.subscribe(LISTENER, [n]);
    b.subscribe(LISTENER, [n]);
    await a.waitForVersion(LISTENER, n, 'v1');
    await b.waitForVersion(LISTENER, n, 'v1');
    a.close();
    await origin.expectNoRequest(300, (r) => r.unsubscribe.length > 0);
    origin.setResource(LISTENER, n, 'y', 'v2');
    await b.waitForVersion(LISTENER, n, 'v2');
    assert.equal(origin.unsubscribeCount(n), 0);
  });
});

test('the upstream unsubscribe waits for the grace period', T, async () => {
  const grace = 1000;
  await withRelay({ unsubscribeGraceMs: grace }, async ({ origin, client }) => {
    const n = L('grace/later');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    c.unsubscribe(LISTENER, [n]);
    // Not before the grace period…
    await origin.expectNoRequest(300, (r) => r.unsubscribe.length > 0);
    assert.ok(origin.subscribedKeys(LISTENER).has(n));
    // …but after it.
    await origin.waitFor(() => origin.unsubscribeCount(n) === 1, `upstream unsubscribe of ${n}`);
  });
});

test('resubscribing within the grace period causes no upstream traffic', T, async () => {
  await withRelay({ unsubscribeGraceMs: 3000 }, async ({ origin, client }) => {
    const n = L('grace/resub');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const a = client();
    a.subscribe(LISTENER, [n]);
    await a.waitForVersion(LISTENER, n, 'v1');
    await origin.waitSettled();
    const before = origin.requests.length;
    a.close();
    const b = client();
    b.subscribe(LISTENER, [n]);
    await b.waitForVersion(LISTENER, n, 'v1');
    await origin.expectNoRequest(300);
    assert.equal(origin.requests.length, before, origin.describe());
    // The subscription is live: updates still flow.
    origin.setResource(LISTENER, n, 'y', 'v2');
    await b.waitForVersion(LISTENER, n, 'v2');
  });
});

test('a client re-subscribing to a name it unsubscribed from gets it again', T, async () => {
  await withRelay({ unsubscribeGraceMs: 5000 }, async ({ origin, client }) => {
    const n = L('resub/again');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    c.unsubscribe(LISTENER, [n]);
    c.subscribe(LISTENER, [n]);
    await c.waitFor(() => c.received(LISTENER, n).length === 2, 'the resource a second time');
    assert.deepEqual(c.received(LISTENER, n).map((r) => r.version), ['v1', 'v1']);
  });
});

test('the last client unsubscribing from a glob is passed upstream', T, async () => {
  await withRelay({ unsubscribeGraceMs: 0 }, async ({ origin, client }) => {
    const glob = L('grace-glob/*?node_type=ingress');
    origin.setResource(LISTENER, L('grace-glob/m?node_type=ingress'), 'm', 'v1');
    const c = client();
    c.subscribe(LISTENER, [glob]);
    await c.waitForVersion(LISTENER, L('grace-glob/m?node_type=ingress'), 'v1');
    c.unsubscribe(LISTENER, [glob]);
    await origin.waitFor(() => origin.unsubscribeCount(glob) === 1, `upstream unsubscribe of ${glob}`);
    assert.ok(!origin.subscribedKeys(LISTENER).has(glob));
  });
});

// ------------------------------------------------------------ reconnect resume

interface ResumeSetup {
  names: { current: string; stale: string; gone: string };
  reconnected: DeltaClient;
}

/**
 * A client holds three names at v1 and goes away; meanwhile one is updated and
 * one deleted. It reconnects claiming v1 for all three. With `keeper`, another
 * client keeps the names subscribed (the relay stays in sync); without, the
 * relay has to go upstream again.
 */
async function resumeSetup(env: RelayEnv, keeper: boolean): Promise<ResumeSetup> {
  const { origin, client } = env;
  const names = { current: L('resume/current'), stale: L('resume/stale'), gone: L('resume/gone') };
  const all = Object.values(names);
  for (const n of all) origin.setResource(LISTENER, n, n, 'v1');
  if (keeper) {
    const k = client();
    k.subscribe(LISTENER, all);
    await k.waitFor(() => k.held(LISTENER).size === 3, 'keeper holds all');
  }
  const first = client();
  first.subscribe(LISTENER, all);
  await first.waitFor(() => first.held(LISTENER).size === 3, 'client holds all');
  const held = Object.fromEntries(first.held(LISTENER));
  first.close();
  if (!keeper) await origin.waitFor(() => all.every((n) => origin.unsubscribeCount(n) === 1), 'relay let go');
  origin.setResource(LISTENER, names.stale, 'stale-2', 'v2');
  origin.removeResource(LISTENER, names.gone);
  if (keeper) await origin.waitSettled();

  const reconnected = client();
  reconnected.subscribe(LISTENER, all, { initialVersions: held });
  await reconnected.waitForVersion(LISTENER, names.stale, 'v2');
  await reconnected.waitForRemoved(LISTENER, names.gone);
  // Sentinel: a later update of the stale name; anything the resume would
  // have sent has been sent by the time it arrives.
  origin.setResource(LISTENER, names.stale, 'stale-3', 'v3');
  await reconnected.waitForVersion(LISTENER, names.stale, 'v3');
  return { names, reconnected };
}

test('a reconnecting client is not resent what it holds at the current version', T, async () => {
  await withRelay({}, async (env) => {
    const { names, reconnected } = await resumeSetup(env, true);
    assert.deepEqual(reconnected.received(LISTENER, names.current), [], reconnected.describe());
    assert.equal(reconnected.held(LISTENER).get(names.current), 'v1');
    assertWellFormed(reconnected);
  });
});

test('a reconnecting client gets updates for stale versions', T, async () => {
  await withRelay({}, async (env) => {
    const { names, reconnected } = await resumeSetup(env, true);
    assert.deepEqual(reconnected.received(LISTENER, names.stale).map((r) => r.version), ['v2', 'v3']);
  });
});

test('a reconnecting client gets removals for names that no longer exist', T, async () => {
  await withRelay({}, async (env) => {
    const { names, reconnected } = await resumeSetup(env, true);
    assert.deepEqual(reconnected.removedNames(LISTENER), [names.gone]);
    assert.ok(!reconnected.held(LISTENER).has(names.gone));
  });
});

test('a reconnecting client is resumed correctly when the relay has to ask upstream again', T, async () => {
  await withRelay({ unsubscribeGraceMs: 0 }, async (env) => {
    const { names, reconnected } = await resumeSetup(env, false);
    assert.deepEqual(reconnected.received(LISTENER, names.current), [], reconnected.describe());
    assert.deepEqual(reconnected.received(LISTENER, names.stale).map((r) => r.version), ['v2', 'v3']);
    assert.deepEqual(reconnected.removedNames(LISTENER), [names.gone]);
  });
});

test('a glob subscriber on a new stream gets all members', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const glob = L('resume-glob/*');
    const members = [L('resume-glob/m1'), L('resume-glob/m2')];
    for (const m of members) origin.setResource(LISTENER, m, m, 'v1');
    const first = client();
    first.subscribe(LISTENER, [glob]);
    await first.waitFor(() => first.held(LISTENER).size === 2, 'members');
    first.close();
    const again = client();
    again.subscribe(LISTENER, [glob]);
    await again.waitFor(() => again.held(LISTENER).size === 2, 'members on the new stream');
    assert.deepEqual(receivedNames(again, LISTENER), members);
  });
});

test('a glob subscriber listing a member at its current version is not resent that member', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const glob = L('resume-glob/*');
    const [m1, m2] = [L('resume-glob/m1'), L('resume-glob/m2')];
    origin.setResource(LISTENER, m1, 'm1', 'v1');
    origin.setResource(LISTENER, m2, 'm2', 'v1');
    const keeper = client();
    keeper.subscribe(LISTENER, [glob]);
    await keeper.waitFor(() => keeper.held(LISTENER).size === 2, 'members');
    const c = client();
    c.subscribe(LISTENER, [glob], { initialVersions: { [m1]: 'v1' } });
    await c.waitForVersion(LISTENER, m2, 'v1');
    origin.setResource(LISTENER, m2, 'm2b', 'v2');
    await c.waitForVersion(LISTENER, m2, 'v2');
    assert.deepEqual(c.received(LISTENER, m1), [], c.describe());
    assert.equal(c.held(LISTENER).get(m1), 'v1');
  });
});

// ------------------------------------------------------------ NACK isolation

async function nackSetup(env: RelayEnv): Promise<{ n: string; other: string; nacker: DeltaClient; peer: DeltaClient }> {
  const { origin, client } = env;
  const n = L('nack/target');
  const other = L('nack/other');
  origin.setResource(LISTENER, n, 'good', 'v1');
  origin.setResource(LISTENER, other, 'other', 'v1');
  const nacker = client({
    reject: (r) => (r.resources?.some((x) => x.name === n && x.version === 'v2') ? 'rejecting v2' : undefined),
  });
  const peer = client();
  nacker.subscribe(LISTENER, [n]);
  peer.subscribe(LISTENER, [n]);
  await nacker.waitForVersion(LISTENER, n, 'v1');
  await peer.waitForVersion(LISTENER, n, 'v1');
  origin.setResource(LISTENER, n, 'bad', 'v2');
  await peer.waitForVersion(LISTENER, n, 'v2');
  await nacker.waitFor(() => nacker.nacked.length === 1, 'the NACK');
  // Things that could provoke a resend of v2 to the NACKing client: a new
  // subscription on its stream, and another client subscribing to the name.
  nacker.subscribe(LISTENER, [other]);
  await nacker.waitForVersion(LISTENER, other, 'v1');
  const third = client();
  third.subscribe(LISTENER, [n]);
  await third.waitForVersion(LISTENER, n, 'v2');
  origin.setResource(LISTENER, other, 'other-2', 'v2');
  await nacker.waitForVersion(LISTENER, other, 'v2');
  return { n, other, nacker, peer };
}

test('a NACKed version keeps the stream open and is not resent', T, async () => {
  await withRelay({}, async (env) => {
    const { n, nacker } = await nackSetup(env);
    assert.equal(nacker.status, undefined, 'stream still open');
    assert.deepEqual(nacker.received(LISTENER, n).map((r) => r.version), ['v1', 'v2'], nacker.describe());
    assert.equal(nacker.held(LISTENER).get(n), 'v1');
  });
});

test('a newer version after a NACK is delivered', T, async () => {
  await withRelay({}, async (env) => {
    const { n, nacker } = await nackSetup(env);
    env.origin.setResource(LISTENER, n, 'fixed', 'v3');
    await nacker.waitForVersion(LISTENER, n, 'v3');
    assert.deepEqual(Buffer.from(nacker.resource(LISTENER, n)!.resource!.value), Buffer.from('fixed'));
  });
});

test('a NACK does not affect other clients', T, async () => {
  await withRelay({}, async (env) => {
    const { n, peer } = await nackSetup(env);
    env.origin.setResource(LISTENER, n, 'fixed', 'v3');
    await peer.waitForVersion(LISTENER, n, 'v3');
    assert.deepEqual(peer.received(LISTENER, n).map((r) => r.version), ['v1', 'v2', 'v3']);
    assert.equal(peer.status, undefined);
    assert.deepEqual(env.origin.nacks, [], 'the client NACK is not passed upstream');
    assertWellFormed(peer);
  });
});

// ------------------------------------------------------------ upstream restart

async function restartSetup(env: RelayEnv): Promise<{ n: string; glob: string; member: string; c: DeltaClient; newStream: number }> {
  const { origin, client } = env;
  const n = L('restart/single');
  const glob = L('restart-glob/*');
  const member = L('restart-glob/m1');
  origin.setResource(LISTENER, n, 'single', 'v1');
  origin.setResource(LISTENER, member, 'member', 'v1');
  const c = client();
  c.subscribe(LISTENER, [n, glob]);
  await c.waitForVersion(LISTENER, n, 'v1');
  await c.waitForVersion(LISTENER, member, 'v1');
  await origin.waitSettled();
  const streamsBefore = origin.totalStreams;
  await origin.restart();
  const newStream = await origin.waitFor(
    () => {
      const id = origin.streamIds().find((s) => s > streamsBefore);
      return id !== undefined && origin.streamRequests(id).some((r) => r.typeUrl === LISTENER) ? id : undefined;
    },
    'the relay to resubscribe on a new stream',
    10_000,
  );
  return { n, glob, member, c, newStream };
}

test('after an upstream restart the relay resubscribes with initial_resource_versions', T, async () => {
  await withRelay({}, async (env) => {
    const { n, glob, member, newStream } = await restartSetup(env);
    const first = env.origin.streamRequests(newStream).find((r) => r.typeUrl === LISTENER)!;
    const initial = Object.fromEntries(Object.entries(first.initialVersions).map(([k, v]) => [keyOf(k), v]));
    assert.equal(initial[n], 'v1', env.origin.describe());
    assert.equal(initial[member], 'v1', env.origin.describe());
    const resubscribed = new Set(env.origin.streamRequests(newStream).flatMap((r) => r.subscribe).map(keyOf));
    assert.ok(resubscribed.has(n) && resubscribed.has(glob), env.origin.describe());
  });
});

test('clients see no removals when the upstream restarts', T, async () => {
  await withRelay({}, async (env) => {
    const { n, member, c } = await restartSetup(env);
    // Sentinel after the resubscription.
    env.origin.setResource(LISTENER, n, 'single-2', 'v2');
    await c.waitForVersion(LISTENER, n, 'v2', 10_000);
    assert.deepEqual(c.removed, [], c.describe());
    assert.equal(c.held(LISTENER).get(member), 'v1');
    assert.equal(c.status, undefined);
    assert.deepEqual(c.received(LISTENER, member).map((r) => r.version), ['v1'], 'no duplicate delivery');
  });
});

test('updates flow after an upstream restart', T, async () => {
  await withRelay({}, async (env) => {
    const { n, c } = await restartSetup(env);
    env.origin.setResource(LISTENER, n, 'single-2', 'v2');
    env.origin.setResource(LISTENER, L('restart-glob/m2'), 'm2', 'v1');
    await c.waitForVersion(LISTENER, n, 'v2', 10_000);
    await c.waitForVersion(LISTENER, L('restart-glob/m2'), 'v1', 10_000);
  });
});

// ------------------------------------------------------------ slow client

test('a slow client does not hold back others and later gets the latest versions coalesced', { timeout: 60_000 }, async (t) => {
  await withRelay({}, async ({ origin, client }) => {
    const names = Array.from({ length: 5 }, (_, i) => L(`slow/n${i}`));
    const payload = (name: string, v: number): Buffer =>
      Buffer.alloc(32 * 1024, `${name}@${v};`);
    for (const n of names) origin.setResource(LISTENER, n, payload(n, 0), 'v0');
    const fast = client();
    const slow = client();
    fast.subscribe(LISTENER, names);
    slow.subscribe(LISTENER, names);
    await fast.waitFor(() => fast.held(LISTENER).size === names.length, 'fast holds all');
    await slow.waitFor(() => slow.held(LISTENER).size === names.length, 'slow holds all');

    slow.pause();
    const VERSIONS = 40;
    for (let v = 1; v <= VERSIONS; v++) {
      for (const n of names) {
        origin.setResource(LISTENER, n, payload(n, v), `v${v}`);
        // Lockstep: the fast client must get every single version while the
        // slow one is not reading at all.
        await fast.waitForVersion(LISTENER, n, `v${v}`);
      }
    }
    for (const n of names) {
      assert.deepEqual(
        fast.received(LISTENER, n).map((r) => r.version),
        Array.from({ length: VERSIONS + 1 }, (_, i) => `v${i}`),
      );
    }

    slow.resume();
    await slow.waitFor(
      () => names.every((n) => slow.held(LISTENER).get(n) === `v${VERSIONS}`),
      'slow client at the latest versions',
      15_000,
    );
    for (const n of names) {
      assert.deepEqual(Buffer.from(slow.resource(LISTENER, n)!.resource!.value), payload(n, VERSIONS));
    }
    const delivered = slow.received(LISTENER).filter((r) => r.version !== 'v0').length;
    const updates = VERSIONS * names.length;
    t.diagnostic(`slow client received ${delivered} of ${updates} intermediate updates`);
    assert.ok(
      delivered < updates / 2,
      `slow client got ${delivered} of ${updates} intermediate updates; expected them coalesced`,
    );
    assertWellFormed(fast, slow);
  });
});
