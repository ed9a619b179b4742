/**
 * Delta xDS as Envoy and real control planes behave, through the one
 * subscription engine. Each test is one rule from the xDS protocol documentation
 * (envoyproxy.io: "how a client specifies resources", "unsubscribing", "knowing when a resource
 * does not exist") or from what Envoy does, over real gRPC.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { withRelay } from './support/relay-fixture';
import { CLUSTER, LISTENER, xdstp } from './support/names';
import { assertWellFormed, sorted } from './support/assertions';
import { lenField, stringField } from '../src/proto/wire';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const C = (rest: string): string => xdstp('a', CLUSTER, rest);

/** Responses of a type that carried neither resources nor removals. */
function emptyResponses(c: { responses: Array<{ type_url?: string; resources?: unknown[]; removed_resources?: string[] }> }, typeUrl: string): number {
  return c.responses.filter((r) => r.type_url === typeUrl && (r.resources ?? []).length === 0 && (r.removed_resources ?? []).length === 0).length;
}

// ------------------------------------------------------------ 1. legacy wildcard continues

test('a legacy wildcard client that adds one on-demand cluster keeps getting cluster updates', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, origin, client }) => {
    const up = defaultOrigin!;
    up.setResource(CLUSTER, 'c1', 'one', 'v1');
    origin.setResource(CLUSTER, C('on-demand'), 'od', 'v1');
    const c = client();
    c.subscribe(CLUSTER, []);
    await c.waitForVersion(CLUSTER, 'c1', 'v1');
    // Envoy's on-demand CDS names the cluster alone, without '*'.
    c.subscribe(CLUSTER, [C('on-demand')]);
    await c.waitForVersion(CLUSTER, C('on-demand'), 'v1');

    up.setResource(CLUSTER, 'c1', 'one', 'v2');
    up.setResource(CLUSTER, 'c2', 'two', 'v1');
    await c.waitForVersion(CLUSTER, 'c1', 'v2');
    await c.waitForVersion(CLUSTER, 'c2', 'v1');
    assert.ok(up.subscribedNames(CLUSTER).has('*'), 'the relay keeps * subscribed upstream');
    assertWellFormed(c);
  });
});

test('the legacy wildcard ends only when the client unsubscribes *', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client }) => {
    const up = defaultOrigin!;
    up.setResource(CLUSTER, 'c1', 'one', 'v1');
    up.setResource(CLUSTER, 'named', 'n', 'v1');
    const c = client();
    c.subscribe(CLUSTER, []);
    await c.waitForVersion(CLUSTER, 'c1', 'v1');
    c.subscribe(CLUSTER, ['named']);
    c.unsubscribe(CLUSTER, ['*']);
    await up.waitFor(() => !up.subscribedNames(CLUSTER).has('*'), 'upstream unsubscribed *');
    up.setResource(CLUSTER, 'c1', 'one', 'v2');
    up.setResource(CLUSTER, 'named', 'n', 'v2');
    await c.waitForVersion(CLUSTER, 'named', 'v2');
    await c.expectNoResponse(300);
    assert.equal(c.held(CLUSTER).get('c1'), 'v1', 'no wildcard update after * was unsubscribed');
    assertWellFormed(c);
  });
});

// --------------------------------------- 2. unsubscribing a name still covered by a collection

test('unsubscribing a name still covered by the wildcard resends it', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client }) => {
    const up = defaultOrigin!;
    up.setResource(CLUSTER, 'c1', 'one', 'v1');
    const c = client();
    c.subscribe(CLUSTER, []);
    await c.waitForVersion(CLUSTER, 'c1', 'v1');
    c.subscribe(CLUSTER, ['c1']);
    await c.waitFor(() => c.received(CLUSTER, 'c1').length >= 2, 'c1 sent again for its explicit subscription');
    const before = c.received(CLUSTER, 'c1').length;
    c.unsubscribe(CLUSTER, ['c1']);
    await c.waitFor(() => c.received(CLUSTER, 'c1').length > before, 'c1 sent again after the unsubscribe');
    assert.equal(c.held(CLUSTER).get('c1'), 'v1');
    assertWellFormed(c);
  });
});

