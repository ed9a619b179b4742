/**
 * The reference model alone: each test is one rule of "what a client gets",
 * stated as steps and the view the model then owes the client.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { CLUSTER, LISTENER, LISTENER_COLLECTION, ROUTE, xdstp } from '../support/names';
import { Model } from './model';
import type { ModelOptions, Protocol, Step } from './types';

function options(over: Partial<ModelOptions> = {}): ModelOptions {
  return {
    fullStateTypes: new Set([LISTENER, CLUSTER]),
    legacyWildcardTypes: new Set([LISTENER, CLUSTER]),
    authorities: new Set(['a', 'b']),
    hasDefaultUpstream: true,
    ...over,
  };
}

function modelWith(steps: Step[], over: Partial<ModelOptions> = {}): Model {
  const m = new Model(options(over));
  for (const s of steps) m.apply(s);
  return m;
}

/** A client's expected view as a plain object, for readable diffs. */
function view(m: Model, client: string, typeUrl: string): Record<string, string> {
  return Object.fromEntries([...m.expected(client, typeUrl)].sort(([x], [y]) => (x < y ? -1 : 1)));
}

const connect = (client: string, protocol: Protocol = 'delta'): Step => ({ op: 'connect', client, protocol });
const sub = (client: string, typeUrl: string, ...names: string[]): Step => ({ op: 'request', client, typeUrl, subscribe: names, unsubscribe: [] });
const unsub = (client: string, typeUrl: string, ...names: string[]): Step => ({ op: 'request', client, typeUrl, subscribe: [], unsubscribe: names });
const put = (typeUrl: string, name: string, version: string, authority: string | null = authorityOfName(name)): Step => ({ op: 'put', authority, typeUrl, name, version });
const del = (typeUrl: string, name: string, authority: string | null = authorityOfName(name)): Step => ({ op: 'delete', authority, typeUrl, name });

/** The authority a test name lives on: written out here, not derived with the model's helpers. */
function authorityOfName(name: string): string | null {
  if (!name.startsWith('xdstp://')) return null;
  return name.slice('xdstp://'.length).split('/')[0]!;
}

const R = (rest: string): string => xdstp('a', ROUTE, rest);
const L = (rest: string): string => xdstp('a', LISTENER, rest);

describe('singletons', () => {
  it('a singleton is held under each spelling the client used', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x?b=2&a=1'), R('x?a=1&b=2')), put(ROUTE, R('x?a=1&b=2'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x?a=1&b=2')]: '1', [R('x?b=2&a=1')]: '1' });
  });

  it('unsubscribing one spelling keeps the other', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x?b=2&a=1'), R('x?a=1&b=2')), put(ROUTE, R('x?a=1&b=2'), '1'), unsub('c', ROUTE, R('x?b=2&a=1'))]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x?a=1&b=2')]: '1' });
  });

  it('a name that does not exist is not expected until it is created', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x'))]);
    assert.deepEqual(view(m, 'c', ROUTE), {});
    m.apply(put(ROUTE, R('x'), '1'));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '1' });
  });

  it('a resource is held at the control plane’s current version', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1'), put(ROUTE, R('x'), '2')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
  });

  it('a deleted resource is no longer expected and may be reported removed', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1')]);
    assert.equal(m.mayRemove('c', ROUTE, R('x')), false);
    m.apply(del(ROUTE, R('x')));
    assert.deepEqual(view(m, 'c', ROUTE), {});
    assert.equal(m.mayRemove('c', ROUTE, R('x')), true);
  });

  it('a list collection is a singleton on its own type URL', () => {
    const coll = xdstp('a', LISTENER_COLLECTION, 'all?z=1');
    const m = modelWith([connect('c'), sub('c', LISTENER_COLLECTION, coll), sub('c', LISTENER, coll), put(LISTENER_COLLECTION, coll, '1')]);
    assert.deepEqual(view(m, 'c', LISTENER_COLLECTION), { [coll]: '1' });
    assert.deepEqual(view(m, 'c', LISTENER), {}, 'a collection name on the Listener stream is a type mismatch');
  });

  it('a resource served by an upstream other than its name’s authority is never held', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1', 'b')]);
    assert.deepEqual(view(m, 'c', ROUTE), {});
  });
});

