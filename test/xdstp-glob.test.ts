import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { XdstpNameError, canonicalUrl, globKeyOf, matchesGlob, parseUrl, parseUrn, type XdstpName } from '../src/xdstp';

const L = 'xdstp://some-authority/envoy.config.listener.v3.Listener';
const LS = 'xdstp://some-authority/envoy.config.listeners.v3.Listener';
const ENVOY_PARAMS = 'xds.node_type=ingress&xds.client_features.envoy.config.no_bind_to_port=true';
const ENVOY_PARAMS_SORTED = 'xds.client_features.envoy.config.no_bind_to_port=true&xds.node_type=ingress';

describe('globKeyOf', () => {
  const cases: Array<[name: string, urn: string, key: string]> = [
    ['the last segment becomes *', 'xdstp://a/t/p/x', 'xdstp://a/t/p/*'],
    ['an id without / belongs to the top-level glob', 'xdstp://a/t/x', 'xdstp://a/t/*'],
    ['the empty id belongs to the top-level glob', 'xdstp://a/t', 'xdstp://a/t/*'],
    ['deep ids keep their parent path', 'xdstp://a/t/p/q/r/x', 'xdstp://a/t/p/q/r/*'],
    ['parameters are kept and sorted', 'xdstp://a/t/p/q/x?b=2&a=1', 'xdstp://a/t/p/q/*?a=1&b=2'],
    ['an empty last segment is replaced too', 'xdstp://a/t/p/', 'xdstp://a/t/p/*'],
    ['an empty first segment is kept', 'xdstp://a/t//x', 'xdstp://a/t//*'],
    ['an escaped / in the id is a real separator', 'xdstp://a/t/p%2Fx', 'xdstp://a/t/p/*'],
    ['the authority is re-encoded', 'xdstp://a%2fb/t/x', 'xdstp://a%2Fb/t/*'],
    ['reserved id characters stay escaped', 'xdstp://a/t/p%3F/x', 'xdstp://a/t/p%3F/*'],
    ['non-ASCII and ~ are escaped', 'xdstp://a/t/é/x?z=~', 'xdstp://a/t/%C3%A9/*?z=%7E'],
    ['a last segment that merely contains * is a member', 'xdstp://a/t/p/a*', 'xdstp://a/t/p/*'],
    ['the empty authority', 'xdstp:///t/x', 'xdstp:///t/*'],
    ['spec: listener glob member with client parameters', `${LS}/my-listeners/foo?${ENVOY_PARAMS}`, `${LS}/my-listeners/*?${ENVOY_PARAMS_SORTED}`],
    ['spec: relay example, a-listeners/bar', `${LS}/a-listeners/bar`, `${LS}/a-listeners/*`],
    ['spec: relay example, b-listeners/baz', `${LS}/b-listeners/baz`, `${LS}/b-listeners/*`],
    ['spec: member of a glob with ?some=thing', `${L}/foo/bar?some=thing`, `${L}/foo/*?some=thing`],
  ];
  for (const [name, urn, key] of cases) {
    test(name, () => {
      const parsed = parseUrn(urn);
      assert.equal(globKeyOf(parsed), key);
      // The key is itself a canonical glob URL the member matches.
      assert.equal(canonicalUrl(key), key);
      assert.equal(parseUrl(key).glob, true);
      assert.equal(matchesGlob(parsed, parseUrl(key)), true);
    });
  }

  test('glob-in-urn: a glob has no parent glob', () => {
    assert.throws(() => globKeyOf(parseUrl('xdstp://a/t/p/*')), (err: unknown) => {
      assert.ok(err instanceof XdstpNameError);
      assert.equal(err.code, 'glob-in-urn');
      assert.equal(err.input, 'xdstp://a/t/p/*');
      assert.match(err.message, /is a glob/);
      return true;
    });
  });

  for (const url of ['xdstp://a/t/x#entry=e', 'xdstp://a/t/x#alt=xdstp://b/t/y']) {
    test(`directive-in-urn: a URL with directives is not a member: ${url}`, () => {
      assert.throws(() => globKeyOf(parseUrl(url)), (err: unknown) => {
        assert.ok(err instanceof XdstpNameError);
        assert.equal(err.code, 'directive-in-urn');
        assert.equal(err.input, url);
        assert.match(err.message, /carries processing directives/);
        return true;
      });
    });
  }
});

