/** RuleCoverage: which situations of the promise a run reached. */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { CLUSTER, LISTENER, ROUTE, xdstp } from '../support/names';
import { RuleCoverage, SITUATIONS, type Situation } from './coverage';
import { Model } from './model';
import type { ModelOptions, Step } from './types';

const opts: ModelOptions = {
  fullStateTypes: new Set([LISTENER, CLUSTER]),
  legacyWildcardTypes: new Set([LISTENER, CLUSTER]),
  authorities: new Set(['a']),
  hasDefaultUpstream: true,
};
const R = (rest: string): string => xdstp('a', ROUTE, rest);

function situationsAfter(steps: Step[], nack?: [string, string, string, string, string | undefined]): Set<Situation> {
  const m = new Model(opts);
  for (const s of steps) m.apply(s);
  if (nack) m.noteNack(...nack);
  return new RuleCoverage(opts).situations(m);
}

describe('rule coverage', () => {
  it('a glob member held under a spelling and its canonical name is reached', () => {
    const found = situationsAfter([
      { op: 'connect', client: 'c', protocol: 'delta' },
      { op: 'request', client: 'c', typeUrl: ROUTE, subscribe: [R('g/*?a=1&b=2'), R('g/m1?b=2&a=1')], unsubscribe: [] },
      { op: 'put', authority: 'a', typeUrl: ROUTE, name: R('g/m1?a=1&b=2'), version: '1' },
    ]);
    assert.ok(found.has('a delta client holds a glob member under its spelling and its canonical name'));
    assert.ok(found.has('a glob with members is held'));
    assert.ok(!found.has('a delta client holds one singleton under two spellings'));
  });

  it('a NACK deciding a view and a shared upstream key are reached', () => {
    const found = situationsAfter(
      [
        { op: 'connect', client: 'c', protocol: 'delta' },
        { op: 'connect', client: 's', protocol: 'sotw' },
        { op: 'request', client: 'c', typeUrl: ROUTE, subscribe: [R('x')], unsubscribe: [] },
        { op: 'request', client: 's', typeUrl: ROUTE, subscribe: [R('x')], unsubscribe: [] },
        { op: 'put', authority: 'a', typeUrl: ROUTE, name: R('x'), version: '2' },
      ],
      ['c', ROUTE, R('x'), '2', '1'],
    );
    assert.ok(found.has('a NACK decides what a client holds'));
    assert.ok(found.has('two clients share an upstream key'));
    assert.ok(found.has('a SotW client holds a per-name type'));
  });

  it('a run that reaches nothing reports every situation missed', () => {
    const cov = new RuleCoverage(opts);
    cov.observe(new Model(opts));
    assert.deepEqual(cov.missed(), [...SITUATIONS]);
    assert.match(cov.report(), /out of 1/);
  });
});
