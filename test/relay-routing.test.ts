/**
 * Routing names to upstreams: authorities, unknown/malformed names, legacy
 * names and the default upstream, and what the relay refuses to forward.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withRelay } from './support/relay-fixture';
import { makeResource } from './support/origin';
import { CLUSTER, LISTENER, LISTENER_COLLECTION, authorityOf, isXdstp, xdstp } from './support/names';
import { assertWellFormed, receivedNames, sorted } from './support/assertions';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const LB = (rest: string): string => xdstp('b', LISTENER, rest);

test("each authority's origin only sees its own authority's names", T, async () => {
  await withRelay({ authorities: ['a', 'b'] }, async ({ origins, client }) => {
    const [oa, ob] = [origins.a!, origins.b!];
    oa.setResource(LISTENER, L('x'), 'ax', 'v1');
    ob.setResource(LISTENER, LB('y'), 'by', 'v1');
    ob.setResource(LISTENER, LB('g/m'), 'bm', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('x'), LB('y'), LB('g/*')]);
    await c.waitForVersion(LISTENER, L('x'), 'v1');
    await c.waitForVersion(LISTENER, LB('y'), 'v1');
    await c.waitForVersion(LISTENER, LB('g/m'), 'v1');
    ob.setResource(LISTENER, LB('y'), 'by2', 'v2');
    await c.waitForVersion(LISTENER, LB('y'), 'v2');

    assert.ok(oa.everSubscribed().length > 0 && ob.everSubscribed().length > 0);
    assert.deepEqual(oa.everSubscribed().filter((n) => authorityOf(n) !== 'a'), [], oa.describe());
    assert.deepEqual(ob.everSubscribed().filter((n) => authorityOf(n) !== 'b'), [], ob.describe());
    assert.deepEqual(sorted(oa.subscribedKeys()), [L('x')]);
    assert.deepEqual(sorted(ob.subscribedKeys()), sorted([LB('y'), LB('g/*')]));
    assertWellFormed(c);
  });
});

test('an unknown authority is returned in removed_resources and the stream keeps working', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const good = L('good');
    const unknown = xdstp('zzz', LISTENER, 'foo');
    origin.setResource(LISTENER, good, 'good', 'v1');
    const c = client();
    c.subscribe(LISTENER, [unknown, good]);
    await c.waitForRemoved(LISTENER, unknown);
    await c.waitForVersion(LISTENER, good, 'v1');
    origin.setResource(LISTENER, good, 'good2', 'v2');
    await c.waitForVersion(LISTENER, good, 'v2');

    assert.equal(c.status, undefined);
    assert.deepEqual(origin.everSubscribed().filter((n) => n.includes('zzz')), []);
    assertWellFormed(c);
  });
});

test('a malformed xdstp name is returned in removed_resources and the stream keeps working', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const good = L('good');
    const malformed = 'xdstp://a';
    origin.setResource(LISTENER, good, 'good', 'v1');
    const c = client();
    c.subscribe(LISTENER, [malformed, good]);
    await c.waitForRemoved(LISTENER, malformed);
    await c.waitForVersion(LISTENER, good, 'v1');
    origin.setResource(LISTENER, good, 'good2', 'v2');
    await c.waitForVersion(LISTENER, good, 'v2');

    assert.equal(c.status, undefined);
    assert.deepEqual(origin.everSubscribed().filter((n) => n === malformed), []);
    assertWellFormed(c);
  });
});

test('a non-xdstp name without a default upstream is returned in removed_resources', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const good = L('good');
    origin.setResource(LISTENER, good, 'good', 'v1');
    const c = client();
    c.subscribe(LISTENER, ['legacy-listener', good]);
    await c.waitForRemoved(LISTENER, 'legacy-listener');
    await c.waitForVersion(LISTENER, good, 'v1');
    origin.setResource(LISTENER, good, 'good2', 'v2');
    await c.waitForVersion(LISTENER, good, 'v2');

    assert.equal(c.status, undefined);
    assert.deepEqual(origin.everSubscribed().filter((n) => !isXdstp(n)), []);
  });
});

test('a non-xdstp name is routed to the default upstream', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ origin, defaultOrigin, client }) => {
    const legacy = defaultOrigin!;
    legacy.setResource(CLUSTER, 'legacy-cluster', 'lc', 'v1');
    origin.setResource(CLUSTER, xdstp('a', CLUSTER, 'c1'), 'c1', 'v1');
    const c = client();
    c.subscribe(CLUSTER, ['legacy-cluster', xdstp('a', CLUSTER, 'c1')]);
    await c.waitForVersion(CLUSTER, 'legacy-cluster', 'v1');
    await c.waitForVersion(CLUSTER, xdstp('a', CLUSTER, 'c1'), 'v1');
    legacy.setResource(CLUSTER, 'legacy-cluster', 'lc2', 'v2');
    await c.waitForVersion(CLUSTER, 'legacy-cluster', 'v2');

    assert.deepEqual(legacy.everSubscribed(), ['legacy-cluster'], legacy.describe());
    assert.deepEqual(origin.everSubscribed(), [xdstp('a', CLUSTER, 'c1')], origin.describe());
    assertWellFormed(c);
  });
});

test('a legacy wildcard request with no names receives every legacy resource of the type', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ origin, defaultOrigin, client }) => {
    const legacy = defaultOrigin!;
    legacy.setResource(LISTENER, 'legacy-1', 'l1', 'v1');
    legacy.setResource(LISTENER, 'legacy-2', 'l2', 'v1');
    legacy.setResource(CLUSTER, 'legacy-cluster', 'c', 'v1');
    origin.setResource(LISTENER, L('x'), 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, []);
    await c.waitFor(() => c.held(LISTENER).size === 2, 'both legacy listeners');
    legacy.setResource(LISTENER, 'legacy-3', 'l3', 'v1');
    await c.waitForVersion(LISTENER, 'legacy-3', 'v1');
    legacy.removeResource(LISTENER, 'legacy-1');
    await c.waitForRemoved(LISTENER, 'legacy-1');

    assert.deepEqual(receivedNames(c, LISTENER), ['legacy-1', 'legacy-2', 'legacy-3']);
    assert.deepEqual(c.received(CLUSTER), []);
    assertWellFormed(c);
  });
});

test('a legacy wildcard "*" subscription receives every legacy resource of the type', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client }) => {
    const legacy = defaultOrigin!;
    legacy.setResource(CLUSTER, 'c-1', 'c1', 'v1');
    legacy.setResource(CLUSTER, 'c-2', 'c2', 'v1');
    legacy.setResource(LISTENER, 'listener-1', 'l', 'v1');
    const c = client();
    c.subscribe(CLUSTER, ['*']);
    await c.waitFor(() => c.held(CLUSTER).size === 2, 'both legacy clusters');
    legacy.setResource(CLUSTER, 'c-3', 'c3', 'v1');
    await c.waitForVersion(CLUSTER, 'c-3', 'v1');

    assert.deepEqual(receivedNames(c, CLUSTER), ['c-1', 'c-2', 'c-3']);
    assert.deepEqual(c.received(LISTENER), []);
    assertWellFormed(c);
  });
});

test('a resource of a foreign authority sent by an upstream is not delivered', T, async () => {
  await withRelay({ authorities: ['a', 'b'] }, async ({ origins, client }) => {
    const [oa, ob] = [origins.a!, origins.b!];
    const foreign = LB('foo');
    const sentinel = L('sentinel');
    oa.setResource(LISTENER, sentinel, 's', 'v1');
    const c = client();
    c.subscribe(LISTENER, [foreign, sentinel]);
    await c.waitForRemoved(LISTENER, foreign); // b has no such resource
    await c.waitForVersion(LISTENER, sentinel, 'v1');
    await oa.waitSettled();

    // Origin a pretends to speak for authority b.
    oa.injectRaw(LISTENER, [makeResource(LISTENER, foreign, 'forged', 'v9')]);
    oa.setResource(LISTENER, sentinel, 's2', 'v2');
    await c.waitForVersion(LISTENER, sentinel, 'v2');
    // A newcomer must not be served the forged resource from a cache either.
    const d = client();
    d.subscribe(LISTENER, [foreign]);
    await d.waitForRemoved(LISTENER, foreign);

    assert.deepEqual(c.received(LISTENER, foreign), [], c.describe());
    assert.deepEqual(d.received(LISTENER, foreign), [], d.describe());
    assert.equal(ob.getResource(LISTENER, foreign), undefined);
  });
});

test('an unsubscribed resource sent by an upstream is not delivered', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const sentinel = L('sentinel');
    const glob = L('members/*');
    origin.setResource(LISTENER, sentinel, 's', 'v1');
    origin.setResource(LISTENER, L('members/m1'), 'm1', 'v1');
    const c = client();
    const idle = client();
    c.subscribe(LISTENER, [sentinel, glob]);
    idle.subscribe(CLUSTER, [xdstp('a', CLUSTER, 'nothing')]);
    await c.waitForVersion(LISTENER, sentinel, 'v1');
    await c.waitForVersion(LISTENER, L('members/m1'), 'v1');
    await idle.waitForRemoved(CLUSTER, xdstp('a', CLUSTER, 'nothing'));
    await origin.waitSettled();

    origin.injectRaw(LISTENER, [
      makeResource(LISTENER, L('nobody'), 'n', 'v1'),
      makeResource(LISTENER, L('members/sub/deep'), 'd', 'v1'),
      makeResource(LISTENER, L('members/m2?ctx=1'), 'c', 'v1'),
    ]);
    origin.setResource(LISTENER, sentinel, 's2', 'v2');
    await c.waitForVersion(LISTENER, sentinel, 'v2');
    await idle.expectNoResponse(300);

    assert.deepEqual(receivedNames(c, LISTENER), sorted([sentinel, L('members/m1')]), c.describe());
    assert.deepEqual(idle.received(LISTENER), []);
  });
});

test('a list collection is delivered with exactly the requested name', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const name = xdstp('a', LISTENER_COLLECTION, 'foo?x=y');
    origin.setResource(LISTENER_COLLECTION, name, Buffer.from([0x0a, 0x02, 0x08, 0x01]), 'v1');
    const c = client();
    const other = client();
    c.subscribe(LISTENER_COLLECTION, [name]);
    other.subscribe(LISTENER_COLLECTION, [xdstp('a', LISTENER_COLLECTION, 'foo?x=z')]);
    await c.waitForVersion(LISTENER_COLLECTION, name, 'v1');
    await other.waitForRemoved(LISTENER_COLLECTION, xdstp('a', LISTENER_COLLECTION, 'foo?x=z'));

    const got = c.received(LISTENER_COLLECTION);
    assert.deepEqual(got.map((r) => r.name), [name]);
    assert.equal(got[0]!.resource!.type_url, LISTENER_COLLECTION);
    assert.deepEqual(Buffer.from(got[0]!.resource!.value), Buffer.from([0x0a, 0x02, 0x08, 0x01]));
    assert.deepEqual(other.received(LISTENER_COLLECTION), []);
    assertWellFormed(c, other);
  });
});
