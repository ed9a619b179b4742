/**
 * What the relay does with the Resource envelope: TTLs and heartbeats,
 * do_not_cache, and opaque payload bytes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withRelay } from './support/relay-fixture';
import { LISTENER, TTL_FEATURE, keyOf, xdstp } from './support/names';
import { assertWellFormed } from './support/assertions';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

test('the ttl field reaches only clients that support resource TTL', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n = L('ttl/one');
    origin.setResource(LISTENER, n, 'x', 'v1', { ttl: 60 });
    const aware = client({ clientFeatures: [TTL_FEATURE] });
    const plain = client();
    aware.subscribe(LISTENER, [n]);
    plain.subscribe(LISTENER, [n]);
    await aware.waitForVersion(LISTENER, n, 'v1');
    await plain.waitForVersion(LISTENER, n, 'v1');

    assert.equal(Number(aware.resource(LISTENER, n)!.ttl?.seconds ?? 0), 60, aware.describe());
    assert.equal(plain.resource(LISTENER, n)!.ttl, undefined, plain.describe());
    assertWellFormed(aware, plain);
  });
});

test('heartbeats reach only clients that support resource TTL', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n = L('ttl/one');
    const sentinel = L('ttl/sentinel');
    origin.setResource(LISTENER, n, 'x', 'v1', { ttl: 60 });
    origin.setResource(LISTENER, sentinel, 's', 'v1');
    const aware = client({ clientFeatures: [TTL_FEATURE] });
    const plain = client();
    aware.subscribe(LISTENER, [n, sentinel]);
    plain.subscribe(LISTENER, [n, sentinel]);
    await aware.waitFor(() => aware.held(LISTENER).size === 2, 'both');
    await plain.waitFor(() => plain.held(LISTENER).size === 2, 'both');

    origin.heartbeat(LISTENER, n);
    await aware.waitFor(() => aware.received(LISTENER, n).some((r) => !r.resource), 'a heartbeat');
    origin.setResource(LISTENER, sentinel, 's2', 'v2');
    await plain.waitForVersion(LISTENER, sentinel, 'v2');

    const hb = aware.received(LISTENER, n).find((r) => !r.resource)!;
    assert.equal(hb.version, 'v1');
    assert.deepEqual(plain.received(LISTENER, n).map((r) => r.version), ['v1'], plain.describe());
    assert.ok(plain.received(LISTENER, n).every((r) => r.resource), 'no heartbeat for a client without TTL support');
    assert.equal(plain.held(LISTENER).get(n), 'v1');
    assertWellFormed(aware, plain);
  });
});

test('no heartbeat is sent for a glob member', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const member = L('ttl-glob/m1');
    const sentinel = L('ttl/sentinel');
    origin.setResource(LISTENER, member, 'm', 'v1', { ttl: 60 });
    origin.setResource(LISTENER, sentinel, 's', 'v1');
    const aware = client({ clientFeatures: [TTL_FEATURE] });
    aware.subscribe(LISTENER, [L('ttl-glob/*'), sentinel]);
    await aware.waitForVersion(LISTENER, member, 'v1');
    await aware.waitForVersion(LISTENER, sentinel, 'v1');

    origin.heartbeat(LISTENER, member);
    origin.setResource(LISTENER, sentinel, 's2', 'v2');
    await aware.waitForVersion(LISTENER, sentinel, 'v2');

    assert.ok(
      aware.received(LISTENER, member).every((r) => r.resource),
      `heartbeat for a glob member:\n${aware.describe()}`,
    );
    assert.equal(aware.held(LISTENER).get(member), 'v1');
  });
});

test('a do_not_cache resource is delivered but a later subscriber is not served from cache', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n = L('nocache/one');
    origin.setResource(LISTENER, n, 'fresh', 'v1', { doNotCache: true });
    const a = client();
    a.subscribe(LISTENER, [n]);
    await a.waitForVersion(LISTENER, n, 'v1');
    await origin.waitSettled();
    const before = origin.requests.length;

    const b = client();
    b.subscribe(LISTENER, [n]);
    await b.waitForVersion(LISTENER, n, 'v1');

    assert.deepEqual(Buffer.from(a.resource(LISTENER, n)!.resource!.value), Buffer.from('fresh'));
    assert.deepEqual(Buffer.from(b.resource(LISTENER, n)!.resource!.value), Buffer.from('fresh'));
    assert.ok(
      origin.requests.slice(before).some((r) => r.subscribe.some((x) => keyOf(x) === n)),
      `expected an upstream request for ${n} after the second subscriber\n${origin.describe()}`,
    );
    assertWellFormed(a, b);
  });
});

test('payload bytes pass through untouched', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    // Not a valid protobuf message: a length-delimited field claiming 255
    // bytes, then every byte value.
    const weird = Buffer.concat([
      Buffer.from([0x0a, 0xff, 0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
      Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
    ]);
    const single = L('bytes/single');
    const member = L('bytes-glob/m1');
    origin.setResource(LISTENER, single, weird, 'v1');
    origin.setResource(LISTENER, member, Buffer.from(weird).reverse(), 'v1');
    const a = client();
    a.subscribe(LISTENER, [single, L('bytes-glob/*')]);
    await a.waitForVersion(LISTENER, single, 'v1');
    await a.waitForVersion(LISTENER, member, 'v1');
    // Served from the cache to a second client, too.
    const b = client();
    b.subscribe(LISTENER, [single, L('bytes-glob/*')]);
    await b.waitForVersion(LISTENER, single, 'v1');
    await b.waitForVersion(LISTENER, member, 'v1');

    for (const c of [a, b]) {
      const s = c.resource(LISTENER, single)!.resource!;
      const m = c.resource(LISTENER, member)!.resource!;
      assert.equal(s.type_url, LISTENER);
      assert.equal(m.type_url, LISTENER);
      assert.ok(Buffer.from(s.value).equals(weird), 'singleton bytes differ');
      assert.ok(Buffer.from(m.value).equals(Buffer.from(weird).reverse()), 'member bytes differ');
    }
  });
});
