/**
 * The pure parts of the upstream side, without gRPC or timers: the response
 * check (what gets NACKed), the request splitter (size limit) and the poison
 * search state machine.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deltaRequestCodec, deltaResponseCodec, resourceCodec, type DeltaDiscoveryResponse, type Node } from '../src/proto/messages';
import { lenField, stringField } from '../src/proto/wire';
import { checkDeltaResponse, type CheckedResponse } from '../src/upstream/response-check';
import { RESOURCE_LOCATOR_TYPE } from '../src/proto/xds-names';
import { splitSubscriptionChange } from '../src/upstream/request-split';
import { PoisonBisect, type NamePair } from '../src/upstream/poison-bisect';
import { makeResource } from './support/origin';
import { CLUSTER, LISTENER, TTL_FEATURE, xdstp } from './support/names';

const L = (rest: string): string => xdstp('a', LISTENER, rest);

function encode(resp: DeltaDiscoveryResponse): Buffer {
  return deltaResponseCodec.encode({ type_url: LISTENER, nonce: 'n1', ...resp });
}

function rejected(c: CheckedResponse): { reason: string; message: string; nonce: string } {
  assert.equal(c.ok, false, 'expected the response to be rejected');
  if (c.ok) throw new Error('unreachable');
  return c;
}

// ---------------------------------------------------------------- response check

test('a well-formed response is accepted with each Resource byte for byte', () => {
  const a = makeResource(LISTENER, L('a'), 'A', 'v1', { ttl: 30 });
  const b = makeResource(LISTENER, L('b'), undefined, 'v2'); // a TTL heartbeat: no payload
  const c = checkDeltaResponse(encode({ resources: [a, b], removed_resources: [L('gone')] }));
  assert.ok(c.ok);
  assert.equal(c.typeUrl, LISTENER);
  assert.equal(c.nonce, 'n1');
  assert.deepEqual(
    c.resources.map((r) => r.bytes),
    [resourceCodec.encode(a), resourceCodec.encode(b)],
  );
  // Split once, here: the engine takes them as they are.
  assert.deepEqual(
    c.resources.map((r) => [r.name, r.version, r.hasBody, r.ttlMs]),
    [
      [L('a'), 'v1', true, 30_000],
      [L('b'), 'v2', false, undefined],
    ],
  );
  assert.deepEqual(c.removed, [L('gone')]);
  assert.deepEqual(c.errors, []);
});

test('removed_resource_names count as removals, each name once', () => {
  const c = checkDeltaResponse(
    encode({ removed_resources: [L('x'), L('y')], removed_resource_names: [{ name: L('y') }, { name: L('z') }] }),
  );
  assert.ok(c.ok);
  assert.deepEqual(c.removed, [L('x'), L('y'), L('z')]);
});

test('resource_errors are read with their names, status codes and messages', () => {
  const c = checkDeltaResponse(
    encode({
      resource_errors: [
        { resource_name: { name: L('missing') }, error_detail: { code: 5, message: 'no such listener' } },
        { resource_name: { name: L('flaky') }, error_detail: { code: 14, message: 'backend down' } },
      ],
    }),
  );
  assert.ok(c.ok);
  assert.deepEqual(c.errors, [
    { name: L('missing'), code: 5, message: 'no such listener' },
    { name: L('flaky'), code: 14, message: 'backend down' },
  ]);
});

test('a resource named twice rejects the response, naming the resource', () => {
  const r = rejected(
    checkDeltaResponse(encode({ resources: [makeResource(LISTENER, L('d'), 'x', 'v1'), makeResource(LISTENER, L('d'), 'y', 'v2')] })),
  );
  assert.equal(r.reason, 'duplicate_name');
  assert.equal(r.nonce, 'n1');
  assert.match(r.message, /more than once/);
  assert.ok(r.message.includes(L('d')));
});

test('a resource both added and in removed_resources rejects the response', () => {
  const r = rejected(checkDeltaResponse(encode({ resources: [makeResource(LISTENER, L('r'), 'x', 'v1')], removed_resources: [L('r')] })));
  assert.equal(r.reason, 'added_and_removed');
  assert.ok(r.message.includes(L('r')));
});

test('a resource both added and in removed_resource_names rejects the response', () => {
  const r = rejected(
    checkDeltaResponse(encode({ resources: [makeResource(LISTENER, L('r'), 'x', 'v1')], removed_resource_names: [{ name: L('r') }] })),
  );
  assert.equal(r.reason, 'added_and_removed');
});

test('an Any of another type than the response rejects it, naming both types', () => {
  const r = rejected(checkDeltaResponse(encode({ resources: [makeResource(CLUSTER, L('t'), 'x', 'v1')] })));
  assert.equal(r.reason, 'type_mismatch');
  assert.ok(r.message.includes(CLUSTER) && r.message.includes(LISTENER), r.message);
});

test('a ResourceLocator redirect is accepted in a response of any type', () => {
  const c = checkDeltaResponse(encode({ resources: [makeResource(RESOURCE_LOCATOR_TYPE, L('glob/m'), 'x', 'v1')] }));
  assert.ok(c.ok);
});

test('an undecodable Resource rejects the response, which can still be NACKed by nonce', () => {
  const broken = lenField(2, Buffer.from([0x1a, 0x05, 0x61])); // Resource.name claims 5 bytes, has 1
  const bytes = Buffer.concat([broken, stringField(4, LISTENER), stringField(5, 'n9')]);
  const r = rejected(checkDeltaResponse(bytes));
  assert.equal(r.reason, 'undecodable');
  assert.equal(r.nonce, 'n9');
  assert.match(r.message, /resources\[0\]/);
});

test('a resource name that is not UTF-8 rejects the response', () => {
  const resource = lenField(3, Buffer.from([0x78, 0xff, 0x78]));
  const bytes = Buffer.concat([lenField(2, resource), stringField(4, LISTENER), stringField(5, 'n2')]);
  const r = rejected(checkDeltaResponse(bytes));
  assert.equal(r.reason, 'undecodable');
  assert.match(r.message, /UTF-8/);
});

test('a response without type_url is rejected', () => {
  const r = rejected(checkDeltaResponse(deltaResponseCodec.encode({ nonce: 'n3', removed_resources: [L('x')] })));
  assert.equal(r.reason, 'undecodable');
  assert.match(r.message, /type_url/);
});

test('a truncated response is rejected with whatever nonce was read before the fault', () => {
  const bytes = Buffer.concat([stringField(4, LISTENER), stringField(5, 'n4'), Buffer.from([0x32, 0x10, 0x61])]);
  const r = rejected(checkDeltaResponse(bytes));
  assert.equal(r.reason, 'undecodable');
  assert.equal(r.nonce, 'n4');
});

// ---------------------------------------------------------------- request splitting

const NODE: Node = { id: 'relay-node', user_agent_name: 'xdstp-relay', client_features: [TTL_FEATURE] };

function longName(i: number): string {
  return L(`split/${'p'.repeat(180)}/${i}`);
}

test('a change that fits is one request carrying node, names and versions', () => {
  const reqs = splitSubscriptionChange(
    { typeUrl: LISTENER, subscribe: [L('a'), L('b')], unsubscribe: [L('c')], initialVersions: { [L('a')]: 'v1' } },
    4 * 1024 * 1024,
    NODE,
  );
  assert.equal(reqs.length, 1);
  const back = deltaRequestCodec.decode(deltaRequestCodec.encode(reqs[0]));
  assert.equal(back.node?.id, 'relay-node');
  assert.deepEqual(new Set(back.resource_names_subscribe), new Set([L('a'), L('b')]));
  assert.deepEqual(back.resource_names_unsubscribe, [L('c')]);
  assert.deepEqual({ ...back.initial_resource_versions }, { [L('a')]: 'v1' });
});

test('a change larger than the limit is split into requests within it, losing and repeating nothing', () => {
  const max = 64 * 1024;
  const subscribe = Array.from({ length: 1500 }, (_, i) => longName(i));
  const unsubscribe = Array.from({ length: 300 }, (_, i) => longName(10_000 + i));
  const initialVersions: Record<string, string> = {};
  for (const n of subscribe.slice(0, 1000)) initialVersions[n] = `version-${n.length}`;
  const reqs = splitSubscriptionChange({ typeUrl: LISTENER, subscribe, unsubscribe, initialVersions }, max, NODE);
  assert.ok(reqs.length > 1);
  const sizes = reqs.map((r) => deltaRequestCodec.encode(r).length);
  for (const size of sizes) assert.ok(size <= max, `request of ${size} bytes exceeds ${max}`);
  // Tight packing: every request but the last was full to within one item.
  for (const size of sizes.slice(0, -1)) assert.ok(size > max - 512, `request of only ${size} bytes`);
  const decoded = reqs.map((r) => deltaRequestCodec.decode(deltaRequestCodec.encode(r)));
  assert.deepEqual(decoded.flatMap((r) => r.resource_names_subscribe ?? []).sort(), [...subscribe].sort());
  assert.deepEqual(decoded.flatMap((r) => r.resource_names_unsubscribe ?? []).sort(), [...unsubscribe].sort());
  const versions = Object.assign({}, ...decoded.map((r) => r.initial_resource_versions ?? {})) as Record<string, string>;
  assert.deepEqual(versions, initialVersions);
  assert.equal(decoded.reduce((n, r) => n + Object.keys(r.initial_resource_versions ?? {}).length, 0), 1000);
  assert.ok(decoded[0].node, 'first request carries node');
  assert.ok(decoded.slice(1).every((r) => r.node === undefined), 'only the first carries node');
  assert.ok(decoded.every((r) => r.type_url === LISTENER));
});

test('the first request of a split carries a subscribed name and as many initial versions as fit', () => {
  const max = 32 * 1024;
  const subscribe = Array.from({ length: 400 }, (_, i) => longName(i));
  const initialVersions: Record<string, string> = {};
  for (const n of subscribe) initialVersions[n] = 'v1';
  const [first] = splitSubscriptionChange({ typeUrl: LISTENER, subscribe, initialVersions }, max);
  // One name, so it is never an empty (legacy wildcard) first request; then versions before more names.
  assert.deepEqual(first.resource_names_subscribe, [subscribe[0]]);
  assert.ok(Object.keys(first.initial_resource_versions ?? {}).length > 100);
});

test('one name larger than the limit goes in a request of its own', () => {
  const huge = L(`huge/${'h'.repeat(5000)}`);
  const reqs = splitSubscriptionChange({ typeUrl: LISTENER, subscribe: [L('s1'), huge, L('s2')] }, 2048);
  const withHuge = reqs.filter((r) => r.resource_names_subscribe?.includes(huge));
  assert.equal(withHuge.length, 1);
  assert.deepEqual(withHuge[0].resource_names_subscribe, [huge]);
  assert.deepEqual(reqs.flatMap((r) => r.resource_names_subscribe ?? []).sort(), [L('s1'), L('s2'), huge].sort());
});

// ---------------------------------------------------------------- poison search

const SETTLE = 100;

interface SearchResult {
  /** False when the search was still going after `maxStreams` streams. */
  finished: boolean;
  rejected: string[];
  /** Names the control plane holds at the end (subscribed on the last, stable stream). */
  subscribed: Set<string>;
  streams: number;
}

