/**
 * The upstream side as a control plane sees it and as clients feel it, over
 * real gRPC: responses Envoy would reject are NACKed and never reach clients,
 * newer response fields are read, requests stay within the control plane's
 * receive limit, a name the control plane cannot take is isolated, and a
 * control plane that keeps failing is retried at the backoff rate.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createLogger } from '../src/log';
import { RelayMetrics } from '../src/metrics';
import type { UpstreamPort } from '../src/upstream/types';
import { lenField, stringField } from '../src/proto/wire';
import { GrpcUpstream } from '../src/upstream/grpc-upstream';
import type { UpstreamSink, UpstreamUpdate } from '../src/upstream/types';
import { metricValue, withAdminRelay, type AdminRelayEnv } from './support/admin';
import { assertWellFormed } from './support/assertions';
import { CapturedLog } from './support/files';
import { CLUSTER, LISTENER, keyOf, xdstp } from './support/names';
import { TestOrigin, makeResource } from './support/origin';
import { sleep, waitUntil } from './support/wait';

const T = { timeout: 30_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const MiB = 1024 * 1024;

function withRelay(body: (env: AdminRelayEnv, log: CapturedLog) => Promise<void>): Promise<void> {
  const log = new CapturedLog('info');
  return withAdminRelay({ options: { logger: log.logger } }, (env) => body(env, log));
}

// ------------------------------------------------------------ responses Envoy would NACK

/**
 * A client holds `held` (two names at v1); the origin then sends `inject`.
 * The relay must NACK it with a message matching `why`, forward nothing of
 * it, count it under `reason` and log a warning; a later good update still
 * flows.
 */
async function expectNacked(
  reason: string,
  why: RegExp,
  inject: (origin: TestOrigin, names: { x: string; y: string }) => void,
): Promise<void> {
  await withRelay(async ({ origin, client, scrape }, log) => {
    const names = { x: L(`nack-${reason}/x`), y: L(`nack-${reason}/y`) };
    origin.setResource(LISTENER, names.x, 'x1', 'v1');
    origin.setResource(LISTENER, names.y, 'y1', 'v1');
    const c = client();
    c.subscribe(LISTENER, [names.x, names.y]);
    await c.waitFor(() => c.held(LISTENER).size === 2, 'both names held');
    await origin.waitSettled();

    inject(origin, names);
    const nack = await origin.waitFor(() => origin.nacks[0], 'a NACK from the relay');
    assert.match(nack.message ?? '', why);
    await c.expectNoResponse(300);
    assert.deepEqual(Object.fromEntries(c.held(LISTENER)), { [names.x]: 'v1', [names.y]: 'v1' });
    assert.equal(metricValue(await scrape(), 'xdstp_relay_upstream_nacks_total', { authority: 'a', reason }), 1);
    const warning = log.find((l) => l.msg?.startsWith('upstream response rejected') === true);
    assert.ok(warning && warning.level === 40 && warning.reason === reason, JSON.stringify(warning));

    // The stream and the previous state stay in use.
    origin.setResource(LISTENER, names.y, 'y3', 'v3');
    await c.waitForVersion(LISTENER, names.y, 'v3');
    assert.equal(c.held(LISTENER).get(names.x), 'v1');
    assertWellFormed(c);
  });
}

test('a response naming one resource twice is NACKed and clients keep what they had', T, () =>
  expectNacked('duplicate_name', /more than once/, (origin, { x, y }) =>
    origin.injectRaw(LISTENER, [makeResource(LISTENER, y, 'y2', 'v2'), makeResource(LISTENER, x, 'x2', 'v2'), makeResource(LISTENER, x, 'x3', 'v3')]),
  ),
);

test('a response that both updates and removes one name is NACKed and clients keep what they had', T, () =>
  expectNacked('added_and_removed', /both in resources and removed/, (origin, { x, y }) =>
    origin.injectRaw(LISTENER, [makeResource(LISTENER, y, 'y2', 'v2'), makeResource(LISTENER, x, 'x2', 'v2')], [x]),
  ),
);