test('unsubscribing a name covered by the wildcard that does not exist reports it removed', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client }) => {
    const up = defaultOrigin!;
    up.setResource(CLUSTER, 'c1', 'one', 'v1');
    const c = client();
    c.subscribe(CLUSTER, []);
    await c.waitForVersion(CLUSTER, 'c1', 'v1');
    c.subscribe(CLUSTER, ['ghost']);
    await c.waitForRemoved(CLUSTER, 'ghost');
    const before = c.removedNames(CLUSTER).filter((n) => n === 'ghost').length;
    c.unsubscribe(CLUSTER, ['ghost']);
    await c.waitFor(() => c.removedNames(CLUSTER).filter((n) => n === 'ghost').length > before, 'ghost reported removed again');
    assertWellFormed(c);
  });
});

test('unsubscribing a glob member the client also named resends it under its glob', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('g/m1'), 'm1', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('g/*'), L('g/m1')]);
    await c.waitForVersion(LISTENER, L('g/m1'), 'v1');
    const before = c.received(LISTENER, L('g/m1')).length;
    c.unsubscribe(LISTENER, [L('g/m1')]);
    await c.waitFor(() => c.received(LISTENER, L('g/m1')).length > before, 'member sent again');
    assert.equal(c.held(LISTENER).get(L('g/m1')), 'v1');
    assertWellFormed(c);
  });
});

// ----------------------------------------- 3. the first answer to a wildcard is always sent

test('the first answer to a wildcard is sent even when no default upstream is configured', T, async () => {
  await withRelay({}, async ({ client }) => {
    const c = client();
    c.subscribe(CLUSTER, []);
    await c.waitFor(() => emptyResponses(c, CLUSTER) === 1, 'an empty CDS response');
    assert.deepEqual(c.removedNames(CLUSTER), [], 'the wildcard is not reported removed');
    assertWellFormed(c);
  });
});

test('the first answer to a wildcard is sent when the upstream has nothing of the type', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ client }) => {
    const c = client();
    c.subscribe(LISTENER, ['*']);
    await c.waitFor(() => emptyResponses(c, LISTENER) === 1, 'an empty LDS response');
    assertWellFormed(c);
  });
});

// ----------------------------------------------------- 4. re-subscribing means "send it again"

test('re-subscribing a glob the client already holds sends every member again', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('g/m1'), 'm1', 'v1');
    origin.setResource(LISTENER, L('g/m2'), 'm2', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('g/*')]);
    await c.waitForVersion(LISTENER, L('g/m2'), 'v1');
    await c.waitForVersion(LISTENER, L('g/m1'), 'v1');
    c.subscribe(LISTENER, [L('g/*')]);
    await c.waitFor(
      () => c.received(LISTENER, L('g/m1')).length === 2 && c.received(LISTENER, L('g/m2')).length === 2,
      'both members sent again',
    );
    assertWellFormed(c);
  });
});

test('re-subscribing a refused name answers it again', T, async () => {
  await withRelay({}, async ({ client }) => {
    const unknown = xdstp('nowhere', LISTENER, 'x');
    const c = client();
    c.subscribe(LISTENER, [unknown]);
    await c.waitForRemoved(LISTENER, unknown);
    c.subscribe(LISTENER, [unknown]);
    await c.waitFor(() => c.removedNames(LISTENER).filter((n) => n === unknown).length === 2, 'refused again');
    assertWellFormed(c);
  });
});

// ------------------------------------------------ 5. two spellings of one name on one stream

test('two spellings of one canonical name on one stream are both answered and both updated', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const sorted1 = L('x?a=1&b=2');
    const other = L('x?b=2&a=1');
    origin.setResource(LISTENER, sorted1, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [sorted1, other]);
    await c.waitForVersion(LISTENER, sorted1, 'v1');
    await c.waitForVersion(LISTENER, other, 'v1');
    origin.setResource(LISTENER, sorted1, 'x', 'v2');
    await c.waitForVersion(LISTENER, sorted1, 'v2');
    await c.waitForVersion(LISTENER, other, 'v2');

    c.unsubscribe(LISTENER, [other]);
    origin.setResource(LISTENER, sorted1, 'x', 'v3');
    await c.waitForVersion(LISTENER, sorted1, 'v3');
    assert.equal(origin.unsubscribeCount(sorted1), 0, 'the upstream subscription stays');
    assert.equal(c.held(LISTENER).get(other), 'v2', 'the unsubscribed spelling is not updated');
    assertWellFormed(c);
  });
});