/**
 * Drives PoisonBisect against a modelled control plane: a stream ends 1 ms
 * after any request that subscribes a name `killer` says kills it. Everything
 * subscribed on a stream that then stays up is what the control plane holds.
 * The first stream subscribes `names` in one request (a normal batch).
 */
function search(names: string[], killer: (batch: string[]) => boolean, opts: { maxStreams?: number; desired?: Set<string>; onStream?: (n: number) => void } = {}): SearchResult {
  const desired = opts.desired ?? new Set(names);
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: (_t, n) => desired.has(n) });
  const rejected: string[] = [];
  let t = 0;
  let streams = 0;
  const pairs = (ns: string[]): NamePair[] => ns.map((name) => ({ typeUrl: LISTENER, name }));
  for (;;) {
    streams++;
    opts.onStream?.(streams);
    if (streams > (opts.maxStreams ?? 200)) return { finished: false, rejected, subscribed: new Set(), streams };
    t += 1000; // backoff
    bisect.streamOpened();
    const subscribed = new Set<string>();
    const replay = [...desired].filter((n) => !bisect.holds(LISTENER, n));
    bisect.recordSent(pairs(replay), t);
    replay.forEach((n) => subscribed.add(n));
    let died = replay.length > 0 && killer(replay);
    while (!died) {
      const probe = bisect.nextProbe(t);
      if (probe) {
        const batch = probe.map((p) => p.name);
        batch.forEach((n) => subscribed.add(n));
        died = killer(batch);
        continue;
      }
      const wake = bisect.wakeAt();
      if (wake === undefined) return { finished: true, rejected, subscribed, streams };
      t = wake;
    }
    t += 1;
    for (const p of bisect.streamEnded(t)) {
      rejected.push(p.name);
      desired.delete(p.name);
    }
  }
}