test('a response carrying a resource of another type is NACKed and clients keep what they had', T, () =>
  expectNacked('type_mismatch', /envoy\.config\.cluster\.v3\.Cluster/, (origin, { x, y }) =>
    origin.injectRaw(LISTENER, [makeResource(LISTENER, y, 'y2', 'v2'), makeResource(CLUSTER, x, 'x2', 'v2')]),
  ),
);

test('a response with an undecodable Resource is NACKed and clients keep what they had', T, () =>
  expectNacked('undecodable', /not a decodable Resource/, (origin, { y }) => {
    const good = lenField(2, Buffer.concat([stringField(1, 'v2'), stringField(3, y)]));
    const broken = lenField(2, Buffer.from([0x1a, 0x7f, 0x78])); // name claims 127 bytes, has 1
    origin.injectEncoded(LISTENER, 'bad-1', Buffer.concat([good, broken, stringField(4, LISTENER), stringField(5, 'bad-1')]));
  }),
);

// ------------------------------------------------------------ newer response fields

test('removed_resource_names from the control plane remove the resource for its clients', T, async () => {
  await withRelay(async ({ origin, client }) => {
    const n = L('newer/removed-by-name');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    origin.injectRaw(LISTENER, [], [], { removedResourceNames: [n] });
    await c.waitForRemoved(LISTENER, n);
    assert.equal(c.held(LISTENER).has(n), false);
    assertWellFormed(c);
  });
});

test('a NOT_FOUND resource error from the control plane reaches the client as a removal', T, async () => {
  await withRelay(async ({ origin, client }) => {
    const n = L('newer/not-found');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    origin.injectRaw(LISTENER, [], [], { resourceErrors: [{ name: n, code: 5, message: 'deleted' }] });
    await c.waitForRemoved(LISTENER, n);
    assertWellFormed(c);
  });
});

/** A sink that keeps what the upstream hands over (the relay's engine is tested through clients elsewhere). */
class RecordingSink implements UpstreamSink {
  readonly updates: UpstreamUpdate[] = [];
  readonly rejected: Array<{ typeUrl: string; names: string[] }> = [];
  readonly events = new EventEmitter();
  onResponse(_u: UpstreamPort, update: UpstreamUpdate): void {
    this.updates.push(update);
    this.events.emit('change');
  }
  versionsFor(): Record<string, string> {
    return {};
  }
  hasServed(): boolean {
    return false;
  }

  onRejectedNames(_u: UpstreamPort, typeUrl: string, names: string[]): void {
    this.rejected.push({ typeUrl, names });
    this.events.emit('change');
  }
  readonly unsubscribed: string[] = [];
  onUnsubscribed(_u: UpstreamPort, _typeUrl: string, names: readonly string[]): void {
    this.unsubscribed.push(...names);
    this.events.emit('change');
  }
}

/** `body` with an upstream of authority `a` on a fresh origin of its own, and a sink recording what it hands over. */
async function withUpstream(label: string, body: (origin: TestOrigin, upstream: GrpcUpstream, sink: RecordingSink) => Promise<void>): Promise<void> {
  const origin = await TestOrigin.start({ label });
  const sink = new RecordingSink();
  const upstream = upstreamTo(origin, sink);
  try {
    await body(origin, upstream, sink);
  } finally {
    upstream.close();
    await origin.stop();
  }
}

/** An upstream of authority `a` on `origin` alone, handing what it gets to `sink`. */
function upstreamTo(origin: TestOrigin, sink: UpstreamSink): GrpcUpstream {
  return new GrpcUpstream({
    authority: 'a',
    targets: [origin.address],
    node: { id: 'upstream-test' },
    sink,
    logger: createLogger('silent'),
    metrics: new RelayMetrics({ defaultMetrics: false }),
    maxRequestBytes: 4 * 1024 * 1024,
  });
}

