/**
 * Subscription folding, spelling, glob matching and fan-out through the relay.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withRelay } from './support/relay-fixture';
import { makeResource } from './support/origin';
import { LISTENER, canonical, xdstp } from './support/names';
import { assertWellFormed, receivedNames, sorted } from './support/assertions';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

test('clients subscribing to the same name share one upstream subscription', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const canon = L('listeners/foo?a=1&b=2');
    origin.setResource(LISTENER, canon, 'foo', 'v1');
    const spellings = [L('listeners/foo?a=1&b=2'), L('listeners/foo?b=2&a=1'), L('listeners/foo?b=2&a=1')];
    const clients = spellings.map(() => client());
    clients.forEach((c, i) => c.subscribe(LISTENER, [spellings[i]!]));
    await Promise.all(clients.map((c, i) => c.waitForVersion(LISTENER, spellings[i]!, 'v1')));
    // A late joiner, after the name is synced.
    const late = client();
    late.subscribe(LISTENER, [L('listeners/foo?b=2&a=1')]);
    await late.waitForVersion(LISTENER, L('listeners/foo?b=2&a=1'), 'v1');

    assert.equal(origin.subscribeCount(canon), 1, origin.describe());
    assert.equal(origin.totalStreams, 1, 'one upstream stream for the authority');
    assert.deepEqual(sorted(origin.subscribedKeys(LISTENER)), [canon]);
    assertWellFormed(...clients, late);
  });
});

test("a singleton is answered with the client's own spelling", T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const canon = L('listeners/foo?a=1&b=2');
    const own = L('listeners/foo?b=2&a=1');
    origin.setResource(LISTENER, canon, 'foo', 'v1');
    const first = client();
    first.subscribe(LISTENER, [canon]);
    await first.waitForVersion(LISTENER, canon, 'v1');
    const c = client();
    c.subscribe(LISTENER, [own]);
    await c.waitForVersion(LISTENER, own, 'v1');
    origin.setResource(LISTENER, canon, 'foo2', 'v2');
    await c.waitForVersion(LISTENER, own, 'v2');
    origin.removeResource(LISTENER, canon);
    await c.waitForRemoved(LISTENER, own);

    assert.deepEqual(receivedNames(c, LISTENER), [own]);
    assert.deepEqual(c.removedNames(LISTENER), [own]);
    assert.deepEqual(receivedNames(first, LISTENER), [canon]);
    assertWellFormed(first, c);
  });
});

test('glob members are sent in canonical form', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    // The origin spells the member with its parameters out of order.
    origin.setResource(LISTENER, L('listeners/m1?b=2&a=1'), 'm1', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('listeners/*?b=2&a=1')]);
    const member = canonical(L('listeners/m1?b=2&a=1'));
    assert.equal(member, L('listeners/m1?a=1&b=2'));
    await c.waitForVersion(LISTENER, member, 'v1');
    origin.setResource(LISTENER, L('listeners/m2?b=2&a=1'), 'm2', 'v1');
    await c.waitForVersion(LISTENER, L('listeners/m2?a=1&b=2'), 'v1');

    assert.deepEqual(receivedNames(c, LISTENER), [L('listeners/m1?a=1&b=2'), L('listeners/m2?a=1&b=2')]);
    assertWellFormed(c);
  });
});

test('context parameters isolate glob subscribers', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('listeners/i1?node_type=ingress'), 'i1', 'v1');
    origin.setResource(LISTENER, L('listeners/e1?node_type=egress'), 'e1', 'v1');
    const ingress = client();
    const egress = client();
    ingress.subscribe(LISTENER, [L('listeners/*?node_type=ingress')]);
    egress.subscribe(LISTENER, [L('listeners/*?node_type=egress')]);
    await ingress.waitForVersion(LISTENER, L('listeners/i1?node_type=ingress'), 'v1');
    await egress.waitForVersion(LISTENER, L('listeners/e1?node_type=egress'), 'v1');

    origin.setResource(LISTENER, L('listeners/i2?node_type=ingress'), 'i2', 'v1');
    origin.setResource(LISTENER, L('listeners/e2?node_type=egress'), 'e2', 'v1');
    await ingress.waitForVersion(LISTENER, L('listeners/i2?node_type=ingress'), 'v1');
    await egress.waitForVersion(LISTENER, L('listeners/e2?node_type=egress'), 'v1');

    assert.deepEqual(receivedNames(ingress, LISTENER), [
      L('listeners/i1?node_type=ingress'),
      L('listeners/i2?node_type=ingress'),
    ]);
    assert.deepEqual(receivedNames(egress, LISTENER), [
      L('listeners/e1?node_type=egress'),
      L('listeners/e2?node_type=egress'),
    ]);
    assertWellFormed(ingress, egress);
  });
});

test('a member with extra context parameters does not match the glob', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('listeners/i1?node_type=ingress'), 'i1', 'v1');
    const extra = L('listeners/x?extra=1&node_type=ingress');
    const nested = L('listeners/deeper/y?node_type=ingress');
    const bare = L('listeners/z');
    origin.setResource(LISTENER, extra, 'x', 'v1');
    origin.setResource(LISTENER, nested, 'y', 'v1');
    origin.setResource(LISTENER, bare, 'z', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('listeners/*?node_type=ingress')]);
    await c.waitForVersion(LISTENER, L('listeners/i1?node_type=ingress'), 'v1');
    // Even if the upstream pushes them onto the relay's stream, they are not members.
    origin.injectRaw(LISTENER, [
      makeResource(LISTENER, extra, 'x', 'v2'),
      makeResource(LISTENER, nested, 'y', 'v2'),
      makeResource(LISTENER, bare, 'z', 'v2'),
    ]);
    origin.setResource(LISTENER, L('listeners/i1?node_type=ingress'), 'i1', 'v2');
    await c.waitForVersion(LISTENER, L('listeners/i1?node_type=ingress'), 'v2');

    assert.deepEqual(receivedNames(c, LISTENER), [L('listeners/i1?node_type=ingress')]);
    assertWellFormed(c);
  });
});

test('empty glob is reported in removed_resources', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('other/x'), 'x', 'v1');
    const glob = L('listeners/*?node_type=ingress');
    const c = client();
    c.subscribe(LISTENER, [glob]);
    await c.waitForRemoved(LISTENER, glob);
    // A second subscriber of the same (now known-empty) glob is told too.
    const d = client();
    d.subscribe(LISTENER, [glob]);
    await d.waitForRemoved(LISTENER, glob);

    assert.deepEqual(c.received(LISTENER), []);
    assert.deepEqual(d.received(LISTENER), []);
    assertWellFormed(c, d);
  });
});

test('when the last glob member goes away both the member and the glob URL are removed', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const glob = L('listeners/*');
    origin.setResource(LISTENER, L('listeners/m1'), 'm1', 'v1');
    origin.setResource(LISTENER, L('listeners/m2'), 'm2', 'v1');
    const c = client();
    c.subscribe(LISTENER, [glob]);
    await c.waitFor(() => c.held(LISTENER).size === 2, 'both members');
    origin.removeResource(LISTENER, L('listeners/m1'));
    await c.waitForRemoved(LISTENER, L('listeners/m1'));
    assert.ok(!c.removedNames(LISTENER).includes(glob), 'glob is not empty yet');
    origin.removeResource(LISTENER, L('listeners/m2'));
    await c.waitForRemoved(LISTENER, L('listeners/m2'));
    await c.waitForRemoved(LISTENER, glob);

    assert.deepEqual(sorted(c.removedNames(LISTENER)), sorted([L('listeners/m1'), L('listeners/m2'), glob]));
    assert.equal(c.held(LISTENER).size, 0);
    assertWellFormed(c);
  });
});

test('an update reaches exactly the subscribed clients', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n1 = L('listeners/one');
    const n2 = L('listeners/two');
    origin.setResource(LISTENER, n1, 'one', 'v1');
    origin.setResource(LISTENER, n2, 'two', 'v1');
    const a = client();
    const b = client();
    const other = client();
    a.subscribe(LISTENER, [n1]);
    b.subscribe(LISTENER, [n1]);
    other.subscribe(LISTENER, [n2]);
    await a.waitForVersion(LISTENER, n1, 'v1');
    await b.waitForVersion(LISTENER, n1, 'v1');
    await other.waitForVersion(LISTENER, n2, 'v1');

    origin.setResource(LISTENER, n1, 'one-2', 'v2');
    await a.waitForVersion(LISTENER, n1, 'v2');
    await b.waitForVersion(LISTENER, n1, 'v2');
    // Sentinel: a later change `other` does subscribe to.
    origin.setResource(LISTENER, n2, 'two-2', 'v2');
    await other.waitForVersion(LISTENER, n2, 'v2');

    assert.deepEqual(receivedNames(other, LISTENER), [n2]);
    assert.deepEqual(a.received(LISTENER, n1).map((r) => r.version), ['v1', 'v2']);
    assert.deepEqual(b.received(LISTENER, n1).map((r) => r.version), ['v1', 'v2']);
    assert.deepEqual(receivedNames(a, LISTENER), [n1]);
    assertWellFormed(a, b, other);
  });
});

test('a deletion reaches exactly the subscribed clients', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n1 = L('listeners/one');
    const n2 = L('listeners/two');
    origin.setResource(LISTENER, n1, 'one', 'v1');
    origin.setResource(LISTENER, n2, 'two', 'v1');
    const a = client();
    const b = client();
    const other = client();
    a.subscribe(LISTENER, [n1]);
    b.subscribe(LISTENER, [n1]);
    other.subscribe(LISTENER, [n2]);
    await a.waitForVersion(LISTENER, n1, 'v1');
    await b.waitForVersion(LISTENER, n1, 'v1');
    await other.waitForVersion(LISTENER, n2, 'v1');

    origin.removeResource(LISTENER, n1);
    await a.waitForRemoved(LISTENER, n1);
    await b.waitForRemoved(LISTENER, n1);
    origin.setResource(LISTENER, n2, 'two-2', 'v2');
    await other.waitForVersion(LISTENER, n2, 'v2');

    assert.deepEqual(other.removedNames(LISTENER), []);
    assert.deepEqual(a.removedNames(LISTENER), [n1]);
    assert.deepEqual(b.removedNames(LISTENER), [n1]);
    assert.ok(!a.received(LISTENER).some((r) => r.name === n2));
    assertWellFormed(a, b, other);
  });
});

test('a second subscriber to a synced name is served from the cache', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n = L('listeners/cached');
    origin.setResource(LISTENER, n, 'payload', 'v1');
    const a = client();
    a.subscribe(LISTENER, [n]);
    await a.waitForVersion(LISTENER, n, 'v1');
    await origin.waitSettled();
    const before = origin.requests.length;

    const b = client();
    b.subscribe(LISTENER, [n]);
    await b.waitForVersion(LISTENER, n, 'v1');
    await origin.expectNoRequest(300);

    assert.equal(origin.requests.length, before, origin.describe());
    assert.deepEqual(Buffer.from(b.resource(LISTENER, n)!.resource!.value), Buffer.from('payload'));
    assertWellFormed(a, b);
  });
});

test('a second subscriber to a synced glob is served from the cache', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const glob = L('listeners/*?node_type=ingress');
    origin.setResource(LISTENER, L('listeners/m1?node_type=ingress'), 'm1', 'v1');
    origin.setResource(LISTENER, L('listeners/m2?node_type=ingress'), 'm2', 'v1');
    const a = client();
    a.subscribe(LISTENER, [glob]);
    await a.waitFor(() => a.held(LISTENER).size === 2, 'both members');
    await origin.waitSettled();
    const before = origin.requests.length;

    const b = client();
    b.subscribe(LISTENER, [glob]);
    await b.waitFor(() => b.held(LISTENER).size === 2, 'both members');
    await origin.expectNoRequest(300);

    assert.equal(origin.requests.length, before, origin.describe());
    assertWellFormed(a, b);
  });
});

test('subscriptions of many clients connecting at once are batched upstream', T, async (t) => {
  await withRelay({}, async ({ origin, client }) => {
    const N = 50;
    const names = Array.from({ length: N }, (_, i) => L(`batch/n${i}`));
    for (const n of names) origin.setResource(LISTENER, n, n, 'v1');
    const clients = names.map(() => client());
    // All connected first, then every subscription in the same tick.
    await Promise.all(clients.map((c) => c.waitForReady()));
    clients.forEach((c, i) => c.subscribe(LISTENER, [names[i]!]));
    await Promise.all(clients.map((c, i) => c.waitForVersion(LISTENER, names[i]!, 'v1', 10_000)));

    const subscribing = origin.requests.filter((r) => r.subscribe.length > 0);
    t.diagnostic(`${N} clients → ${subscribing.length} upstream subscribe requests`);
    assert.ok(
      subscribing.length <= 5,
      `expected at most 5 upstream subscribe requests for ${N} clients, got ${subscribing.length}\n${origin.describe()}`,
    );
    assert.deepEqual(sorted(origin.subscribedKeys(LISTENER)), sorted(names));
    for (const n of names) assert.equal(origin.subscribeCount(n), 1, n);
  });
});

test('nonces are unique within a stream', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const names = [L('nonce/a'), L('nonce/b'), L('nonce/c')];
    for (const n of names) origin.setResource(LISTENER, n, n, 'v1');
    origin.setResource(LISTENER, L('nonce-glob/m'), 'm', 'v1');
    const c = client();
    for (const n of names) {
      c.subscribe(LISTENER, [n]);
      await c.waitForVersion(LISTENER, n, 'v1');
    }
    c.subscribe(LISTENER, [L('nonce-glob/*'), L('nonce/missing')]);
    await c.waitForRemoved(LISTENER, L('nonce/missing'));
    for (let v = 2; v <= 6; v++) {
      origin.setResource(LISTENER, names[v % 3]!, `p${v}`, `v${v}`);
      await c.waitForVersion(LISTENER, names[v % 3]!, `v${v}`);
    }
    origin.removeResource(LISTENER, names[0]!);
    await c.waitForRemoved(LISTENER, names[0]!);

    const nonces = c.responses.map((r) => r.nonce ?? '');
    assert.ok(nonces.length >= 9, c.describe());
    assert.ok(nonces.every((n) => n !== ''), 'every response has a nonce');
    assert.equal(new Set(nonces).size, nonces.length, `duplicate nonce in ${nonces.join(',')}`);
    assertWellFormed(c);
  });
});

test('a resource covered by both a singleton and a glob subscription is sent once per response', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const member = L('both/m1');
    origin.setResource(LISTENER, member, 'm1', 'v1');
    const c = client();
    c.subscribe(LISTENER, [member, L('both/*')]);
    await c.waitForVersion(LISTENER, member, 'v1');
    origin.setResource(LISTENER, member, 'm1b', 'v2');
    await c.waitForVersion(LISTENER, member, 'v2');
    // Unsubscribing the glob keeps the member the client also named.
    c.unsubscribe(LISTENER, [L('both/*')]);
    origin.setResource(LISTENER, member, 'm1c', 'v3');
    await c.waitForVersion(LISTENER, member, 'v3');
    assertWellFormed(c);
    assert.deepEqual(c.received(LISTENER, member).map((r) => r.version), ['v1', 'v2', 'v3']);
  });
});