const names8 = Array.from({ length: 8 }, (_, i) => L(`bisect/${i}`));

test('one poison name among many is found and rejected; every other name ends up subscribed', () => {
  const poison = names8[5];
  const r = search(names8, (batch) => batch.includes(poison));
  assert.ok(r.finished);
  assert.deepEqual(r.rejected, [poison]);
  assert.deepEqual(r.subscribed, new Set(names8.filter((n) => n !== poison)));
  // 1 + log2(8) failing streams and a final stable one, give or take the first full re-probe.
  assert.ok(r.streams <= 7, `${r.streams} streams`);
});

test('two poison names are both found; the rest ends up subscribed', () => {
  const poison = new Set([names8[1], names8[6]]);
  const r = search(names8, (batch) => batch.some((n) => poison.has(n)));
  assert.deepEqual(new Set(r.rejected), poison);
  assert.deepEqual(r.subscribed, new Set(names8.filter((n) => !poison.has(n))));
});

test('a poison name among a thousand is found within a logarithmic number of streams', () => {
  const many = Array.from({ length: 1000 }, (_, i) => L(`many/${i}`));
  const r = search(many, (batch) => batch.includes(many[777]));
  assert.deepEqual(r.rejected, [many[777]]);
  assert.equal(r.subscribed.size, 999);
  assert.ok(r.streams <= 14, `${r.streams} streams`);
});

