/**
 * Self-test of the test harness: the test origin, driven directly by the test
 * delta client (no relay). If these fail, the relay tests cannot be trusted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { DeltaClient } from './support/delta-client';
import { TestOrigin, makeResource } from './support/origin';
import { LISTENER, canonical, globKeyOf, matchesGlob, xdstp } from './support/names';

const L = (rest: string): string => xdstp('a', LISTENER, rest);

async function withOrigin(body: (origin: TestOrigin, client: (o?: object) => DeltaClient) => Promise<void>): Promise<void> {
  const origin = await TestOrigin.start();
  const clients: DeltaClient[] = [];
  try {
    await body(origin, (o = {}) => {
      const c = new DeltaClient(origin.address, { nodeId: `h${clients.length}`, ...o });
      clients.push(c);
      return c;
    });
  } finally {
    for (const c of clients) c.close();
    await origin.stop();
  }
}

test('harness: canonical names follow XDSTP.md examples', () => {
  assert.equal(canonical('xdstp://foo/t/bar?b=2&a=1'), 'xdstp://foo/t/bar?a=1&b=2');
  assert.equal(canonical('xdstp://%66oo/t/x'), 'xdstp://foo/t/x');
  assert.equal(canonical('xdstp://foo/t/a~b'), 'xdstp://foo/t/a%7Eb');
  assert.equal(canonical('xdstp://foo/t/%2a'), 'xdstp://foo/t/*');
  assert.equal(canonical('xdstp://foo/t/x?a.b=1&a=2'), 'xdstp://foo/t/x?a.b=1&a=2');
  assert.throws(() => canonical('xdstp://foo'), /resource type missing/);
  assert.equal(globKeyOf('xdstp://a/T/p/x?k=v'), 'xdstp://a/T/p/*?k=v');
  assert.equal(globKeyOf('xdstp://a/T/x'), 'xdstp://a/T/*');
  assert.ok(matchesGlob('xdstp://a/T/p/x?k=v', 'xdstp://a/T/p/*?k=v'));
  assert.ok(!matchesGlob('xdstp://a/T/p/x?k=v&e=1', 'xdstp://a/T/p/*?k=v'));
  assert.ok(!matchesGlob('xdstp://a/T/p/q/x?k=v', 'xdstp://a/T/p/*?k=v'));
});

test('harness: origin answers singletons, missing names, globs and empty globs', async () => {
  await withOrigin(async (origin, client) => {
    origin.setResource(LISTENER, L('one'), 'p1', 'v1');
    origin.setResource(LISTENER, L('g/m1?k=v'), 'm1', 'v1');
    origin.setResource(LISTENER, L('g/m2?k=v&x=1'), 'm2', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('one'), L('missing'), L('g/*?k=v'), L('empty/*')]);
    const r = await c.nextResponse();
    assert.deepEqual(
      (r.resources ?? []).map((x) => x.name).sort(),
      [L('g/m1?k=v'), L('one')].sort(),
    );
    assert.deepEqual((r.removed_resources ?? []).sort(), [L('empty/*'), L('missing')].sort());
    assert.equal(c.sent[0]!.node?.id, 'h0');
    await origin.waitFor(() => origin.acks.length === 1, 'ACK');
    assert.equal(origin.requests[1]!.node, undefined, 'only the first request carries node');
    assert.deepEqual(c.violations, []);
  });
});

test('harness: origin pushes updates and removals; last glob member removal reports the glob', async () => {
  await withOrigin(async (origin, client) => {
    origin.setResource(LISTENER, L('g/m1'), 'm1', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('g/*')]);
    await c.waitForVersion(LISTENER, L('g/m1'), 'v1');
    origin.setResource(LISTENER, L('g/m1'), 'm1b', 'v2');
    await c.waitForVersion(LISTENER, L('g/m1'), 'v2');
    origin.setResource(LISTENER, L('g/m1'), 'm1b', 'v2'); // same version: nothing
    origin.removeResource(LISTENER, L('g/m1'));
    await c.waitForRemoved(LISTENER, L('g/*'));
    assert.deepEqual(c.removedNames(LISTENER), [L('g/m1'), L('g/*')]);
    assert.equal(c.received(LISTENER, L('g/m1')).length, 2);
  });
});

test('harness: origin honours initial_resource_versions and resends on re-subscribe', async () => {
  await withOrigin(async (origin, client) => {
    origin.setResource(LISTENER, L('x'), 'x', 'v1');
    origin.setResource(LISTENER, L('y'), 'y', 'v2');
    const c = client();
    c.subscribe(LISTENER, [L('x'), L('y'), L('z')], {
      initialVersions: { [L('x')]: 'v1', [L('y')]: 'v1', [L('z')]: 'v1' },
    });
    const r = await c.nextResponse();
    assert.deepEqual((r.resources ?? []).map((x) => `${x.name}@${x.version}`), [`${L('y')}@v2`]);
    assert.deepEqual(r.removed_resources, [L('z')]);
    c.unsubscribe(LISTENER, [L('x')]);
    c.subscribe(LISTENER, [L('x')]);
    const r2 = await c.nextResponse();
    assert.deepEqual((r2.resources ?? []).map((x) => x.name), [L('x')]);
    assert.equal(origin.subscribeCount(L('x')), 2);
    assert.equal(origin.unsubscribeCount(L('x')), 1);
    assert.deepEqual([...origin.subscribedNames(LISTENER)].sort(), [L('x'), L('y'), L('z')].sort());
  });
});

test('harness: heartbeats, TTL, do_not_cache, injectRaw and NACK recording', async () => {
  await withOrigin(async (origin, client) => {
    origin.setResource(LISTENER, L('t'), Buffer.from([0xff, 0x00, 0x01]), 'v1', { ttl: 30, doNotCache: true });
    const c = client({ reject: (r: { resources?: { name?: string }[] }) => (r.resources?.some((x) => x.name === L('bad')) ? 'nope' : undefined) });
    c.subscribe(LISTENER, [L('t')]);
    await c.waitForVersion(LISTENER, L('t'), 'v1');
    const res = c.resource(LISTENER, L('t'))!;
    assert.equal(Number(res.ttl?.seconds), 30);
    assert.equal(res.cache_control?.do_not_cache, true);
    assert.deepEqual(Buffer.from(res.resource!.value), Buffer.from([0xff, 0x00, 0x01]));
    origin.heartbeat(LISTENER, L('t'));
    await c.waitFor(() => c.received(LISTENER, L('t')).some((r) => !r.resource), 'heartbeat');
    origin.injectRaw(LISTENER, [makeResource(LISTENER, L('bad'), 'b', 'v1')]);
    await origin.waitFor(() => origin.nacks.length === 1, 'NACK');
    assert.equal(origin.nacks[0]!.message, 'nope');
    assert.equal(c.held(LISTENER).has(L('bad')), false);
  });
});

test('harness: legacy wildcard gets every legacy resource of the type', async () => {
  await withOrigin(async (origin, client) => {
    origin.setResource(LISTENER, 'legacy-1', 'l1', 'v1');
    origin.setResource(LISTENER, 'legacy-2', 'l2', 'v1');
    origin.setResource(LISTENER, L('x'), 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, []);
    await c.waitFor(() => c.held(LISTENER).size === 2, 'two legacy listeners');
    assert.deepEqual([...c.held(LISTENER).keys()].sort(), ['legacy-1', 'legacy-2']);
    origin.setResource(LISTENER, 'legacy-3', 'l3', 'v1');
    await c.waitForVersion(LISTENER, 'legacy-3', 'v1');
  });
});

test('harness: bad requests end the stream with INVALID_ARGUMENT', async () => {
  await withOrigin(async (_origin, client) => {
    const c = client();
    c.send({ resource_names_subscribe: [L('x')] });
    const st = await c.waitForEnd();
    assert.equal(st.code, grpc.status.INVALID_ARGUMENT);
    const d = client();
    d.sendRaw(Buffer.from([0xff, 0xff, 0xff, 0xff]));
    assert.equal((await d.waitForEnd()).code, grpc.status.INVALID_ARGUMENT);
  });
});

test('harness: restart keeps resources and the port; a new stream works', async () => {
  await withOrigin(async (origin, client) => {
    origin.setResource(LISTENER, L('r'), 'r', 'v1');
    const port = origin.port;
    const c = client();
    c.subscribe(LISTENER, [L('r')]);
    await c.waitForVersion(LISTENER, L('r'), 'v1');
    await origin.restart();
    assert.equal(origin.port, port);
    const st = await c.waitForEnd();
    assert.notEqual(st.code, grpc.status.OK);
    const d = client();
    d.subscribe(LISTENER, [L('r')], { initialVersions: { [L('r')]: 'v1' } });
    await origin.waitFor(() => origin.totalStreams === 2 && origin.requests.some((r) => r.streamId === 2), 'second stream');
    origin.setResource(LISTENER, L('r'), 'r2', 'v2');
    await d.waitForVersion(LISTENER, L('r'), 'v2');
    assert.equal(d.received(LISTENER, L('r')).length, 1);
  });
});
