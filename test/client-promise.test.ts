/**
 * The relay's promise to each client — it holds exactly what its
 * subscriptions cover, at the control plane's current version, and is never
 * told that a live resource was removed — in the situations where the parts
 * (engine refcounts, store eviction, per-client state, the upstream's
 * poison-name search) can each be right alone and wrong together. Each test
 * is one such combination over real gRPC; test/model/ states the promise in
 * general and its checker looks for more.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withRelay } from './support/relay-fixture';
import { CLUSTER, ENDPOINT, LISTENER, xdstp } from './support/names';
import { assertWellFormed } from './support/assertions';
import { sleep } from './support/wait';
import { SotwClient, withSotwClient } from './support/sotw-client';
import type { DiscoveryResponse } from '../src/proto/messages';

const T = { timeout: 30_000 };
const E = (rest: string): string => xdstp('a', ENDPOINT, rest);
const GLOB = E('g/*');

test('a glob unsubscribed by its only client and subscribed again is sent again', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    origin.setResource(ENDPOINT, E('g/m2'), 'two', 'v1');
    const c = client();
    c.subscribe(ENDPOINT, [GLOB]);
    await c.waitForVersion(ENDPOINT, E('g/m1'), 'v1');
    await c.waitForVersion(ENDPOINT, E('g/m2'), 'v1');
    c.unsubscribe(ENDPOINT, [GLOB]);
    await origin.waitFor(() => !origin.subscribedNames(ENDPOINT).has(GLOB), 'upstream unsubscribed the glob');
    c.subscribe(ENDPOINT, [GLOB]);
    await c.waitFor(() => c.received(ENDPOINT, E('g/m1')).length === 2 && c.received(ENDPOINT, E('g/m2')).length === 2, 'both members sent again');
    assertWellFormed(c);
  });
});

test('a reconnecting client on a glob and one of its members is told a member deleted while it was away is gone', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    const c = client({ nodeId: 'returning' });
    // A new stream to a relay that does not hold the glob yet; the client held m3 before.
    c.subscribe(ENDPOINT, [GLOB, E('g/m1')], { initialVersions: { [E('g/m1')]: 'v1', [E('g/m3')]: 'v1' } });
    await c.waitForRemoved(ENDPOINT, E('g/m3'));
    assert.equal(c.held(ENDPOINT).get(E('g/m1')), 'v1');
    assert.ok(!c.removedNames(ENDPOINT).includes(E('g/m1')), 'the live member is never reported removed');
    assertWellFormed(c);
  });
});

test('a reconnecting client on a glob and one of its members keeps a listed member that still exists', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    origin.setResource(ENDPOINT, E('g/m2'), 'two', 'v2');
    const c = client({ nodeId: 'returning' });
    c.subscribe(ENDPOINT, [GLOB, E('g/m1')], { initialVersions: { [E('g/m1')]: 'v1', [E('g/m2')]: 'v1' } });
    await c.waitForVersion(ENDPOINT, E('g/m2'), 'v2');
    await sleep(300);
    assert.deepEqual(c.removedNames(ENDPOINT), [], 'nothing live is reported removed');
    assertWellFormed(c);
  });
});

test('two control-plane restarts 1.5 s apart never make the relay give up on a healthy glob', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    const first = client();
    first.subscribe(ENDPOINT, [E('g/m1')]);
    await first.waitForVersion(ENDPOINT, E('g/m1'), 'v1');
    const b = client();
    b.subscribe(ENDPOINT, [GLOB]);
    await sleep(50);
    await origin.restart();
    await sleep(1500);
    await origin.restart();
    await b.waitForVersion(ENDPOINT, E('g/m1'), 'v1', 10_000);
    await origin.waitFor(() => origin.subscribedNames(ENDPOINT).has(GLOB), 'the glob subscribed upstream again', 10_000);
    await sleep(2500);
    assert.deepEqual(b.removedNames(ENDPOINT), [], 'the glob and its member are never reported removed');
    const late = client();
    late.subscribe(ENDPOINT, [GLOB]);
    await late.waitForVersion(ENDPOINT, E('g/m1'), 'v1');
    assert.deepEqual(late.removedNames(ENDPOINT), []);
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v2');
    await b.waitForVersion(ENDPOINT, E('g/m1'), 'v2');
    assertWellFormed(b, late);
  });
});

test('a client that reconnects while the relay re-subscribes after a control-plane restart keeps its subscription upstream', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const delays = [0, 50, 150, 300, 600, 900, 1200];
    const names = delays.map((d) => E(`s${d}`));
    const absent = delays.map((d) => E(`none${d}`));
    for (const n of names) origin.setResource(ENDPOINT, n, 'x', 'v1');
    const olds = names.map((n, i) => {
      const c = client({ nodeId: `node-${i}` });
      c.subscribe(ENDPOINT, [n]);
      return c;
    });
    for (const [i, c] of olds.entries()) await c.waitForVersion(ENDPOINT, names[i], 'v1');
    await origin.restart();
    const news = await Promise.all(
      delays.map(async (d, i) => {
        await sleep(d);
        olds[i].close();
        const c = client({ nodeId: `node-${i}` });
        c.subscribe(ENDPOINT, [names[i], absent[i]], { initialVersions: { [names[i]]: 'v1' } });
        return c;
      }),
    );
    for (const [i, c] of news.entries()) await c.waitForRemoved(ENDPOINT, absent[i], 10_000);
    for (const n of names) origin.setResource(ENDPOINT, n, 'x', 'v2');
    for (const [i, c] of news.entries()) await c.waitForVersion(ENDPOINT, names[i], 'v2', 10_000);
    assertWellFormed(...news);
  });
});

test('a glob and its member by canonical name in one request, the member held under another spelling, come in one response naming it once', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const canonicalName = E('g/m1?j=2&k=1');
    origin.setResource(ENDPOINT, canonicalName, 'one', 'v1');
    const c = client();
    c.subscribe(ENDPOINT, [E('g/m1?k=1&j=2')]);
    await c.waitForVersion(ENDPOINT, E('g/m1?k=1&j=2'), 'v1');
    c.subscribe(ENDPOINT, [E('g/*?k=1&j=2'), canonicalName]);
    await c.waitForVersion(ENDPOINT, canonicalName, 'v1');
    await sleep(200);
    assertWellFormed(c);
  });
});

test('unsubscribing a name and its glob in one request sends neither back', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    const c = client();
    c.subscribe(ENDPOINT, [GLOB, E('g/m1')]);
    await c.waitForVersion(ENDPOINT, E('g/m1'), 'v1');
    const before = c.received(ENDPOINT, E('g/m1')).length;
    c.unsubscribe(ENDPOINT, [E('g/m1'), GLOB]);
    await c.expectNoResponse(400);
    assert.equal(c.received(ENDPOINT, E('g/m1')).length, before);
  });
});

test('a client that reconnects while the control plane is down gets its glob members from the cache', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m3'), 'three', 'v1');
    const c = client({ nodeId: 'returning' });
    c.subscribe(ENDPOINT, [GLOB, E('g/m1')]);
    await c.waitForVersion(ENDPOINT, E('g/m3'), 'v1');
    await c.waitForRemoved(ENDPOINT, E('g/m1'));
    await origin.stop();
    c.close();
    // Like Envoy: a new stream, glob members not listed.
    const again = client({ nodeId: 'returning' });
    again.subscribe(ENDPOINT, [E('g/m1'), GLOB]);
    await again.waitForVersion(ENDPOINT, E('g/m3'), 'v1');
    assert.ok(!again.removedNames(ENDPOINT).includes(E('g/m3')));
  });
});

test('a client subscribing ten thousand names does not hold up another client\'s update', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('x'), 'x', 'v1');
    const good = client();
    good.subscribe(ENDPOINT, [E('x')]);
    await good.waitForVersion(ENDPOINT, E('x'), 'v1');
    const big = client();
    await big.waitForReady();
    const names = Array.from({ length: 10_000 }, (_, i) => E(`none/${i}`));
    big.subscribe(ENDPOINT, names);
    // The update reaches the relay while the big request is being applied.
    await big.waitFor(() => big.removedNames(ENDPOINT).length > 0, 'the first answers to the big request');
    origin.setResource(ENDPOINT, E('x'), 'x', 'v2');
    await good.waitForVersion(ENDPOINT, E('x'), 'v2');
    const answeredBefore = big.removedNames(ENDPOINT).length;
    // All in one process here, so the slices and the update share one event loop: "before the end" is what is certain.
    assert.ok(answeredBefore < names.length, `the update went out before the big request was done (${answeredBefore} of its names answered first)`);
    await big.waitFor(() => big.removedNames(ENDPOINT).length === names.length, 'every name answered', 20_000);
    assertWellFormed(good, big);
  });
});

test('subscribing a glob sends its members again, also one the client holds by name', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    const c = client();
    c.subscribe(ENDPOINT, [E('g/m1')]);
    await c.waitForVersion(ENDPOINT, E('g/m1'), 'v1');
    c.subscribe(ENDPOINT, [GLOB]);
    await c.waitFor(() => c.received(ENDPOINT, E('g/m1')).length === 2, 'the member sent again for the new glob');
    assertWellFormed(c);
  });
});

test('a SotW client that rejected a member gets it again when it subscribes the glob', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    let rejectNext = true;
    const reject = (): string | undefined => {
      if (!rejectNext) return undefined;
      rejectNext = false;
      return 'not now';
    };
    await withSotwClient(address, { reject }, async (c) => {
      c.request(ENDPOINT, [E('g/m1')]);
      await c.waitFor(() => c.of(ENDPOINT).length === 1, 'the rejected answer');
      c.request(ENDPOINT, [E('g/m1'), GLOB]);
      await c.waitFor(() => c.of(ENDPOINT).length === 2, 'the member again');
      assert.deepEqual(SotwClient.payloads(c.of(ENDPOINT)[1]!), ['one']);
    });
  });
});

const C = (rest: string): string => xdstp('a', CLUSTER, rest);
/** A name the relay refuses at once (no such authority): its answer shows every earlier request was applied. */
const BARRIER = xdstp('zz', LISTENER, 'barrier');