test('a control plane that ends every stream with a subscription gets no name rejected', () => {
  const r = search(names8, () => true, { maxStreams: 60 });
  assert.equal(r.finished, false);
  assert.deepEqual(r.rejected, []);
});

test('a stream that ends long after its last request starts no search', () => {
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: () => true });
  bisect.streamOpened();
  bisect.recordSent([{ typeUrl: LISTENER, name: L('x') }], 0);
  assert.deepEqual(bisect.streamEnded(SETTLE + 1), []);
  assert.equal(bisect.active, false);
  assert.equal(bisect.holds(LISTENER, L('x')), false);
});

test('names of a request the stream did not survive are held back from the next replay and probed after it settles', () => {
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: () => true });
  bisect.streamOpened();
  bisect.recordSent([{ typeUrl: LISTENER, name: L('old') }], 0);
  bisect.recordSent([{ typeUrl: LISTENER, name: L('new') }], 500);
  bisect.streamEnded(520);
  assert.equal(bisect.holds(LISTENER, L('new')), true);
  assert.equal(bisect.holds(LISTENER, L('old')), false);
  bisect.streamOpened();
  bisect.recordSent([{ typeUrl: LISTENER, name: L('old') }], 1000);
  assert.equal(bisect.nextProbe(1000 + SETTLE - 1), undefined, 'not before the replay is confirmed');
  assert.equal(bisect.wakeAt(), 1000 + SETTLE);
  assert.deepEqual(bisect.nextProbe(1000 + SETTLE), [{ typeUrl: LISTENER, name: L('new') }]);
  // Confirmed: the search is over and the name is no longer held.
  assert.equal(bisect.nextProbe(1000 + 2 * SETTLE), undefined);
  assert.equal(bisect.active, false);
  assert.equal(bisect.holds(LISTENER, L('new')), false);
});