test('resource errors from the control plane reach the relay with their names, codes and messages', T, () =>
  withUpstream('origin-errors', async (origin, upstream, sink) => {
    const n = L('errors/flaky');
    origin.setResource(LISTENER, n, 'x', 'v1');
    upstream.start();
    upstream.subscribe(LISTENER, n);
    await waitUntil(sink.events, () => sink.updates.length === 1, { what: 'the first response' });
    origin.injectRaw(LISTENER, [], [], {
      resourceErrors: [
        { name: n, code: 14, message: 'backend unavailable' },
        { name: L('errors/gone'), code: 5, message: 'no such listener' },
      ],
    });
    const update = await waitUntil(sink.events, () => sink.updates[1], { what: 'the error response' });
    assert.deepEqual(update.errors, [
      { name: n, code: 14, message: 'backend unavailable' },
      { name: L('errors/gone'), code: 5, message: 'no such listener' },
    ]);
    assert.deepEqual(update.resources, []);
    assert.deepEqual(update.removed, []);
    await origin.waitSettled();
    assert.equal(origin.nacks.length, 0);
  }));

test('an unsubscribe is reported to the relay once it has gone out, also when a new stream starts without the name', T, () =>
  withUpstream('origin-unsubscribes', async (origin, upstream, sink) => {
    const [x, y, z] = [L('unsub/x'), L('unsub/y'), L('unsub/z')];
    for (const n of [x, y, z]) origin.setResource(LISTENER, n, n, 'v1');
    upstream.start();
    for (const n of [x, y, z]) upstream.subscribe(LISTENER, n);
    await waitUntil(sink.events, () => sink.updates.flatMap((u) => u.resources).length === 3, { what: 'the three names served' });
    assert.equal(upstream.unsubscribe(LISTENER, x), true, 'the unsubscribe goes out with the next batch');
    assert.deepEqual(sink.unsubscribed, [], 'not yet sent');
    await waitUntil(sink.events, () => sink.unsubscribed.includes(x), { what: 'x reported unsubscribed' });
    await origin.waitFor(() => !origin.subscribedNames(LISTENER).has(x), 'x unsubscribed upstream');
    await origin.stop();
    for (let i = 0; i < 250 && upstream.connected; i++) await sleep(20);
    assert.equal(upstream.connected, false, 'the upstream noticed the control plane is away');
    assert.equal(upstream.unsubscribe(LISTENER, y), true);
    await origin.restart();
    await waitUntil(sink.events, () => sink.unsubscribed.includes(y), { what: 'y reported unsubscribed as the new stream starts' });
    await origin.waitFor(() => origin.subscribedNames(LISTENER).has(z), 'z subscribed on the new stream');
    assert.ok(!origin.subscribedNames(LISTENER).has(y));
    assert.equal(upstream.unsubscribe(LISTENER, y), false, 'a name no longer subscribed has nothing to send');
  }));

test('only a response that arrives after a glob\'s subscription went out on the open stream can answer it', T, () =>
  withUpstream('origin-answers', async (origin, upstream, sink) => {
    const glob = L('answers/*');
    upstream.start();
    for (let i = 0; i < 250 && !upstream.connected; i++) await sleep(20);
    const before = process.hrtime.bigint();
    upstream.subscribe(LISTENER, glob);
    assert.equal(upstream.canAnswer(LISTENER, glob, process.hrtime.bigint()), false, 'not yet sent');
    await origin.waitFor(() => origin.subscribedNames(LISTENER).has(glob), 'the glob subscribed upstream');
    assert.equal(upstream.canAnswer(LISTENER, glob, process.hrtime.bigint()), true);
    assert.equal(upstream.canAnswer(LISTENER, glob, before), false, 'a response from before it went out');
    const beforeRestart = process.hrtime.bigint();
    await origin.restart();
    await origin.waitFor(() => origin.subscribedNames(LISTENER).has(glob), 'the glob subscribed on the new stream');
    assert.equal(upstream.canAnswer(LISTENER, glob, beforeRestart), false, 'a response of the old stream');
    assert.equal(upstream.canAnswer(LISTENER, glob, process.hrtime.bigint()), true);
    upstream.unsubscribe(LISTENER, glob);
    await waitUntil(sink.events, () => sink.unsubscribed.includes(glob), { what: 'the glob unsubscribed' });
    assert.equal(upstream.canAnswer(LISTENER, glob, process.hrtime.bigint()), false, 'no longer subscribed');
  }));