// -------------------------------- 6. reconnecting to a relay that does not hold the collection

test('a client reconnecting to a relay without its glob hears of members deleted meanwhile', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('g/kept'), 'k', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('g/*')], { initialVersions: { [L('g/kept')]: 'v1', [L('g/deleted')]: 'v1' } });
    await c.waitForRemoved(LISTENER, L('g/deleted'));
    await c.expectNoResponse(200);
    assert.equal(c.held(LISTENER).get(L('g/kept')), 'v1');
    assert.ok(!c.removedNames(LISTENER).includes(L('g/kept')));
    assertWellFormed(c);
  });
});

test('a legacy wildcard client reconnecting to a fresh relay hears of resources deleted meanwhile', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client }) => {
    defaultOrigin!.setResource(CLUSTER, 'c1', 'one', 'v1');
    const c = client();
    c.subscribe(CLUSTER, [], { initialVersions: { c1: 'v1', gone: 'v1' } });
    await c.waitForRemoved(CLUSTER, 'gone');
    assert.equal(c.held(CLUSTER).get('c1'), 'v1');
    assert.ok(!c.removedNames(CLUSTER).includes('c1'));
    assertWellFormed(c);
  });
});

// --------------------------------------------- 7. does-not-exist markers die with subscriptions

test('a re-created resource is never first reported absent to a new subscriber', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const x = L('phoenix');
    const first = client();
    first.subscribe(LISTENER, [x]);
    await first.waitForRemoved(LISTENER, x);
    first.unsubscribe(LISTENER, [x]);
    await origin.waitFor(() => !origin.subscribedKeys(LISTENER).has(x), 'relay unsubscribed upstream');
    origin.setResource(LISTENER, x, 'back', 'v1');

    const second = client();
    second.subscribe(LISTENER, [x]);
    await second.waitForVersion(LISTENER, x, 'v1');
    assert.deepEqual(second.removedNames(LISTENER), []);
    assertWellFormed(second);
  });
});

// ------------------------------------------------------------- 8. one name twice in one list

test('one name twice in one subscribe list is answered once', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('twice'), 't', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('twice'), L('twice')]);
    await c.waitForVersion(LISTENER, L('twice'), 'v1');
    await c.expectNoResponse(200);
    assert.equal(c.received(LISTENER, L('twice')).length, 1);
    assertWellFormed(c);
  });
});

// ----------------------------------------------------------------- 11. message size limits

test('no response exceeds --max-response-bytes: a large glob arrives in several responses', T, async () => {
  const limit = 64 * 1024;
  await withRelay({ config: { maxResponseBytes: limit } }, async ({ origin, client }) => {
    const payload = 'x'.repeat(6000);
    const names: string[] = [];
    for (let i = 0; i < 40; i++) {
      names.push(L(`big/m${i}`));
      origin.setResource(LISTENER, L(`big/m${i}`), payload, 'v1');
    }
    const c = client();
    c.subscribe(LISTENER, [L('big/*')]);
    await c.waitFor(() => names.every((n) => c.held(LISTENER).get(n) === 'v1'), 'every member');
    const sizes = c.responseSizes.filter((s) => s.typeUrl === LISTENER).map((s) => s.bytes);
    assert.ok(sizes.length >= 4, `several responses (${sizes.join(', ')})`);
    for (const s of sizes) assert.ok(s <= limit, `response of ${s} bytes exceeds ${limit}`);
    assertWellFormed(c);
  });
});

test('a single resource larger than --max-response-bytes goes alone', T, async () => {
  const limit = 64 * 1024;
  await withRelay({ config: { maxResponseBytes: limit } }, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('g/huge'), 'h'.repeat(100 * 1024), 'v1');
    origin.setResource(LISTENER, L('g/small'), 's', 'v1');
    const c = client();
    c.subscribe(LISTENER, [L('g/*')]);
    await c.waitForVersion(LISTENER, L('g/huge'), 'v1');
    await c.waitForVersion(LISTENER, L('g/small'), 'v1');
    const withHuge = c.responses.find((r) => (r.resources ?? []).some((x) => x.name === L('g/huge')))!;
    assert.deepEqual(
      (withHuge.resources ?? []).map((r) => r.name),
      [L('g/huge')],
    );
    assertWellFormed(c);
  });
});