describe('matchesGlob', () => {
  const many = (order: number[], override?: [number, string]): string =>
    order.map((i) => `k${i}=${override !== undefined && override[0] === i ? override[1] : `v${i}`}`).join('&');
  const ascending = Array.from({ length: 20 }, (_, i) => i);
  const descending = [...ascending].reverse();

  // [name, member URN, glob URL, matches]
  const cases: Array<[name: string, urn: string, glob: string, match: boolean]> = [
    ['spec: same context parameters match', `${L}/foo/bar?some=thing`, `${L}/foo/*?some=thing`, true],
    ['spec: a member without the glob parameters does not match', `${L}/foo/bar`, `${L}/foo/*?some=thing`, false],
    ['spec relay: a-listeners/foo is in a-listeners/*', `${LS}/a-listeners/foo`, `${LS}/a-listeners/*`, true],
    ['spec relay: a-listeners/bar is in a-listeners/*', `${LS}/a-listeners/bar`, `${LS}/a-listeners/*`, true],
    ['spec relay: b-listeners/baz is not in a-listeners/*', `${LS}/b-listeners/baz`, `${LS}/a-listeners/*`, false],
    ['spec: client parameters in another order still match', `${LS}/my-listeners/foo?${ENVOY_PARAMS_SORTED}`, `${LS}/my-listeners/*?${ENVOY_PARAMS}`, true],
    ['an extra member parameter does not match', `${L}/foo/bar?some=thing&more=1`, `${L}/foo/*?some=thing`, false],
    ['an extra glob parameter does not match', `${L}/foo/bar?some=thing`, `${L}/foo/*?some=thing&more=1`, false],
    ['a different parameter value does not match', `${L}/foo/bar?some=other`, `${L}/foo/*?some=thing`, false],
    ['an empty value is not a missing parameter', 'xdstp://a/t/p/x', 'xdstp://a/t/p/*?k', false],
    ['an empty value matches an empty value', 'xdstp://a/t/p/x?k=', 'xdstp://a/t/p/*?k', true],
    ['a different authority does not match', 'xdstp://b/t/p/x', 'xdstp://a/t/p/*', false],
    ['a different type does not match', 'xdstp://a/u/p/x', 'xdstp://a/t/p/*', false],
    ['types are compared case-sensitively', 'xdstp://a/T/p/x', 'xdstp://a/t/p/*', false],
    ['a grandchild is not a direct member', 'xdstp://a/t/p/q/x', 'xdstp://a/t/p/*', false],
    ['the glob parent itself is not a member', 'xdstp://a/t/p', 'xdstp://a/t/p/*', false],
    ['a sibling sharing a prefix is not a member', 'xdstp://a/t/pp/x', 'xdstp://a/t/p/*', false],
    ['a shorter sibling is not a member', 'xdstp://a/t/q/x', 'xdstp://a/t/p/*', false],
    ['an id without / is in the top-level glob', 'xdstp://a/t/x', 'xdstp://a/t/*', true],
    ['an id with / is not in the top-level glob', 'xdstp://a/t/p/x', 'xdstp://a/t/*', false],
    ['the empty id is in the top-level glob', 'xdstp://a/t', 'xdstp://a/t/*', true],
    ['an empty last segment is a member', 'xdstp://a/t/p/', 'xdstp://a/t/p/*', true],
    ['an empty first segment is its own parent path', 'xdstp://a/t//x', 'xdstp://a/t//*', true],
    ['/x is not in the top-level glob', 'xdstp://a/t//x', 'xdstp://a/t/*', false],
    ['an escaped / in the member id is a separator', 'xdstp://a/t/p%2Fx', 'xdstp://a/t/p/*', true],
    ['a glob spelled %2a', 'xdstp://a/t/p/x', 'xdstp://a/t/p/%2a', true],
    ['a glob with an escaped /', 'xdstp://a/t/p/x', 'xdstp://a/t/p%2F*', true],
    ['parameters are compared decoded', 'xdstp://a/t/p/x?k=A', 'xdstp://a/t/p/*?k=%41', true],
    ['keys are compared decoded', 'xdstp://a/t/p/x?%6B=v', 'xdstp://a/t/p/*?k=v', true],
    ['a repeated member key counts once, with its first value', 'xdstp://a/t/p/x?k=1&k=2', 'xdstp://a/t/p/*?k=1', true],
    ['a repeated member key does not take its later value', 'xdstp://a/t/p/x?k=1&k=2', 'xdstp://a/t/p/*?k=2', false],
    ['no parameters on either side match', 'xdstp://a/t/p/x', 'xdstp://a/t/p/*', true],
    ['authority spelled differently matches', 'xdstp://%61/t/p/x', 'xdstp://a/t/p/*', true],
    ['the empty authority matches itself', 'xdstp:///t/x', 'xdstp:///t/*', true],
    ['the empty authority is not another authority', 'xdstp:///t/x', 'xdstp://a/t/*', false],
    ['non-ASCII path', 'xdstp://a/t/é/x', 'xdstp://a/t/%C3%A9/*', true],
    ['a reserved character in the parent path', 'xdstp://a/t/p%3F/x', 'xdstp://a/t/p%3F/*', true],
    ['a member whose last segment contains *', 'xdstp://a/t/p/a*', 'xdstp://a/t/p/*', true],
    ['a glob that carries directives still selects members', 'xdstp://a/t/p/x', 'xdstp://a/t/p/*#alt=xdstp://b/t/p/*', true],
    ['more than 16 parameters in another order match', `xdstp://a/t/p/x?${many(descending)}`, `xdstp://a/t/p/*?${many(ascending)}`, true],
    ['more than 16 parameters with one value changed do not', `xdstp://a/t/p/x?${many(descending, [7, 'other'])}`, `xdstp://a/t/p/*?${many(ascending)}`, false],
    ['node parameters must all be equal', 'xdstp://a/t/x?xds.node.id=n1', 'xdstp://a/t/*?xds.node.id=n2', false],
  ];
  for (const [name, urn, glob, match] of cases) {
    test(name, () => {
      const member = parseUrn(urn);
      const g = parseUrl(glob);
      assert.equal(g.glob, true, 'test glob must be a glob');
      assert.equal(matchesGlob(member, g), match);
      // The definition in XDSTP.md: replace the last id segment by '*' and compare canonically.
      assert.equal(globKeyOf(member) === canonicalUrl(glob), match);
    });
  }

  const never: Array<[name: string, urn: XdstpName, glob: XdstpName]> = [
    ['a glob is not a member of itself', parseUrl('xdstp://a/t/p/*'), parseUrl('xdstp://a/t/p/*')],
    ['a glob is not a member of its parent glob', parseUrl('xdstp://a/t/p/*'), parseUrl('xdstp://a/t/*')],
    ['nothing is a member of a non-glob', parseUrn('xdstp://a/t/p/x'), parseUrl('xdstp://a/t/p/x')],
    ['a name with #entry is not a member', parseUrl('xdstp://a/t/p/x#entry=e'), parseUrl('xdstp://a/t/p/*')],
    ['a name with #alt is not a member', parseUrl('xdstp://a/t/p/x#alt=xdstp://b/t/p/x'), parseUrl('xdstp://a/t/p/*')],
  ];
  for (const [name, urn, glob] of never) {
    test(`never matches, never throws: ${name}`, () => assert.equal(matchesGlob(urn, glob), false));
  }
});