test('a name subscribed and dropped before the relay asks upstream never reaches the control plane as the wildcard', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client }) => {
    const cp = defaultOrigin!;
    cp.setResource(CLUSTER, 'l1', 'one', 'v1');
    cp.setResource(CLUSTER, 'l2', 'two', 'v1');
    const c = client();
    // Both requests reach the relay before its next upstream request goes out.
    c.subscribe(CLUSTER, ['l2']);
    c.unsubscribe(CLUSTER, ['l2']);
    c.subscribe(LISTENER, [BARRIER]);
    await c.waitForRemoved(LISTENER, BARRIER);
    await sleep(200);
    assert.deepEqual([...cp.subscribedNames(CLUSTER)], [], 'nothing is subscribed upstream');
    const other = client();
    other.subscribe(CLUSTER, ['l1']);
    await other.waitForVersion(CLUSTER, 'l1', 'v1');
    await sleep(200);
    assert.deepEqual([...cp.subscribedNames(CLUSTER)], ['l1'], 'the control plane holds only what a client still wants');
    assert.deepEqual(c.received(CLUSTER), [], 'the client that dropped l2 gets no cluster');
  });
});

test('a SotW client that rejected a cluster, then lists a new name and drops it before the relay has its answer, gets the state of the world its list change asked for', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(CLUSTER, C('a'), 'one', 'v1');
    let rejected = false;
    const reject = (resp: DiscoveryResponse): string | undefined => {
      if (rejected || !SotwClient.payloads(resp).includes('two')) return undefined;
      rejected = true;
      return 'not now';
    };
    await withSotwClient(address, { reject }, async (c) => {
      c.request(CLUSTER, [C('a')]);
      await c.waitFor(() => c.of(CLUSTER).length === 1, 'the first state');
      origin.setResource(CLUSTER, C('a'), 'two', 'v2');
      await c.waitFor(() => rejected, 'the new version rejected');
      // Both requests reach the relay before it has asked the control plane about the new name.
      c.request(CLUSTER, [C('a'), C('new')]);
      c.request(CLUSTER, [C('a')]);
      const state = await c.waitFor(() => c.of(CLUSTER)[2], 'a state of the world for the changed list');
      assert.deepEqual(SotwClient.payloads(state), ['two'], 'every resource at its current version, the rejected one included');
    });
  });
});