test('a name unsubscribed during the search leaves it', () => {
  const desired = new Set(names8);
  const poison = names8[2];
  const r = search(names8, (batch) => batch.includes(poison) && desired.has(poison), {
    desired,
    onStream: (n) => {
      if (n === 2) desired.delete(poison);
    },
  });
  assert.deepEqual(r.rejected, []);
  assert.deepEqual(r.subscribed, new Set(names8.filter((n) => n !== poison)));
});

test('a single-name probe that ends a stream on which nothing was confirmed yet is retried later, not rejected', () => {
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: () => true });
  const p = { typeUrl: LISTENER, name: L('lone') };
  bisect.streamOpened();
  bisect.recordSent([p], 0);
  bisect.streamEnded(1);
  bisect.streamOpened();
  assert.deepEqual(bisect.nextProbe(1000), [p]);
  assert.deepEqual(bisect.streamEnded(1001), [], 'no earlier request was confirmed on that stream');
  assert.equal(bisect.holds(LISTENER, L('lone')), true, 'still under suspicion');
});

test('a stream ended by the server going away blames no name: the probe under way is sent again whole', () => {
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: () => true });
  const group = [{ typeUrl: LISTENER, name: L('a') }, { typeUrl: LISTENER, name: L('b') }];
  bisect.streamOpened();
  bisect.recordSent(group, 0);
  bisect.streamEnded(1);
  bisect.streamOpened();
  assert.deepEqual(bisect.nextProbe(1000), group);
  assert.deepEqual(bisect.streamEnded(1001, false), []);
  bisect.streamOpened();
  assert.deepEqual(bisect.nextProbe(2000), group, 'not halved: the restart said nothing about the names');
});

test('an ordinary request cut short by the server going away makes no suspects', () => {
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: () => true });
  bisect.streamOpened();
  bisect.recordSent([{ typeUrl: LISTENER, name: L('x') }], 0);
  assert.deepEqual(bisect.streamEnded(1, false), []);
  assert.equal(bisect.active, false);
  assert.equal(bisect.holds(LISTENER, L('x')), false);
});

test('a single name is rejected only when its own probe ends the stream twice', () => {
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: () => true });
  const p = { typeUrl: LISTENER, name: L('lone') };
  const other = { typeUrl: LISTENER, name: L('other') };
  bisect.streamOpened();
  bisect.recordSent([p], 0);
  bisect.streamEnded(1);
  let t = 1000;
  const probeAfterConfirmedRequest = (): NamePair[] => {
    bisect.streamOpened();
    bisect.recordSent([other], t);
    assert.deepEqual(bisect.nextProbe(t + SETTLE), [p]);
    const rejected = bisect.streamEnded(t + SETTLE + 1);
    t += 10 * SETTLE;
    return rejected;
  };
  assert.deepEqual(probeAfterConfirmedRequest(), [], 'one strike');
  assert.deepEqual(probeAfterConfirmedRequest(), [p], 'two strikes');
});

test('a name unsubscribed and subscribed again while its probe is out is probed again', () => {
  const desired = new Set([L('x'), L('y')]);
  const bisect = new PoisonBisect({ settleMs: SETTLE, isDesired: (_t, n) => desired.has(n) });
  const x = { typeUrl: LISTENER, name: L('x') };
  const y = { typeUrl: LISTENER, name: L('y') };
  bisect.streamOpened();
  bisect.recordSent([x, y], 0);
  bisect.streamEnded(1);
  bisect.streamOpened();
  assert.deepEqual(bisect.nextProbe(1000), [x, y]);
  // The client reconnects: its name is unsubscribed upstream, then subscribed again.
  desired.delete(x.name);
  bisect.forget(x.typeUrl, x.name);
  desired.add(x.name);
  bisect.enqueue([x]);
  // Once the first probe is confirmed, the name goes out again: the unsubscribe came after that probe.
  assert.deepEqual(bisect.nextProbe(1000 + SETTLE), [x]);
  assert.equal(bisect.holds(LISTENER, y.name), false, 'the rest of the first probe is cleared');
});