// ------------------------------------------------------------ request size limit

test('two clients with large subscription sets keep the authority syncing across an origin restart, every request within 4 MiB', { timeout: 120_000 }, async () => {
  await withRelay(async ({ origin, client }) => {
    // 2 × 9,000 names of ~230 bytes: each client's own request and each
    // response fit 4 MiB, but the replay (names + initial_resource_versions)
    // is about 8 MiB.
    const pad = 'p'.repeat(170);
    const sets = [0, 1].map((c) => Array.from({ length: 9000 }, (_, i) => L(`big/${pad}/c${c}-${i}`)));
    for (const set of sets) for (const n of set) origin.setResource(LISTENER, n, 'x', 'v1');
    const clients = sets.map((set) => {
      const c = client();
      c.subscribe(LISTENER, set);
      return c;
    });
    await Promise.all(clients.map((c, i) => c.waitFor(() => c.held(LISTENER).size === sets[i].length, 'every name held', 60_000)));
    const replaySize = [...sets.flat()].reduce((n, name) => n + 2 * Buffer.byteLength(name) + 8, 0);
    assert.ok(replaySize > 6 * MiB, `a replay of ${replaySize} bytes would fit the limit`);

    // A request over the limit would end the stream (RESOURCE_EXHAUSTED) before
    // the origin ever saw it: count streams, not just recorded requests.
    assert.equal(origin.totalStreams, 1, 'no stream lost while subscribing');
    const before = origin.requests.length;
    await origin.restart();
    const all = new Set(sets.flat().map(keyOf));
    await origin.waitFor(
      () => {
        // Only when the count matches is it worth canonicalising 18,000 names.
        const subscribed = origin.subscribedNames(LISTENER);
        if (subscribed.size < all.size) return false;
        const keys = new Set([...subscribed].map(keyOf));
        return [...all].every((k) => keys.has(k));
      },
      'every name subscribed again',
      60_000,
    );
    const replay = origin.requests.slice(before).filter((r) => r.subscribe.length > 0);
    assert.ok(replay.length > 1, 'the replay was split');
    assert.equal(
      replay.reduce((n, r) => n + Object.keys(r.initialVersions).length, 0),
      all.size,
      'initial_resource_versions for every held name',
    );
    assert.equal(origin.totalStreams, 2, 'one stream after the restart, never ended by a request');
    for (const r of origin.requests) assert.ok(r.bytes <= 4 * MiB, `request #${r.index} has ${r.bytes} bytes`);
    assert.ok(origin.requests.every((r) => !r.decodeError));

    // The authority keeps syncing: updates after the restart reach both clients.
    origin.setResource(LISTENER, sets[0][42], 'y', 'v2');
    origin.setResource(LISTENER, sets[1][4242], 'y', 'v2');
    await clients[0].waitForVersion(LISTENER, sets[0][42], 'v2', 20_000);
    await clients[1].waitForVersion(LISTENER, sets[1][4242], 'v2', 20_000);
    for (const c of clients) assert.equal(c.violations.length, 0, c.violations.slice(0, 3).join('; '));
  });
});

// ------------------------------------------------------------ poison names