test('a client returning with a glob its last holder just dropped is not told a member is gone when a new one appears', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m3'), 'three', 'v1');
    const holder = client();
    holder.subscribe(ENDPOINT, [GLOB]);
    await holder.waitForVersion(ENDPOINT, E('g/m3'), 'v1');
    const returning = client({ nodeId: 'returning' });
    await returning.waitForReady();
    // An upstream request goes out now, so the next one waits for the relay's batch interval:
    // the glob is dropped and taken again before its unsubscribe reaches the control plane.
    returning.subscribe(CLUSTER, [C('other')]);
    await origin.waitFor(() => origin.subscribedNames(CLUSTER).has(C('other')), 'the other name subscribed upstream');
    holder.unsubscribe(ENDPOINT, [GLOB]);
    holder.subscribe(LISTENER, [BARRIER]);
    await holder.waitForRemoved(LISTENER, BARRIER);
    returning.subscribe(ENDPOINT, [GLOB], { initialVersions: { [E('g/m3')]: 'v1' } });
    returning.subscribe(LISTENER, [BARRIER]);
    await returning.waitForRemoved(LISTENER, BARRIER);
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    await returning.waitForVersion(ENDPOINT, E('g/m1'), 'v1');
    await sleep(300);
    assert.deepEqual(returning.removedNames(ENDPOINT), [], 'the member that still exists is never reported removed');
    assert.equal(returning.held(ENDPOINT).get(E('g/m3')), 'v1');
    assertWellFormed(returning);
  });
});