test('a request larger than --max-request-bytes ends only that stream with RESOURCE_EXHAUSTED', T, async () => {
  await withRelay({ config: { maxRequestBytes: 4096 } }, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('ok'), 'ok', 'v1');
    const good = client();
    good.subscribe(LISTENER, [L('ok')]);
    await good.waitForVersion(LISTENER, L('ok'), 'v1');
    const hog = client();
    hog.subscribe(LISTENER, Array.from({ length: 200 }, (_, i) => L(`hog/${i}`)));
    const end = await hog.waitForEnd();
    assert.equal(end.code, grpc.status.RESOURCE_EXHAUSTED, end.details);
    origin.setResource(LISTENER, L('ok'), 'ok', 'v2');
    await good.waitForVersion(LISTENER, L('ok'), 'v2');
    assert.equal(good.status, undefined);
  });
});

// ------------------------------------------------------------------ 13. names must be UTF-8

test('a name that is not valid UTF-8 ends the stream with INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    origin.setResource(LISTENER, L('ok'), 'ok', 'v1');
    const good = client();
    good.subscribe(LISTENER, [L('ok')]);
    await good.waitForVersion(LISTENER, L('ok'), 'v1');
    const bad = client();
    const name = Buffer.concat([Buffer.from(L('caf')), Buffer.from([0xc3, 0x28])]);
    bad.sendRaw(Buffer.concat([stringField(2, LISTENER), lenField(3, name)]));
    const end = await bad.waitForEnd();
    assert.equal(end.code, grpc.status.INVALID_ARGUMENT, end.details);
    assert.match(end.details, /UTF-8/);
    assert.deepEqual(
      sorted(origin.everSubscribed()).filter((n) => n.includes('caf')),
      [],
      'no subscription under a replacement-character name',
    );
    origin.setResource(LISTENER, L('ok'), 'ok', 'v2');
    await good.waitForVersion(LISTENER, L('ok'), 'v2');
  });
});

// ------------------------------------------------------------------ 10. resource errors

test('a transient resource error reaches the subscribed client and a later subscriber, and keeps the cached copy', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const x = L('flaky');
    origin.setResource(LISTENER, x, 'x', 'v1');
    const first = client();
    first.subscribe(LISTENER, [x]);
    await first.waitForVersion(LISTENER, x, 'v1');
    origin.injectRaw(LISTENER, [], [], { resourceErrors: [{ name: x, code: grpc.status.UNAVAILABLE, message: 'backend unavailable' }] });
    const errorsOf = (c: typeof first): string[] =>
      c.responses.flatMap((r) => (r.resource_errors ?? []).map((e) => `${e.resource_name?.name} ${e.error_detail?.code} ${e.error_detail?.message}`));
    await first.waitFor(() => errorsOf(first).length === 1, 'the error');
    assert.deepEqual(errorsOf(first), [`${x} 14 backend unavailable`]);
    assert.equal(first.held(LISTENER).get(x), 'v1', 'the client keeps what it has');

    const later = client();
    later.subscribe(LISTENER, [x]);
    await later.waitForVersion(LISTENER, x, 'v1');
    await later.waitFor(() => errorsOf(later).length === 1, 'the error, for a later subscriber too');
    assertWellFormed(first, later);
  });
});

test('a NOT_FOUND resource error is a removal', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const x = L('gone-by-error');
    origin.setResource(LISTENER, x, 'x', 'v1');
    const c = client();
    c.subscribe(LISTENER, [x]);
    await c.waitForVersion(LISTENER, x, 'v1');
    origin.injectRaw(LISTENER, [], [], { resourceErrors: [{ name: x, code: grpc.status.NOT_FOUND, message: 'no such listener' }] });
    await c.waitForRemoved(LISTENER, x);
    assertWellFormed(c);
  });
});