describe('globs', () => {
  it('a glob covers direct children with exactly its context parameters', () => {
    const m = modelWith([
      connect('c'),
      sub('c', ROUTE, R('g/*?n=1')),
      put(ROUTE, R('g/m1?n=1'), '1'),
      put(ROUTE, R('g/m2'), '1'),
      put(ROUTE, R('g/m3?n=1&z=2'), '1'),
      put(ROUTE, R('g/sub/m4?n=1'), '1'),
      put(ROUTE, R('h/m5?n=1'), '1'),
      put(ROUTE, xdstp('b', ROUTE, 'g/m6?n=1'), '1'),
    ]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1?n=1')]: '1' });
  });

  it('glob members are held under their canonical names', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*?b=2&a=1')), put(ROUTE, R('g/%6D1?b=2&a=1'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1?a=1&b=2')]: '1' });
  });

  it('a member subscribed by another spelling is held under that spelling and its canonical name', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*?a=1&b=2'), R('g/m1?b=2&a=1')), put(ROUTE, R('g/m1?a=1&b=2'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1?a=1&b=2')]: '1', [R('g/m1?b=2&a=1')]: '1' });
  });

  it('a member subscribed by its canonical name is one entry', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*'), R('g/m1')), put(ROUTE, R('g/m1'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
  });

  it('unsubscribing the glob keeps a member still subscribed by name', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*'), R('g/m1')), put(ROUTE, R('g/m1'), '1'), put(ROUTE, R('g/m2'), '1'), unsub('c', ROUTE, R('g/*'))]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
    assert.equal(m.mayRemove('c', ROUTE, R('g/m2')), true);
    assert.equal(m.mayRemove('c', ROUTE, R('g/m1')), false);
  });

  it('a glob covers members created after it was subscribed', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*')), put(ROUTE, R('g/m1'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
  });

  it('a glob spelled with a percent-encoded star is the same glob', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/%2A')), put(ROUTE, R('g/m1'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
  });
});

describe('refused names', () => {
  const refused = [
    ['an unknown authority', xdstp('nope', ROUTE, 'x')],
    ['another type', xdstp('a', CLUSTER, 'x')],
    ['a malformed name', 'xdstp://a'],
    ['a processing directive', R('x#entry=y')],
  ] as const;
  for (const [why, name] of refused) {
    it(`a refused name covers nothing: ${why}`, () => {
      const m = modelWith([connect('c'), sub('c', ROUTE, name), put(ROUTE, R('x'), '1'), put(CLUSTER, xdstp('a', CLUSTER, 'x'), '1')]);
      assert.deepEqual(view(m, 'c', ROUTE), {});
      assert.equal(m.covers('c', ROUTE, name), false);
      assert.deepEqual([...m.upstreamKeys('a'), ...m.upstreamKeys('nope'), ...m.upstreamKeys(null)], []);
    });
  }

  it('a legacy name is refused when there is no default upstream', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, 'r1'), put(ROUTE, 'r1', '1')], { hasDefaultUpstream: false });
    assert.deepEqual(view(m, 'c', ROUTE), {});
    assert.equal(m.covers('c', ROUTE, 'r1'), false);
  });

  it('a refused name does not affect the client’s other subscriptions', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, xdstp('nope', ROUTE, 'x'), R('x')), put(ROUTE, R('x'), '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '1' });
  });
});

describe('legacy names and the wildcard', () => {
  it('a legacy name is held verbatim from the default upstream', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, 'r1'), put(ROUTE, 'r1', '1'), put(ROUTE, 'r2', '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), { r1: '1' });
  });

  it('an empty first Listener request is the legacy wildcard: every legacy Listener, no xdstp one', () => {
    const m = modelWith([connect('c'), sub('c', LISTENER), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '3'), put(LISTENER, L('x'), '1')]);
    assert.deepEqual(view(m, 'c', LISTENER), { l1: '1', l2: '3' });
  });

  it('an empty first request on a type without the legacy wildcard subscribes nothing', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE), put(ROUTE, 'r1', '1')]);
    assert.deepEqual(view(m, 'c', ROUTE), {});
    assert.deepEqual([...m.upstreamKeys(null)], []);
  });

  it('the legacy wildcard continues when names are added', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER), sub('c', CLUSTER, 'c9', xdstp('a', CLUSTER, 'x')), put(CLUSTER, 'c1', '1'), put(CLUSTER, xdstp('a', CLUSTER, 'x'), '1')]);
    assert.deepEqual(view(m, 'c', CLUSTER), { c1: '1', [xdstp('a', CLUSTER, 'x')]: '1' });
  });

  it('the legacy wildcard ends on an unsubscribe of * and named resources stay', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER), sub('c', CLUSTER, 'c2'), put(CLUSTER, 'c1', '1'), put(CLUSTER, 'c2', '1'), unsub('c', CLUSTER, '*')]);
    assert.deepEqual(view(m, 'c', CLUSTER), { c2: '1' });
    assert.equal(m.mayRemove('c', CLUSTER, 'c1'), true);
  });

  it('an empty request after names were subscribed is not a wildcard', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER, 'c2'), unsub('c', CLUSTER, 'c2'), sub('c', CLUSTER), put(CLUSTER, 'c1', '1')]);
    assert.deepEqual(view(m, 'c', CLUSTER), {});
  });

  it('an explicit * subscribes the wildcard on any later request', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER, 'c2'), sub('c', CLUSTER, '*'), put(CLUSTER, 'c1', '1')]);
    assert.deepEqual(view(m, 'c', CLUSTER), { c1: '1' });
  });

  it('unsubscribing a name still covered by the wildcard keeps it', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER), sub('c', CLUSTER, 'c1'), put(CLUSTER, 'c1', '1'), unsub('c', CLUSTER, 'c1')]);
    assert.deepEqual(view(m, 'c', CLUSTER), { c1: '1' });
    assert.equal(m.mayRemove('c', CLUSTER, 'c1'), false);
  });

  it('without a default upstream the wildcard covers nothing', () => {
    const m = modelWith([connect('c'), sub('c', LISTENER), put(LISTENER, 'l1', '1')], { hasDefaultUpstream: false });
    assert.deepEqual(view(m, 'c', LISTENER), {});
    assert.deepEqual([...m.upstreamKeys(null)], []);
  });
});

describe('state of the world', () => {
  it('an empty first SotW list is the legacy wildcard', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER), put(LISTENER, 'l1', '1')]);
    assert.deepEqual(view(m, 's', LISTENER), { l1: '1' });
  });

  it('a SotW list naming resources without * ends the legacy wildcard', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER), sub('s', LISTENER, 'l2'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '1')]);
    assert.deepEqual(view(m, 's', LISTENER), { l2: '1' });
  });

  it('an empty SotW list after naming resources unsubscribes everything', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER, 'l1'), unsub('s', LISTENER, 'l1'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '1')]);
    assert.deepEqual(view(m, 's', LISTENER), {});
    assert.deepEqual([...m.upstreamKeys(null)], []);
  });

  it('SotW full-state types hold exactly the covered resources, under canonical names', () => {
    const m = modelWith([
      connect('s', 'sotw'),
      sub('s', LISTENER, L('x?b=2&a=1'), L('g/*')),
      put(LISTENER, L('x?b=2&a=1'), '1'),
      put(LISTENER, L('g/m1'), '4'),
      put(LISTENER, L('y'), '1'),
    ]);
    assert.deepEqual(view(m, 's', LISTENER), { [L('g/m1')]: '4', [L('x?a=1&b=2')]: '1' });
    m.apply(del(LISTENER, L('g/m1')));
    assert.deepEqual(view(m, 's', LISTENER), { [L('x?a=1&b=2')]: '1' });
    assert.equal(m.mayLinger('s', LISTENER, L('g/m1')), false, 'a full state omits what was deleted');
  });

  it('a SotW per-name view may keep a deleted name but must hold the live ones', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', ROUTE, R('x'), R('y')), put(ROUTE, R('x'), '1'), put(ROUTE, R('y'), '1'), del(ROUTE, R('y'))]);
    assert.deepEqual(view(m, 's', ROUTE), { [R('x')]: '1' });
    assert.equal(m.mayLinger('s', ROUTE, R('y')), true);
    assert.equal(m.mayLinger('s', ROUTE, R('x')), false);
  });

  it('a SotW per-name view may keep a name no longer asked for', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', ROUTE, R('x')), put(ROUTE, R('x'), '1'), unsub('s', ROUTE, R('x'))]);
    assert.deepEqual(view(m, 's', ROUTE), {});
    assert.equal(m.mayLinger('s', ROUTE, R('x')), true);
  });

  it('a delta view never keeps a deleted name', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1'), del(ROUTE, R('x'))]);
    assert.equal(m.mayLinger('c', ROUTE, R('x')), false);
  });

  it('a SotW client covers a resource under any spelling of its name', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', ROUTE, R('x?b=2&a=1'))]);
    assert.equal(m.covers('s', ROUTE, R('x?a=1&b=2')), true);
    assert.equal(m.covers('s', ROUTE, R('y')), false);
  });

  it('a SotW client subscribed by two spellings holds the resource once, canonically', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', ROUTE, R('x?b=2&a=1'), R('x?a=1&b=2')), put(ROUTE, R('x?b=2&a=1'), '1')]);
    assert.deepEqual(view(m, 's', ROUTE), { [R('x?a=1&b=2')]: '1' });
    assert.equal(m.mayRemove('s', ROUTE, R('x?b=2&a=1')), false);
    assert.equal(m.mayLinger('s', ROUTE, R('x?b=2&a=1')), false);
  });
});

describe('what a delta client may be sent', () => {
  it('a delta singleton covers only the spelling the client used', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x?b=2&a=1'))]);
    assert.equal(m.covers('c', ROUTE, R('x?b=2&a=1')), true);
    assert.equal(m.covers('c', ROUTE, R('x?a=1&b=2')), false);
  });

  it('a glob covers its members under their canonical names only', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*?a=1&b=2'))]);
    assert.equal(m.covers('c', ROUTE, R('g/m1?a=1&b=2')), true);
    assert.equal(m.covers('c', ROUTE, R('g/m1?b=2&a=1')), false);
    assert.equal(m.covers('c', ROUTE, R('g/m1')), false);
  });

  it('the wildcard covers legacy names and no xdstp name', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER)]);
    assert.equal(m.covers('c', CLUSTER, 'anything'), true);
    assert.equal(m.covers('c', CLUSTER, xdstp('a', CLUSTER, 'x')), false);
  });

  it('the empty-glob signal names no resource: the glob URL may always be reported removed', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*')), put(ROUTE, R('g/m1'), '1')]);
    assert.equal(m.mayRemove('c', ROUTE, R('g/*')), true);
    assert.equal(m.covers('c', ROUTE, R('g/*')), false, 'a glob URL is not a member of itself');
  });

  it('a live covered resource may not be reported removed; one not covered may', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1'), put(ROUTE, R('y'), '1')]);
    assert.equal(m.mayRemove('c', ROUTE, R('x')), false);
    assert.equal(m.mayRemove('c', ROUTE, R('y')), true);
  });
});

describe('NACKs', () => {
  const base = [connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1'), put(ROUTE, R('x'), '2')];

  it('a NACKed version is kept until the resource changes', () => {
    const m = modelWith(base);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '1' });
    m.apply(put(ROUTE, R('x'), '2'));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '1' }, 'the same version again is no change');
    m.apply(put(ROUTE, R('x'), '3'));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '3' });
  });

  it('a client that NACKed its first version of a name holds nothing under it', () => {
    const m = modelWith(base);
    m.noteNack('c', ROUTE, R('x'), '2', undefined);
    assert.deepEqual(view(m, 'c', ROUTE), {});
  });

  it('a NACK ends when the client subscribes the name again', () => {
    const m = modelWith(base);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    m.apply(sub('c', ROUTE, R('x')));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
  });

  it('a NACK of a glob member ends when the client subscribes the glob again', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*')), put(ROUTE, R('g/m1'), '1'), put(ROUTE, R('g/m1'), '2')]);
    m.noteNack('c', ROUTE, R('g/m1'), '2', '1');
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
    m.apply(sub('c', ROUTE, R('g/*')));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '2' });
  });

  it('a NACKed removal of a glob member stands when the glob is subscribed again', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*')), put(ROUTE, R('g/m1'), '1'), put(ROUTE, R('g/m2'), '1'), del(ROUTE, R('g/m1'))]);
    m.noteNack('c', ROUTE, R('g/m1'), '', '1');
    m.apply(sub('c', ROUTE, R('g/*')));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1', [R('g/m2')]: '1' }, 'the glob is answered with the members that exist');
  });

  it('a NACK ends when the stream ends', () => {
    const m = modelWith(base);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    m.apply({ op: 'reconnect', client: 'c', omitGlobMembers: false });
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
  });

  it('a NACK ends when the relay restarts and the client opens a new stream', () => {
    const m = modelWith(base);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    m.apply({ op: 'relayRestart', upstreamDownFirst: false });
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
  });

  it('a relay restart ends the NACKs of its own clients only', () => {
    const m = modelWith([...base, connect('d'), sub('d', ROUTE, R('x')), { op: 'moveClient', client: 'd' }]);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    m.noteNack('d', ROUTE, R('x'), '2', '1');
    m.apply({ op: 'relayRestart', upstreamDownFirst: false });
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' }, 'c was on the restarted relay');
    assert.deepEqual(view(m, 'd', ROUTE), { [R('x')]: '1' }, 'd had moved to the other relay');
  });

  it('moving to the other relay ends a NACK', () => {
    const m = modelWith(base);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    m.apply({ op: 'moveClient', client: 'c' });
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
  });

  it('a NACKed removal keeps the resource until it is created again', () => {
    const m = modelWith([...base, del(ROUTE, R('x'))]);
    m.noteNack('c', ROUTE, R('x'), '', '2');
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
    m.apply(put(ROUTE, R('x'), '5'));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '5' });
  });

  it('a NACK of one resource does not touch another', () => {
    const m = modelWith([...base, sub('c', ROUTE, R('y')), put(ROUTE, R('y'), '1')]);
    m.noteNack('c', ROUTE, R('x'), '2', '1');
    m.apply(put(ROUTE, R('y'), '2'));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '1', [R('y')]: '2' });
  });

  it('a rejected SotW full state is kept until a covered resource changes', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER, 'l1', 'l2'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '1'), del(LISTENER, 'l2')]);
    // The full state without l2 was rejected: the client keeps l2.
    m.noteNack('s', LISTENER, 'l2', '', '1');
    m.apply(put(LISTENER, 'l9', '1'));
    assert.deepEqual(view(m, 's', LISTENER), { l1: '1', l2: '1' }, 'a resource it does not ask for is no news');
    m.apply(put(LISTENER, 'l1', '2'));
    assert.deepEqual(view(m, 's', LISTENER), { l1: '2' });
  });

  it('a rejected SotW full state is kept through a change on a stopped control plane, until it starts again', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER, 'l1', 'l2'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '1'), del(LISTENER, 'l2')]);
    m.noteNack('s', LISTENER, 'l1', '1', '1');
    m.noteNack('s', LISTENER, 'l2', '', '1');
    m.apply({ op: 'cpStop', authority: null });
    m.apply(put(LISTENER, 'l1', '2'));
    assert.deepEqual(view(m, 's', LISTENER), { l1: '1', l2: '1' }, 'the relay has not seen l1@2: the client keeps the state it had');
    m.apply({ op: 'cpStart', authority: null });
    assert.deepEqual(view(m, 's', LISTENER), { l1: '2' }, 'it sees it now and sends a new state');
  });

  it('a rejected SotW full state already outdated by a change of another covered resource is not kept', () => {
    // Both puts are applied before the response they caused is NACKed (a burst): it carried l1@2 and l2@1.
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER, 'l1', 'l2'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '1'), put(LISTENER, 'l1', '2'), put(LISTENER, 'l2', '2')]);
    m.noteNack('s', LISTENER, 'l1', '2', '1');
    m.noteNack('s', LISTENER, 'l2', '1', '1');
    assert.deepEqual(view(m, 's', LISTENER), { l1: '2', l2: '2' });
  });

  it('a rejected SotW full state stands when the client only drops names from its list', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER, 'l1'), sub('s', LISTENER, 'l2'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l2', '1'), put(LISTENER, 'l1', '2')]);
    m.noteNack('s', LISTENER, 'l1', '2', '1');
    m.apply({ op: 'request', client: 's', typeUrl: LISTENER, subscribe: [], unsubscribe: ['l2'] });
    assert.deepEqual(view(m, 's', LISTENER), { l1: '1' });
  });

  it('a rejected SotW full state ends when the client lists a new name', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', LISTENER, 'l1'), put(LISTENER, 'l1', '1'), put(LISTENER, 'l1', '2')]);
    m.noteNack('s', LISTENER, 'l1', '2', '1');
    assert.deepEqual(view(m, 's', LISTENER), { l1: '1' });
    m.apply(sub('s', LISTENER, 'l3'));
    assert.deepEqual(view(m, 's', LISTENER), { l1: '2' });
  });
});

describe('streams', () => {
  it('a reconnect keeps the subscriptions', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1'), { op: 'reconnect', client: 'c', omitGlobMembers: true }]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '1' });
    assert.deepEqual(m.clients(), ['c']);
  });

  it('a disconnected client is gone and connecting again starts with nothing', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), put(ROUTE, R('x'), '1'), { op: 'disconnect', client: 'c' }]);
    assert.deepEqual(m.clients(), []);
    assert.deepEqual([...m.upstreamKeys('a')], []);
    m.apply(connect('c'));
    assert.deepEqual(m.typesOf('c'), []);
    assert.deepEqual(view(m, 'c', ROUTE), {});
  });

  it('a type with nothing subscribed at a reconnect starts over: its next empty request is the legacy wildcard', () => {
    const m = modelWith([connect('c'), sub('c', CLUSTER, 'c2'), unsub('c', CLUSTER, 'c2'), { op: 'reconnect', client: 'c', omitGlobMembers: false }, sub('c', CLUSTER), put(CLUSTER, 'c1', '1')]);
    assert.deepEqual(view(m, 'c', CLUSTER), { c1: '1' });
  });

  it('the types a client has requested are listed', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x')), sub('c', CLUSTER)]);
    assert.deepEqual(m.typesOf('c').sort(), [CLUSTER, ROUTE].sort());
  });

  it('steps for a client without a stream change nothing', () => {
    const m = modelWith([sub('ghost', ROUTE, R('x')), put(ROUTE, R('x'), '1')]);
    assert.deepEqual(m.clients(), []);
    assert.deepEqual([...m.upstreamKeys('a')], []);
  });

  it('faults of the control plane, the relay and the shared tier take nothing away', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x'), R('g/*')), put(ROUTE, R('x'), '1'), put(ROUTE, R('g/m1'), '1')]);
    const before = view(m, 'c', ROUTE);
    const faults: Step[] = [
      { op: 'cpStop', authority: 'a' },
      { op: 'wait', ms: 5000 },
      { op: 'cpStart', authority: 'a' },
      { op: 'cpRestart', authority: 'a', times: 3, gapMs: 100 },
      { op: 'failover', authority: 'a' },
      { op: 'stall', client: 'c' },
      { op: 'resume', client: 'c' },
      { op: 'relayRestart', upstreamDownFirst: true },
      { op: 'moveClient', client: 'c' },
      { op: 'redisRestartEmpty' },
      { op: 'nackNext', client: 'c', typeUrl: ROUTE },
    ];
    for (const f of faults) m.apply(f);
    assert.deepEqual(view(m, 'c', ROUTE), before);
  });
});

describe('upstream keys', () => {
  it('upstream keys are canonical URNs, canonical globs, and verbatim legacy names and *', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('x?b=2&a=1'), R('g/*?z=1&y=2'), 'Legacy%41'), sub('c', CLUSTER)]);
    assert.deepEqual([...m.upstreamKeys('a')].sort(), [`${ROUTE}\n${R('g/*?y=2&z=1')}`, `${ROUTE}\n${R('x?a=1&b=2')}`].sort());
    assert.deepEqual([...m.upstreamKeys(null)].sort(), [`${CLUSTER}\n*`, `${ROUTE}\nLegacy%41`].sort());
    assert.deepEqual([...m.upstreamKeys('b')], []);
  });

  it('two spellings of one name are one upstream key', () => {
    const m = modelWith([connect('c'), connect('d'), sub('c', ROUTE, R('x?b=2&a=1')), sub('d', ROUTE, R('x?a=1&b=2'))]);
    assert.deepEqual([...m.upstreamKeys('a')], [`${ROUTE}\n${R('x?a=1&b=2')}`]);
  });

  it('upstream keys drop a name once its last client unsubscribes', () => {
    const m = modelWith([connect('c'), connect('d'), sub('c', ROUTE, R('x')), sub('d', ROUTE, R('x')), unsub('c', ROUTE, R('x'))]);
    assert.deepEqual([...m.upstreamKeys('a')], [`${ROUTE}\n${R('x')}`]);
    m.apply(unsub('d', ROUTE, R('x')));
    assert.deepEqual([...m.upstreamKeys('a')], []);
  });

  it('the wildcard stays subscribed upstream while a client has it', () => {
    const m = modelWith([connect('s', 'sotw'), sub('s', CLUSTER)]);
    assert.deepEqual([...m.upstreamKeys(null)], [`${CLUSTER}\n*`]);
    m.apply(sub('s', CLUSTER, 'c1'));
    assert.deepEqual([...m.upstreamKeys(null)], [`${CLUSTER}\nc1`]);
  });
});

describe('field-reported scenarios', () => {
  it('a glob subscribed between two control-plane restarts keeps its member', () => {
    const m = modelWith([
      put(ROUTE, R('g/m1'), '1'),
      connect('c'),
      { op: 'cpRestart', authority: 'a', times: 1, gapMs: 0 },
      sub('c', ROUTE, R('g/*')),
      { op: 'wait', ms: 1500 },
      { op: 'cpRestart', authority: 'a', times: 1, gapMs: 0 },
      { op: 'wait', ms: 3000 },
    ]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
    assert.deepEqual([...m.upstreamKeys('a')], [`${ROUTE}\n${R('g/*')}`]);
  });

  it('a client reconnecting during an upstream re-subscribe keeps its name upstream and gets later changes', () => {
    const m = modelWith([
      connect('c'),
      sub('c', ROUTE, R('x')),
      put(ROUTE, R('x'), '1'),
      { op: 'cpRestart', authority: 'a', times: 1, gapMs: 0 },
      { op: 'reconnect', client: 'c', omitGlobMembers: false },
    ]);
    assert.deepEqual([...m.upstreamKeys('a')], [`${ROUTE}\n${R('x')}`]);
    m.apply(put(ROUTE, R('x'), '2'));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('x')]: '2' });
  });

  it('the only client of a glob that unsubscribes and subscribes it again holds the members again', () => {
    const m = modelWith([connect('c'), sub('c', ROUTE, R('g/*')), put(ROUTE, R('g/m1'), '1'), put(ROUTE, R('g/m2'), '1'), unsub('c', ROUTE, R('g/*'))]);
    assert.deepEqual(view(m, 'c', ROUTE), {});
    assert.deepEqual([...m.upstreamKeys('a')], []);
    m.apply(sub('c', ROUTE, R('g/*')));
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1', [R('g/m2')]: '1' });
  });

  it('a member deleted while the client was away is not expected after it reconnects claiming it', () => {
    const m = modelWith([
      connect('c'),
      sub('c', ROUTE, R('g/*'), R('g/m1')),
      put(ROUTE, R('g/m1'), '1'),
      put(ROUTE, R('g/m3'), '1'),
      { op: 'stall', client: 'c' },
      del(ROUTE, R('g/m3')),
      { op: 'reconnect', client: 'c', omitGlobMembers: false },
    ]);
    assert.deepEqual(view(m, 'c', ROUTE), { [R('g/m1')]: '1' });
    assert.equal(m.mayRemove('c', ROUTE, R('g/m3')), true);
    assert.equal(m.mayRemove('c', ROUTE, R('g/m1')), false);
  });
});