test('unsubscribing another spelling of a glob member the client rejected does not send the rejected version again', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(ENDPOINT, E('g/m1'), 'one', 'v1');
    let rejectNext = true;
    const c = client({
      reject: (resp) => {
        if (!rejectNext || (resp.resources ?? []).length === 0) return undefined;
        rejectNext = false;
        return 'not this one';
      },
    });
    c.subscribe(ENDPOINT, [GLOB]);
    await c.waitFor(() => c.nacked.length === 1, 'the member rejected');
    const spelling = E('g/m%31');
    c.subscribe(ENDPOINT, [spelling]);
    await c.waitForVersion(ENDPOINT, spelling, 'v1');
    c.unsubscribe(ENDPOINT, [spelling]);
    c.forget(ENDPOINT, [spelling]);
    c.subscribe(LISTENER, [BARRIER]);
    await c.waitForRemoved(LISTENER, BARRIER);
    await sleep(100);
    assert.equal(c.received(ENDPOINT, E('g/m1')).length, 1, 'the rejected copy went out once');
    assert.ok(!c.held(ENDPOINT).has(E('g/m1')));
    assertWellFormed(c);
  });
});

test('a SotW client dropping from its list a missing name its glob covers gets no new state of the world', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(CLUSTER, C('g/m2'), 'two', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(CLUSTER, [C('g/*'), C('g/m1')]);
      await c.waitFor(() => c.of(CLUSTER).some((r) => (r.resources ?? []).length === 1), 'the glob answered');
      const before = c.of(CLUSTER).length;
      c.request(CLUSTER, [C('g/*')]);
      c.request(LISTENER, [BARRIER]);
      await c.waitFor(() => c.of(LISTENER).length === 1, 'the barrier answered');
      await sleep(100);
      assert.equal(c.of(CLUSTER).length, before, 'nothing changed for the client, so nothing is sent');
    });
  });
});