test('a name that makes the control plane end the stream is answered removed to its clients while every other name resyncs', T, async () => {
  await withRelay(async ({ origin, client, scrape }, log) => {
    const settled = [L('poison/a'), L('poison/b')];
    const fresh = [L('poison/c'), L('poison/d'), L('poison/e')];
    const poison = L('poison/bad');
    for (const n of [...settled, ...fresh, poison]) origin.setResource(LISTENER, n, 'x', 'v1');
    origin.poisonNames.add(keyOf(poison));

    const steady = client();
    steady.subscribe(LISTENER, settled);
    await steady.waitFor(() => steady.held(LISTENER).size === 2, 'steady client synced');

    const newcomer = client();
    newcomer.subscribe(LISTENER, [...fresh, poison]);
    await newcomer.waitForRemoved(LISTENER, poison, 25_000);
    await newcomer.waitFor(() => fresh.every((n) => newcomer.held(LISTENER).get(n) === 'v1'), 'the other names', 10_000);
    assert.ok(origin.totalStreams > 1, 'the control plane did end streams');

    assert.equal(metricValue(await scrape(), 'xdstp_relay_upstream_rejected_names_total', { authority: 'a' }), 1);
    const warning = log.find((l) => Array.isArray(l.names) && (l.names as string[]).includes(poison));
    assert.ok(warning && warning.level === 40, JSON.stringify(warning));

    // Everyone else is in sync again: the last stream holds every other name and updates flow.
    await origin.waitFor(() => {
      const keys = origin.subscribedKeys(LISTENER);
      return [...settled, ...fresh].every((n) => keys.has(keyOf(n)));
    }, 'all other names subscribed');
    assert.equal(origin.subscribedKeys(LISTENER).has(keyOf(poison)), false);
    origin.setResource(LISTENER, settled[0], 'y', 'v2');
    origin.setResource(LISTENER, fresh[0], 'y', 'v2');
    await steady.waitForVersion(LISTENER, settled[0], 'v2');
    await newcomer.waitForVersion(LISTENER, fresh[0], 'v2');
    assert.equal(steady.removedNames(LISTENER).length, 0, 'the steady client lost nothing');
    assertWellFormed(steady, newcomer);
  });
});

test('a rejected name subscribed again soon is answered removed without asking the control plane', T, async () => {
  await withRelay(async ({ origin, client }) => {
    const keep = L('again/keep');
    const poison = L('again/bad');
    origin.setResource(LISTENER, keep, 'x', 'v1');
    origin.setResource(LISTENER, poison, 'x', 'v1');
    origin.poisonNames.add(keyOf(poison));
    const first = client();
    first.subscribe(LISTENER, [keep, poison]);
    await first.waitForRemoved(LISTENER, poison, 25_000);
    await origin.waitFor(() => origin.streamCount === 1 && origin.subscribedKeys(LISTENER).has(keyOf(keep)), 'resynced without it');
    first.close();

    const asked = origin.subscribeCount(poison);
    const streams = origin.totalStreams;
    const second = client();
    second.subscribe(LISTENER, [poison]);
    await second.waitForRemoved(LISTENER, poison);
    await origin.expectNoRequest(300, (r) => r.subscribe.some((n) => keyOf(n) === keyOf(poison)));
    assert.equal(origin.subscribeCount(poison), asked);
    assert.equal(origin.totalStreams, streams, 'no stream was lost to it');
  });
});

// ------------------------------------------------------------ backoff

test('a control plane that accepts and then fails every stream is retried at the backoff rate, and no name is given up on', T, async () => {
  await withRelay(async ({ origin, client, scrape }) => {
    const n = L('backoff/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');

    origin.failNewStreams = true;
    await origin.restart();
    const from = origin.totalStreams;
    await sleep(3000);
    const attempts = origin.totalStreams - from;
    // Backoff 250 ms, doubling (±20 %): about 3 attempts in 3 s. Resetting it
    // on every accepted stream would retry every ~250 ms, 10 times or more.
    assert.ok(attempts >= 2, `still retrying (${attempts} attempts)`);
    assert.ok(attempts <= 6, `${attempts} connection attempts in 3 s`);
    const opens = origin.streamOpenTimes.slice(from);
    const gaps = opens.slice(1).map((t, i) => t - opens[i]);
    assert.ok(gaps.length >= 1 && gaps[gaps.length - 1] > gaps[0], `gaps grow: ${gaps.join(', ')} ms`);

    assert.equal(c.removedNames(LISTENER).length, 0, 'a failing control plane is no evidence against a name');
    assert.equal(metricValue(await scrape(), 'xdstp_relay_upstream_rejected_names_total', { authority: 'a' }), 0);
  });
});