test('a SotW client reconnecting on the wildcard while another client holds one cluster gets every cluster in its first answer', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, address, client }) => {
    const cp = defaultOrigin!;
    cp.setResource(CLUSTER, 'l1', 'one', 'v1');
    cp.setResource(CLUSTER, 'l2', 'two', 'v1');
    const first = new SotwClient(address);
    first.request(CLUSTER, []);
    await first.waitFor(() => first.of(CLUSTER).length === 1, 'the wildcard answered');
    const other = client();
    other.subscribe(CLUSTER, ['l2']);
    await other.waitForVersion(CLUSTER, 'l2', 'v1');
    first.close();
    await cp.waitFor(() => !cp.subscribedNames(CLUSTER).has('*'), 'the wildcard released upstream');
    await withSotwClient(address, async (again) => {
      again.request(CLUSTER, []);
      await again.waitFor(() => again.of(CLUSTER).length >= 1, 'the wildcard answered again');
      const names = SotwClient.payloads(again.of(CLUSTER)[0]!).sort();
      assert.deepEqual(names, ['one', 'two'], 'a state of the world without l1 would tell the client it was removed');
    });
  });
});

test('a SotW client reconnecting on a cached glob and a name the relay must fetch again gets both in its first state of the world', T, async () => {
  await withRelay({ authorities: ['a', 'b'] }, async ({ origins, address, client }) => {
    const S1 = xdstp('b', CLUSTER, 's1');
    origins.a!.setResource(CLUSTER, C('g/m1'), 'member', 'v1');
    origins.b!.setResource(CLUSTER, S1, 'single', 'v1');
    // Another client keeps the glob cached and answered.
    const keeper = client();
    keeper.subscribe(CLUSTER, [C('g/*')]);
    await keeper.waitForVersion(CLUSTER, C('g/m1'), 'v1');
    const first = new SotwClient(address);
    first.request(CLUSTER, [C('g/*'), S1]);
    await first.waitFor(() => first.of(CLUSTER).some((r) => (r.resources ?? []).length === 2), 'both held');
    first.close();
    await origins.b!.waitFor(() => !origins.b!.subscribedNames(CLUSTER).has(S1), 's1 released upstream');
    await withSotwClient(address, async (again) => {
      again.request(CLUSTER, [C('g/*'), S1]);
      await again.waitFor(() => again.of(CLUSTER).length >= 1, 'the first answer');
      const names = SotwClient.payloads(again.of(CLUSTER)[0]!).sort();
      assert.deepEqual(names, ['member', 'single'], 'a state of the world without s1 would tell the client it was removed');
    });
  });
});

test('a reconnecting client that drops a name it listed is not sent it under that name when it takes the glob that covers it', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const spelling = E('g/m1?k=1&j=2');
    origin.setResource(ENDPOINT, E('g/m1?j=2&k=1'), 'one', 'v1');
    const c = client({ nodeId: 'returning' });
    c.subscribe(ENDPOINT, [spelling], { initialVersions: { [spelling]: 'v1' } });
    c.subscribe(LISTENER, [BARRIER]);
    await c.waitForRemoved(LISTENER, BARRIER);
    c.unsubscribe(ENDPOINT, [spelling]);
    c.forget(ENDPOINT, [spelling]);
    c.subscribe(ENDPOINT, [E('g/m1?j=2&k=1'), E('g/*?j=2&k=1')]);
    await c.waitForVersion(ENDPOINT, E('g/m1?j=2&k=1'), 'v1');
    await sleep(300);
    assert.deepEqual(c.received(ENDPOINT, spelling), [], 'the dropped spelling is not sent again');
    assertWellFormed(c);
  });
});
