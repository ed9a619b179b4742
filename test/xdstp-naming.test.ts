import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  XdstpNameError,
  canonicalUrl,
  canonicalUrn,
  formatName,
  isListCollectionType,
  isXdstpName,
  parseUrl,
  parseUrn,
  typeUrlOf,
  type XdstpErrorCode,
  type XdstpName,
} from '../src/xdstp';

type Parser = 'urn' | 'url' | 'both';

function parsersOf(p: Parser): Array<[string, (s: string) => XdstpName]> {
  const all: Array<[string, (s: string) => XdstpName]> = [];
  if (p !== 'url') all.push(['parseUrn', parseUrn]);
  if (p !== 'urn') all.push(['parseUrl', parseUrl]);
  return all;
}

function assertNameError(fn: () => unknown, input: string, code: XdstpErrorCode, fragments: readonly string[]): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof XdstpNameError, `expected XdstpNameError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.input, input);
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  });
}

/** Canonical form of a URN and, when it is not a glob, of the same text read as a URL. */
function assertCanonical(input: string, expected: string): void {
  assert.equal(canonicalUrn(input), expected);
  assert.equal(canonicalUrl(input), expected);
}

describe('XDSTP.md examples, verbatim', () => {
  test('parameters are sorted: xdstp://foo/t/bar?b=2&a=1', () => {
    assertCanonical('xdstp://foo/t/bar?b=2&a=1', 'xdstp://foo/t/bar?a=1&b=2');
  });
  test('an escaped unreserved authority byte is decoded: xdstp://%66oo/t/x', () => {
    assertCanonical('xdstp://%66oo/t/x', 'xdstp://foo/t/x');
  });
  test('~ is escaped: xdstp://foo/t/a~b', () => {
    assertCanonical('xdstp://foo/t/a~b', 'xdstp://foo/t/a%7Eb');
  });
  test('%2a as last segment decodes to a glob: xdstp://foo/t/%2a', () => {
    assert.equal(canonicalUrl('xdstp://foo/t/%2a'), 'xdstp://foo/t/*');
    assert.equal(parseUrl('xdstp://foo/t/%2a').glob, true);
  });
  test('xdstp://foo is an error: resource type missing', () => {
    assertNameError(() => parseUrn('xdstp://foo'), 'xdstp://foo', 'missing-type', ['resource type missing']);
    assertNameError(() => parseUrl('xdstp://foo'), 'xdstp://foo', 'missing-type', ['resource type missing']);
  });
});

describe('spec/000 examples', () => {
  const cases: Array<{ name: string; input: string; parser: 'urn' | 'url'; expected: XdstpName; canonical: string }> = [
    {
      name: 'route configuration with shard and direction parameters',
      input: 'xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?shard_id=1234&direction=inbound',
      parser: 'urn',
      expected: {
        authority: 'some.control.plane',
        resourceType: 'envoy.config.route.v3.RouteConfiguration',
        id: 'foo/bar',
        params: [['shard_id', '1234'], ['direction', 'inbound']],
        glob: false,
      },
      canonical: 'xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?direction=inbound&shard_id=1234',
    },
    {
      name: 'computed URN with node, resource and URL parameters',
      input:
        'xdstp://some-authority/some.type/foo?xds.node.metadata.foo=bar&xds.shard_id=1234&bar=baz&xds.client_feature.lb.least_loaded=false&xds.resource.vip=96.54.3.1',
      parser: 'urn',
      expected: {
        authority: 'some-authority',
        resourceType: 'some.type',
        id: 'foo',
        params: [
          ['xds.node.metadata.foo', 'bar'],
          ['xds.shard_id', '1234'],
          ['bar', 'baz'],
          ['xds.client_feature.lb.least_loaded', 'false'],
          ['xds.resource.vip', '96.54.3.1'],
        ],
        glob: false,
      },
      canonical:
        'xdstp://some-authority/some.type/foo?bar=baz&xds.client_feature.lb.least_loaded=false&xds.node.metadata.foo=bar&xds.resource.vip=96.54.3.1&xds.shard_id=1234',
    },
    {
      name: 'singleton ClusterLoadAssignment',
      input: 'xdstp://some-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo',
      parser: 'urn',
      expected: { authority: 'some-authority', resourceType: 'envoy.config.endpoint.v3.ClusterLoadAssignment', id: 'foo', params: [], glob: false },
      canonical: 'xdstp://some-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo',
    },
    {
      name: 'list collection',
      input: 'xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo',
      parser: 'urn',
      expected: { authority: 'some-authority', resourceType: 'envoy.config.listeners.v3.ListenerCollection', id: 'foo', params: [], glob: false },
      canonical: 'xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo',
    },
    {
      name: 'list collection with context parameters',
      input: 'xdstp://some-authority/envoy.config.listener.v3.ListenerCollection/foo?some=thing',
      parser: 'urn',
      expected: { authority: 'some-authority', resourceType: 'envoy.config.listener.v3.ListenerCollection', id: 'foo', params: [['some', 'thing']], glob: false },
      canonical: 'xdstp://some-authority/envoy.config.listener.v3.ListenerCollection/foo?some=thing',
    },
    {
      name: 'inline collection entry #entry=bar',
      input: 'xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo#entry=bar',
      parser: 'url',
      expected: {
        authority: 'some-authority',
        resourceType: 'envoy.config.listeners.v3.ListenerCollection',
        id: 'foo',
        params: [],
        glob: false,
        entry: 'bar',
      },
      canonical: 'xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo',
    },
    {
      name: 'listener glob with ?node_type=ingress',
      input: 'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?node_type=ingress',
      parser: 'url',
      expected: {
        authority: 'some-authority',
        resourceType: 'envoy.config.listeners.v3.Listener',
        id: 'my-listeners/*',
        params: [['node_type', 'ingress']],
        glob: true,
      },
      canonical: 'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?node_type=ingress',
    },
    {
      name: 'listener glob as sent to the relay, with client capabilities',
      input:
        'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?xds.node_type=ingress&xds.client_features.envoy.config.no_bind_to_port=true',
      parser: 'url',
      expected: {
        authority: 'some-authority',
        resourceType: 'envoy.config.listeners.v3.Listener',
        id: 'my-listeners/*',
        params: [['xds.node_type', 'ingress'], ['xds.client_features.envoy.config.no_bind_to_port', 'true']],
        glob: true,
      },
      canonical:
        'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?xds.client_features.envoy.config.no_bind_to_port=true&xds.node_type=ingress',
    },
    {
      name: 'glob member returned with the glob parameters',
      input:
        'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/foo?xds.node_type=ingress&xds.client_features.envoy.config.no_bind_to_port=true',
      parser: 'urn',
      expected: {
        authority: 'some-authority',
        resourceType: 'envoy.config.listeners.v3.Listener',
        id: 'my-listeners/foo',
        params: [['xds.node_type', 'ingress'], ['xds.client_features.envoy.config.no_bind_to_port', 'true']],
        glob: false,
      },
      canonical:
        'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/foo?xds.client_features.envoy.config.no_bind_to_port=true&xds.node_type=ingress',
    },
    {
      name: 'glob at a longer path',
      input: 'xdstp://some-authority/envoy.config.listener.v3.Listener/some/longer/path/*',
      parser: 'url',
      expected: { authority: 'some-authority', resourceType: 'envoy.config.listener.v3.Listener', id: 'some/longer/path/*', params: [], glob: true },
      canonical: 'xdstp://some-authority/envoy.config.listener.v3.Listener/some/longer/path/*',
    },
    {
      name: 'relay example: client A glob',
      input: 'xdstp://some-authority/envoy.config.listeners.v3.Listener/a-listeners/*',
      parser: 'url',
      expected: { authority: 'some-authority', resourceType: 'envoy.config.listeners.v3.Listener', id: 'a-listeners/*', params: [], glob: true },
      canonical: 'xdstp://some-authority/envoy.config.listeners.v3.Listener/a-listeners/*',
    },
    {
      name: 'relay example: upstream member b-listeners/baz',
      input: 'xdstp://some-authority/envoy.config.listeners.v3.Listener/b-listeners/baz',
      parser: 'urn',
      expected: { authority: 'some-authority', resourceType: 'envoy.config.listeners.v3.Listener', id: 'b-listeners/baz', params: [], glob: false },
      canonical: 'xdstp://some-authority/envoy.config.listeners.v3.Listener/b-listeners/baz',
    },
    {
      name: 'alternative: #alt= names an on-prem fallback',
      input:
        'xdstp://some-cloud-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo#alt=xdstp://some-onprem-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/bar',
      parser: 'url',
      expected: {
        authority: 'some-cloud-authority',
        resourceType: 'envoy.config.endpoint.v3.ClusterLoadAssignment',
        id: 'foo',
        params: [],
        glob: false,
        alt: 'xdstp://some-onprem-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/bar',
      },
      canonical: 'xdstp://some-cloud-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo',
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const parse = c.parser === 'urn' ? parseUrn : parseUrl;
      assert.deepEqual(parse(c.input), c.expected);
      assert.equal((c.parser === 'urn' ? canonicalUrn : canonicalUrl)(c.input), c.canonical);
      // The spec writes these in canonical-enough spelling: non-canonical format reproduces them.
      assert.equal(formatName(parse(c.input)), c.input);
    });
  }
});

describe('percent-encoding per component', () => {
  const cases: Array<[name: string, input: string, canonical: string]> = [
    ['a space is not escaped in the id', 'xdstp://foo/t/a b', 'xdstp://foo/t/a b'],
    ['a space is not escaped in the authority', 'xdstp://my host/t/x', 'xdstp://my host/t/x'],
    ['a space is not escaped in a parameter', 'xdstp://foo/t/x?k=a b', 'xdstp://foo/t/x?k=a b'],
    ['%20 decodes to a raw space', 'xdstp://foo/t/a%20b', 'xdstp://foo/t/a b'],
    ['+ is never a space', 'xdstp://foo/t/a+b?k=c+d', 'xdstp://foo/t/a+b?k=c+d'],
    ['%2B decodes to a plain +', 'xdstp://foo/t/a%2Bb?k=%2b', 'xdstp://foo/t/a+b?k=+'],
    ['~ is escaped in the authority', 'xdstp://f~o/t/x', 'xdstp://f%7Eo/t/x'],
    ['~ is escaped in parameter keys and values', 'xdstp://foo/t/x?~=~', 'xdstp://foo/t/x?%7E=%7E'],
    ['an escaped ~ stays escaped, in uppercase', 'xdstp://foo/t/a%7eb', 'xdstp://foo/t/a%7Eb'],
    ['DEL is escaped', 'xdstp://foo/t/a\x7fb', 'xdstp://foo/t/a%7Fb'],
    ['raw control characters are escaped, not rejected', 'xdstp://foo/t/a\nb\tc\x00', 'xdstp://foo/t/a%0Ab%09c%00'],
    ['raw control characters in the authority are escaped', 'xdstp://f\x01o/t/x', 'xdstp://f%01o/t/x'],
    ['%00 decodes to NUL and is escaped again', 'xdstp://foo/t/%00', 'xdstp://foo/t/%00'],
    ['two-byte UTF-8 is escaped', 'xdstp://foo/t/é', 'xdstp://foo/t/%C3%A9'],
    ['three-byte UTF-8 is escaped', 'xdstp://foo/t/€', 'xdstp://foo/t/%E2%82%AC'],
    ['four-byte UTF-8 (a surrogate pair) is escaped', 'xdstp://foo/t/😀', 'xdstp://foo/t/%F0%9F%98%80'],
    ['non-ASCII in the authority is escaped', 'xdstp://exämple/t/x', 'xdstp://ex%C3%A4mple/t/x'],
    ['non-ASCII in a parameter is escaped', 'xdstp://foo/t/x?city=Zürich', 'xdstp://foo/t/x?city=Z%C3%BCrich'],
    ['lowercase escapes of UTF-8 become uppercase', 'xdstp://foo/t/%c3%a9', 'xdstp://foo/t/%C3%A9'],
    ['escapes mixing ASCII and UTF-8 in one run', 'xdstp://foo/t/%41%C3%A9%42', 'xdstp://foo/t/A%C3%A9B'],
    ['needlessly escaped letters are decoded', 'xdstp://foo/t/%61%62%63', 'xdstp://foo/t/abc'],
    ['%2F in the id becomes a path separator', 'xdstp://foo/t/a%2Fb', 'xdstp://foo/t/a/b'],
    ['%2F stays escaped in the authority', 'xdstp://a%2fb/t/x', 'xdstp://a%2Fb/t/x'],
    ['%3F stays escaped in the authority', 'xdstp://a%3fb/t/x', 'xdstp://a%3Fb/t/x'],
    ['%23 stays escaped in the authority', 'xdstp://a%23b/t/x', 'xdstp://a%23b/t/x'],
    ['the authority does not reserve [ ] or :', 'xdstp://[::1]:8080/t/x', 'xdstp://[::1]:8080/t/x'],
    ['escaped [ ] in the authority are decoded', 'xdstp://%5B%3A%3A1%5D/t/x', 'xdstp://[::1]/t/x'],
    ['a raw ? in the authority is data (it ends only at /)', 'xdstp://fo?o/t/x?k=v', 'xdstp://fo%3Fo/t/x?k=v'],
    ['a raw # in the authority is data (it ends only at /)', 'xdstp://fo#o/t/x', 'xdstp://fo%23o/t/x'],
    ['the authority does not reserve & = , @', 'xdstp://u@a&b=c,d/t/x', 'xdstp://u@a&b=c,d/t/x'],
    ['%25 stays escaped', 'xdstp://foo/t/100%25', 'xdstp://foo/t/100%25'],
    ['the id reserves ?', 'xdstp://foo/t/a%3Fb', 'xdstp://foo/t/a%3Fb'],
    ['the id reserves #', 'xdstp://foo/t/a%23b', 'xdstp://foo/t/a%23b'],
    ['the id reserves [ ]', 'xdstp://foo/t/[x]', 'xdstp://foo/t/%5Bx%5D'],
    ["the id does not reserve & = , : @ ! $ ' ( ) * + ;", "xdstp://foo/t/a&b=c,d:e@f!$'()*+;", "xdstp://foo/t/a&b=c,d:e@f!$'()*+;"],
    ['a parameter reserves & and =', 'xdstp://foo/t/x?a%3db=c%26d', 'xdstp://foo/t/x?a%3Db=c%26d'],
    ['a parameter reserves [ ]', 'xdstp://foo/t/x?a=[1]', 'xdstp://foo/t/x?a=%5B1%5D'],
    ['a parameter does not reserve / ? : ,', 'xdstp://foo/t/x?u=http://h/p?q,r', 'xdstp://foo/t/x?u=http://h/p?q,r'],
    ['a JSON-rendered metadata value keeps its quotes', 'xdstp://foo/t/x?xds.node.metadata.k="v"', 'xdstp://foo/t/x?xds.node.metadata.k="v"'],
    ['a malformed % at the end is kept and re-encoded as %25', 'xdstp://foo/t/100%', 'xdstp://foo/t/100%25'],
    ['% followed by non-hex is kept', 'xdstp://foo/t/%zz', 'xdstp://foo/t/%25zz'],
    ['% followed by one hex digit at the end is kept', 'xdstp://foo/t/%4', 'xdstp://foo/t/%254'],
    ['% followed by one hex digit and a non-hex is kept', 'xdstp://foo/t/%4g', 'xdstp://foo/t/%254g'],
    ['a malformed % next to a valid escape', 'xdstp://foo/t/%%41', 'xdstp://foo/t/%25A'],
    ['a malformed % in the authority', 'xdstp://a%/t/x', 'xdstp://a%25/t/x'],
    ['a malformed % in a parameter value', 'xdstp://foo/t/x?p=50%', 'xdstp://foo/t/x?p=50%25'],
    ['the resource type is neither decoded nor encoded', 'xdstp://foo/envoy.config.cluster.v3.Cluster/x', 'xdstp://foo/envoy.config.cluster.v3.Cluster/x'],
    ["the type may hold sub-delimiters ! $ & ' ( ) * + , ; = : @", "xdstp://foo/a!$&'()*+,;=:@/x", "xdstp://foo/a!$&'()*+,;=:@/x"],
  ];
  for (const [name, input, canonical] of cases) {
    test(name, () => assert.equal(canonicalUrn(input), canonical));
  }
});

describe('context parameters', () => {
  const cases: Array<[name: string, input: string, canonical: string]> = [
    ['sorted by byte order of whole key=value strings: a.b= before a=', 'xdstp://foo/t/x?a=1&a.b=2', 'xdstp://foo/t/x?a.b=2&a=1'],
    ['a-b= sorts before a= (- < =)', 'xdstp://foo/t/x?a=1&a-b=2', 'xdstp://foo/t/x?a-b=2&a=1'],
    ['a_b= sorts after a= (_ > =)', 'xdstp://foo/t/x?a_b=2&a=1', 'xdstp://foo/t/x?a=1&a_b=2'],
    ['ab= sorts after a=', 'xdstp://foo/t/x?ab=2&a=1', 'xdstp://foo/t/x?a=1&ab=2'],
    ['uppercase sorts before lowercase', 'xdstp://foo/t/x?b=1&B=2', 'xdstp://foo/t/x?B=2&b=1'],
    ['digits sort before letters', 'xdstp://foo/t/x?a=1&1=2', 'xdstp://foo/t/x?1=2&a=1'],
    ['sorting uses the encoded form (%C3%A9 before z)', 'xdstp://foo/t/x?z=2&é=1', 'xdstp://foo/t/x?%C3%A9=1&z=2'],
    ['sorting uses the encoded form (%7E before })', 'xdstp://foo/t/x?}=2&~=1', 'xdstp://foo/t/x?%7E=1&}=2'],
    ['a repeated key keeps its first value', 'xdstp://foo/t/x?a=1&a=2', 'xdstp://foo/t/x?a=1'],
    ['repeated keys are compared after decoding', 'xdstp://foo/t/x?%61=1&a=2', 'xdstp://foo/t/x?a=1'],
    ['a part without = has an empty value', 'xdstp://foo/t/x?a', 'xdstp://foo/t/x?a='],
    ['an explicit empty value', 'xdstp://foo/t/x?a=', 'xdstp://foo/t/x?a='],
    ['a part splits at its first = only', 'xdstp://foo/t/x?a=b=c', 'xdstp://foo/t/x?a=b%3Dc'],
    ['empty parts between, after and before & are skipped', 'xdstp://foo/t/x?&a=1&&b=2&', 'xdstp://foo/t/x?a=1&b=2'],
    ['a bare ? means no parameters', 'xdstp://foo/t/x?', 'xdstp://foo/t/x'],
    ['?& means no parameters', 'xdstp://foo/t/x?&', 'xdstp://foo/t/x'],
    ['an empty key is kept', 'xdstp://foo/t/x?=v', 'xdstp://foo/t/x?=v'],
    ['a lone = is an empty key with an empty value', 'xdstp://foo/t/x?=', 'xdstp://foo/t/x?='],
    ['only the first ? starts the query', 'xdstp://foo/t/x?a=b?c', 'xdstp://foo/t/x?a=b?c'],
    ['parameters on an empty id', 'xdstp://foo/t?b=1&a=2', 'xdstp://foo/t?a=2&b=1'],
    ['parameters after a trailing slash', 'xdstp://foo/t/?a=1', 'xdstp://foo/t?a=1'],
    ['node parameters sort among the others', 'xdstp://foo/t/*?xds.node.metadata.foo="bar"&xds.node.id=n1&app=x', 'xdstp://foo/t/*?app=x&xds.node.id=n1&xds.node.metadata.foo="bar"'],
  ];
  for (const [name, input, canonical] of cases) {
    test(name, () => assert.equal(canonicalUrl(input), canonical));
  }

  test('more than 16 parameters still keep the first of a repeated key', () => {
    const keys = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    const input = `xdstp://foo/t/x?${keys.map((k) => `${k}=first`).join('&')}&k17=second&k03=second`;
    const parsed = parseUrn(input);
    assert.equal(parsed.params.length, 20);
    assert.ok(parsed.params.every(([, v]) => v === 'first'));
    assert.equal(canonicalUrn(input), `xdstp://foo/t/x?${keys.map((k) => `${k}=first`).join('&')}`);
  });

  test('non-canonical format keeps the input order of parameters', () => {
    assert.equal(formatName(parseUrn('xdstp://foo/t/x?b=2&a=1')), 'xdstp://foo/t/x?b=2&a=1');
    assert.equal(formatName(parseUrn('xdstp://foo/t/x?b=2&a=1'), { canonical: false }), 'xdstp://foo/t/x?b=2&a=1');
  });
});

describe('authority, type and id', () => {
  const cases: Array<[name: string, input: string, canonical: string]> = [
    ['an empty id has no trailing slash', 'xdstp://foo/t', 'xdstp://foo/t'],
    ['a lone trailing slash after the type is an empty id', 'xdstp://foo/t/', 'xdstp://foo/t'],
    ['a trailing empty segment in the id is kept', 'xdstp://foo/t/x/', 'xdstp://foo/t/x/'],
    ['an empty segment inside the id is kept', 'xdstp://foo/t//x', 'xdstp://foo/t//x'],
    ['an id of one empty segment followed by /', 'xdstp://foo/t//', 'xdstp://foo/t//'],
    ['a multi-segment id', 'xdstp://foo/t/a/b/c', 'xdstp://foo/t/a/b/c'],
    ['an empty authority', 'xdstp:///t/x', 'xdstp:///t/x'],
    ['an empty authority and an empty id', 'xdstp:///t', 'xdstp:///t'],
    ['dot segments are data, not normalized away', 'xdstp://foo/t/a/./../b', 'xdstp://foo/t/a/./../b'],
    ['a segment merely containing * is not a glob', 'xdstp://foo/t/a*', 'xdstp://foo/t/a*'],
    ['** is not a glob', 'xdstp://foo/t/p/**', 'xdstp://foo/t/p/**'],
    ['*a before another segment is not a misplaced glob', 'xdstp://foo/t/*a/b', 'xdstp://foo/t/*a/b'],
    ['a * segment followed by text in the same segment', 'xdstp://foo/t/p/*x', 'xdstp://foo/t/p/*x'],
    ['a ? inside the type position starts the query', 'xdstp://foo/t?x=1', 'xdstp://foo/t?x=1'],
  ];
  for (const [name, input, canonical] of cases) {
    test(name, () => assertCanonical(input, canonical));
  }

  const fields: Array<[name: string, input: string, expected: XdstpName]> = [
    [
      'authority, id and parameters are decoded; the type is taken as is',
      'xdstp://%66oo/envoy.config.cluster.v3.Cluster/a%2Fb?k%3D=v%26',
      { authority: 'foo', resourceType: 'envoy.config.cluster.v3.Cluster', id: 'a/b', params: [['k=', 'v&']], glob: false },
    ],
    ['an empty id is the empty string', 'xdstp://a/t?x=1', { authority: 'a', resourceType: 't', id: '', params: [['x', '1']], glob: false }],
    ['an empty authority is the empty string', 'xdstp:///t/x', { authority: '', resourceType: 't', id: 'x', params: [], glob: false }],
    ['a URN never has alt/entry keys at all', 'xdstp://a/t/x', { authority: 'a', resourceType: 't', id: 'x', params: [], glob: false }],
  ];
  for (const [name, input, expected] of fields) {
    test(name, () => assert.deepEqual(parseUrn(input), expected));
  }
});

describe('URL vs URN', () => {
  // [name, input, URN result, URL result]: a string is a canonical key, otherwise an error code.
  const cases: Array<[name: string, input: string, urn: string | { error: XdstpErrorCode }, url: string | { error: XdstpErrorCode }]> = [
    ['# is data in a URN but starts directives in a URL', 'xdstp://a/t/x#entry=y', 'xdstp://a/t/x%23entry=y', 'xdstp://a/t/x'],
    ['# inside a parameter value', 'xdstp://a/t/x?k=v#entry=y', 'xdstp://a/t/x?k=v%23entry%3Dy', 'xdstp://a/t/x?k=v'],
    ['an alt URL inside a URN parameter is data', 'xdstp://a/t/x?k=v#alt=xdstp://b/t/y', 'xdstp://a/t/x?k=v%23alt%3Dxdstp://b/t/y', 'xdstp://a/t/x?k=v'],
    ['a ? after # is data in a URN and part of the fragment in a URL', 'xdstp://a/t/x#a?b=c', 'xdstp://a/t/x%23a?b=c', { error: 'unknown-directive' }],
    ['a trailing # is data in a URN and an empty directive in a URL', 'xdstp://a/t/x#', 'xdstp://a/t/x%23', { error: 'empty-directive' }],
    ['a # that is not a directive', 'xdstp://a/t/x#y', 'xdstp://a/t/x%23y', { error: 'unknown-directive' }],
    ['# in the type position', 'xdstp://a/t#x/y', { error: 'illegal-character' }, { error: 'unknown-directive' }],
    ['a glob is a URL only', 'xdstp://a/t/*', { error: 'glob-in-urn' }, 'xdstp://a/t/*'],
    ['an escaped glob is a URL only', 'xdstp://a/t/p/%2a', { error: 'glob-in-urn' }, 'xdstp://a/t/p/*'],
    ['a glob whose / is escaped is still a glob', 'xdstp://a/t/p%2F*', { error: 'glob-in-urn' }, 'xdstp://a/t/p/*'],
    ['a glob followed by # is no glob in a URN', 'xdstp://a/t/p/*#entry=e', 'xdstp://a/t/p/*%23entry=e', 'xdstp://a/t/p/*'],
    ['a misplaced * is an error for both', 'xdstp://a/t/*/x', { error: 'glob-not-last' }, { error: 'glob-not-last' }],
    ['a # in the authority is data for both; a URL\'s directives start in the path', 'xdstp://a#b/t/x#entry=e', 'xdstp://a%23b/t/x%23entry=e', 'xdstp://a%23b/t/x'],
    ['a plain name is the same for both', 'xdstp://a/t/x?b=1&a=2', 'xdstp://a/t/x?a=2&b=1', 'xdstp://a/t/x?a=2&b=1'],
  ];
  for (const [name, input, urn, url] of cases) {
    test(name, () => {
      for (const [expected, canon, parse] of [
        [urn, canonicalUrn, parseUrn],
        [url, canonicalUrl, parseUrl],
      ] as const) {
        if (typeof expected === 'string') assert.equal(canon(input), expected);
        else assertNameError(() => parse(input), input, expected.error, []);
      }
    });
  }
});

describe('processing directives', () => {
  const cases: Array<[name: string, input: string, alt: string | undefined, entry: string | undefined, formatted: string]> = [
    ['entry only', 'xdstp://a/T/c#entry=e1', undefined, 'e1', 'xdstp://a/T/c#entry=e1'],
    ['alt only', 'xdstp://a/T/c#alt=xdstp://b/T/c', 'xdstp://b/T/c', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/c'],
    ['alt and entry', 'xdstp://a/T/c#alt=xdstp://b/T/c,entry=e', 'xdstp://b/T/c', 'e', 'xdstp://a/T/c#alt=xdstp://b/T/c,entry=e'],
    ['entry before alt formats as alt first', 'xdstp://a/T/c#entry=e,alt=xdstp://b/T/c', 'xdstp://b/T/c', 'e', 'xdstp://a/T/c#alt=xdstp://b/T/c,entry=e'],
    ['every character class an entry name allows', 'xdstp://a/T/c#entry=aZ09_-./x', undefined, 'aZ09_-./x', 'xdstp://a/T/c#entry=aZ09_-./x'],
    ['an entry name is decoded before it is checked', 'xdstp://a/T/c#entry=%62ar', undefined, 'bar', 'xdstp://a/T/c#entry=bar'],
    ['directives follow parameters', 'xdstp://a/T/c?b=1&a=2#entry=e', undefined, 'e', 'xdstp://a/T/c?a=2&b=1#entry=e'],
    ['alt keeps its own parameters verbatim (not canonicalized)', 'xdstp://a/T/c#alt=xdstp://b/T/c?k=v&j=w', 'xdstp://b/T/c?k=v&j=w', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/c?k=v&j=w'],
    ['an escaped comma belongs to the alt value', 'xdstp://a/T/c#alt=xdstp://b/T/y%2Cz,entry=e', 'xdstp://b/T/y,z', 'e', 'xdstp://a/T/c#alt=xdstp://b/T/y%2Cz,entry=e'],
    ['alt may be a glob', 'xdstp://a/T/p/*#alt=xdstp://b/T/p/*', 'xdstp://b/T/p/*', undefined, 'xdstp://a/T/p/*#alt=xdstp://b/T/p/*'],
    ['alt may carry its own directive when its # is escaped', 'xdstp://a/T/c#alt=xdstp://b/T/y%23entry=z', 'xdstp://b/T/y#entry=z', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/y%23entry=z'],
    ['a raw # inside the fragment is data of the alt value', 'xdstp://a/T/c#alt=xdstp://b/T/y#entry=z', 'xdstp://b/T/y#entry=z', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/y%23entry=z'],
    ['escapes inside alt are escaped once more (%25)', 'xdstp://a/T/c#alt=xdstp://b/T/a%252Fb', 'xdstp://b/T/a%2Fb', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/a%252Fb'],
    ['a single-escaped %2F in alt decodes to a real /', 'xdstp://a/T/c#alt=xdstp://b/T/a%2Fb', 'xdstp://b/T/a/b', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/a/b'],
    ['non-ASCII in alt is escaped', 'xdstp://a/T/c#alt=xdstp://b/T/é', 'xdstp://b/T/é', undefined, 'xdstp://a/T/c#alt=xdstp://b/T/%C3%A9'],
    ['a glob with directives', 'xdstp://a/T/p/*?k=v#alt=xdstp://b/T/p/*?k=v,entry=x', 'xdstp://b/T/p/*?k=v', 'x', 'xdstp://a/T/p/*?k=v#alt=xdstp://b/T/p/*?k=v,entry=x'],
  ];
  for (const [name, input, alt, entry, formatted] of cases) {
    test(name, () => {
      const n = parseUrl(input);
      assert.equal(n.alt, alt);
      assert.equal(n.entry, entry);
      assert.equal('alt' in n, alt !== undefined);
      assert.equal('entry' in n, entry !== undefined);
      assert.equal(formatName(n, { canonical: true }), formatted);
      assert.equal(formatName(n, { canonical: true, directives: true }), formatted);
      assert.equal(formatName(n, { canonical: true, directives: false }), formatted.slice(0, formatted.indexOf('#')));
      assert.equal(canonicalUrl(input), formatted.slice(0, formatted.indexOf('#')));
    });
  }
});

describe('errors: every code, with a precise message', () => {
  const deepAlt = (levels: number): string => {
    let url = 'xdstp://z/T/leaf';
    for (let i = 0; i < levels; i++) url = `xdstp://a${i}/T/x#alt=${url.replace(/%/g, '%25').replace(/#/g, '%23').replace(/,/g, '%2C')}`;
    return url;
  };
  const cases: Array<[name: string, parser: Parser, input: string, code: XdstpErrorCode, fragments: string[]]> = [
    ['another scheme', 'both', 'http://foo/t/x', 'bad-scheme', ['scheme must be "xdstp://"', 'offset 0']],
    ['an upper-case scheme', 'both', 'XDSTP://foo/t/x', 'bad-scheme', ['lower case']],
    ['the empty string', 'both', '', 'bad-scheme', ['offset 0']],
    ['a leading space', 'both', ' xdstp://foo/t/x', 'bad-scheme', ['offset 0']],
    ['xdstp: without //', 'both', 'xdstp:foo/t/x', 'bad-scheme', ['expected "//" after "xdstp:"', 'offset 6']],
    ['xdstp:/ with one slash', 'both', 'xdstp:/foo/t/x', 'bad-scheme', ['offset 6']],

    ['no path at all', 'both', 'xdstp://foo', 'missing-type', ['resource type missing']],
    ['only the scheme', 'both', 'xdstp://', 'missing-type', ['resource type missing']],
    ['a query but no path', 'both', 'xdstp://foo?x=1', 'missing-type', ['resource type missing']],
    ['a URL with directives but no path', 'url', 'xdstp://foo#entry=x', 'missing-type', ['resource type missing']],

    ['an empty path', 'both', 'xdstp://foo/', 'empty-type', ['resource type is empty', 'offset 12']],
    ['an empty first segment', 'both', 'xdstp://foo//x', 'empty-type', ['offset 12']],
    ['an empty type before the query', 'both', 'xdstp://foo/?a=1', 'empty-type', ['offset 12']],
    ['an empty type before directives', 'url', 'xdstp://foo/#entry=x', 'empty-type', ['offset 12']],
    ['an empty authority and an empty type', 'both', 'xdstp:///', 'empty-type', ['offset 9']],

    ['~ in the type', 'both', 'xdstp://a/t~x/y', 'illegal-character', ["resource type has '~' at offset 11"]],
    ['% in the type (types are never decoded)', 'both', 'xdstp://a/t%41/y', 'illegal-character', ["'%' at offset 11", 'never percent-decoded']],
    ['# in the type of a URN', 'urn', 'xdstp://a/t#x/y', 'illegal-character', ["'#' at offset 11"]],
    ['a space in the type', 'both', 'xdstp://a/t x/y', 'illegal-character', ['U+0020 at offset 11']],
    ['non-ASCII in the type', 'both', 'xdstp://a/tä/y', 'illegal-character', ['U+00E4 at offset 11']],
    ['[ in the type', 'both', 'xdstp://a/t[0]/y', 'illegal-character', ["'[' at offset 11"]],
    ['DEL in the type', 'both', 'xdstp://a/t\x7f/y', 'illegal-character', ['U+007F at offset 11']],
    ['a control character in the type', 'both', 'xdstp://a/\nt/y', 'illegal-character', ['U+000A at offset 10']],
    ['a lone high surrogate in the id', 'both', 'xdstp://a/t/\uD800', 'illegal-character', ['lone surrogate U+D800 at offset 12']],
    ['a lone low surrogate in the id', 'both', 'xdstp://a/t/x\uDC00y', 'illegal-character', ['lone surrogate U+DC00 at offset 13']],
    ['a reversed surrogate pair', 'both', 'xdstp://a/t/\uDC00\uD800', 'illegal-character', ['U+DC00 at offset 12']],
    ['a high surrogate without its low half in the authority', 'both', 'xdstp://a\uD83D/t/x', 'illegal-character', ['U+D83D at offset 9']],

    ['%FF in the id', 'both', 'xdstp://a/t/%FF', 'invalid-utf8', ['id: percent-escapes %FF at offset 12 are not valid UTF-8']],
    ['a truncated two-byte sequence', 'both', 'xdstp://a/t/%C3', 'invalid-utf8', ['%C3 at offset 12']],
    ['a bad continuation byte', 'both', 'xdstp://a/t/%C3%28', 'invalid-utf8', ['%C3%28 at offset 12']],
    ['an overlong two-byte encoding of /', 'both', 'xdstp://a/t/x%C0%AF', 'invalid-utf8', ['%C0 at offset 13']],
    ['an overlong three-byte encoding', 'both', 'xdstp://a/t/%E0%80%80', 'invalid-utf8', ['%E0%80%80 at offset 12']],
    ['an encoded surrogate', 'both', 'xdstp://a/t/%ED%A0%80', 'invalid-utf8', ['%ED%A0%80 at offset 12']],
    ['a code point above U+10FFFF', 'both', 'xdstp://a/t/%F4%90%80%80', 'invalid-utf8', ['%F4%90%80%80 at offset 12']],
    ['a stray continuation byte', 'both', 'xdstp://a/t/%80', 'invalid-utf8', ['%80 at offset 12']],
    ['a valid character then a truncated one', 'both', 'xdstp://a/t/%C3%A9%C3', 'invalid-utf8', ['%C3 at offset 18']],
    ['invalid UTF-8 in the authority', 'both', 'xdstp://%FF/t/x', 'invalid-utf8', ['authority:', 'offset 8']],
    ['invalid UTF-8 in a parameter key', 'both', 'xdstp://a/t/x?%FF=1', 'invalid-utf8', ['context parameter key:', 'offset 14']],
    ['invalid UTF-8 in a parameter value', 'both', 'xdstp://a/t/x?k=%FF', 'invalid-utf8', ['context parameter value:', 'offset 16']],
    ['invalid UTF-8 in an entry name', 'url', 'xdstp://a/t/x#entry=%FF', 'invalid-utf8', ['entry= value:', 'offset 20']],

    ['a * segment before another segment', 'both', 'xdstp://a/t/*/x', 'glob-not-last', ['"*/x"', 'position 0', 'may only end the id']],
    ['two * segments', 'url', 'xdstp://a/t/p/*/*', 'glob-not-last', ['"p/*/*"', 'position 2']],
    ['an escaped misplaced glob', 'both', 'xdstp://a/t/%2A%2Fx', 'glob-not-last', ['"*/x"']],
    ['a * segment followed by a trailing slash', 'both', 'xdstp://a/t/p/*/', 'glob-not-last', ['position 2']],

    ['a glob URN', 'urn', 'xdstp://a/t/*', 'glob-in-urn', ['"*"', 'cannot be a glob']],
    ['a glob URN with parameters', 'urn', 'xdstp://a/t/p/*?k=v', 'glob-in-urn', ['"p/*"']],
    ['an escaped glob URN', 'urn', 'xdstp://a/t/p/%2a', 'glob-in-urn', ['"p/*"']],
    ['a glob URN whose / is escaped', 'urn', 'xdstp://a/t/p%2F*', 'glob-in-urn', ['"p/*"']],

    ['entry twice', 'url', 'xdstp://a/t/x#entry=a,entry=b', 'duplicate-directive', ['entry= appears twice', 'offsets 20 and 28']],
    ['alt twice', 'url', 'xdstp://a/t/x#alt=xdstp://b/t/y,alt=xdstp://c/t/z', 'duplicate-directive', ['alt= appears twice', 'offsets 18 and 36']],
    ['the same entry twice with alt in between', 'url', 'xdstp://a/t/x#entry=a,alt=xdstp://b/t/y,entry=a', 'duplicate-directive', ['entry= appears twice']],

    ['an unknown directive', 'url', 'xdstp://a/t/x#foo=bar', 'unknown-directive', ['"foo=bar" at offset 14', 'only alt=<xdstp URL> and entry=<name>']],
    ['a directive without =', 'url', 'xdstp://a/t/x#entry', 'unknown-directive', ['"entry" at offset 14']],
    ['directive names are case-sensitive', 'url', 'xdstp://a/t/x#ALT=xdstp://b/t/y', 'unknown-directive', ['"ALT=xdstp://b/t/y"']],
    ['an unknown directive after a valid one', 'url', 'xdstp://a/t/x#entry=a,bogus', 'unknown-directive', ['"bogus" at offset 22']],
    ['a directive name with a leading space', 'url', 'xdstp://a/t/x# entry=a', 'unknown-directive', ['offset 14']],

    ['an empty fragment', 'url', 'xdstp://a/t/x#', 'empty-directive', ['empty processing directive at offset 14']],
    ['a leading comma', 'url', 'xdstp://a/t/x#,entry=a', 'empty-directive', ['offset 14']],
    ['a trailing comma', 'url', 'xdstp://a/t/x#entry=a,', 'empty-directive', ['offset 22']],
    ['two commas in a row', 'url', 'xdstp://a/t/x#entry=a,,alt=xdstp://b/t/y', 'empty-directive', ['offset 22']],

    ['an empty entry name', 'url', 'xdstp://a/t/x#entry=', 'bad-entry-name', ['empty name', 'offset 20']],
    ['a space in an entry name', 'url', 'xdstp://a/t/x#entry=a b', 'bad-entry-name', ['" " at position 1', '[a-zA-Z0-9_\\-./]+']],
    ['~ in an entry name', 'url', 'xdstp://a/t/x#entry=a~b', 'bad-entry-name', ['"~" at position 1']],
    ['an escaped ~ in an entry name (checked after decoding)', 'url', 'xdstp://a/t/x#entry=a%7Eb', 'bad-entry-name', ['"a~b"', '"~" at position 1']],
    [': in an entry name', 'url', 'xdstp://a/t/x#entry=a:b', 'bad-entry-name', ['":" at position 1']],
    ['non-ASCII in an entry name', 'url', 'xdstp://a/t/x#entry=caf%C3%A9', 'bad-entry-name', ['"é" at position 3']],
    ['a raw # in an entry name', 'url', 'xdstp://a/t/x#entry=a#b', 'bad-entry-name', ['"#" at position 1']],

    ['an empty alt', 'url', 'xdstp://a/t/x#alt=', 'bad-alt', ['alt= at offset 14 has an empty value']],
    ['an alt with another scheme', 'url', 'xdstp://a/t/x#alt=http://b/t/y', 'bad-alt', ['alt= value at offset 18 is not a valid xdstp URL', 'bad-scheme']],
    ['an alt without a type', 'url', 'xdstp://a/t/x#alt=xdstp://b', 'bad-alt', ['missing-type', 'resource type missing']],
    ['an alt with a bad directive of its own', 'url', 'xdstp://a/t/x#alt=xdstp://b/t/y%23bogus', 'bad-alt', ['unknown-directive']],
    ['an alt with a misplaced glob', 'url', 'xdstp://a/t/x#alt=xdstp://b/t/*/x', 'bad-alt', ['glob-not-last']],
    ['an alt whose decoded value holds invalid UTF-8', 'url', 'xdstp://a/t/x#alt=xdstp://b/t/%25FF', 'bad-alt', ['invalid-utf8']],
    ['alt nested more than 8 deep', 'url', deepAlt(10), 'bad-alt', ['nests more than 8 alt= directives deep']],
  ];
  for (const [name, parser, input, code, fragments] of cases) {
    for (const [fnName, parse] of parsersOf(parser)) {
      test(`${code}: ${name} (${fnName})`, () => assertNameError(() => parse(input), input, code, fragments));
    }
  }

  test('alt nested exactly 8 deep is accepted', () => {
    const url = deepAlt(8);
    assert.equal(parseUrl(url).authority, 'a7');
  });

  test('the error is an Error with name, code and input', () => {
    try {
      parseUrn('xdstp://foo');
      assert.fail('should throw');
    } catch (err) {
      assert.ok(err instanceof Error);
      assert.ok(err instanceof XdstpNameError);
      assert.equal(err.name, 'XdstpNameError');
      assert.equal(err.code, 'missing-type');
      assert.equal(err.input, 'xdstp://foo');
      assert.equal(err.message, 'resource type missing: no "/" after the authority (in "xdstp://foo")');
    }
  });

  test('a very long input is truncated in the message but kept whole in .input', () => {
    const input = 'xdstp://' + 'a'.repeat(5000);
    assertNameError(() => parseUrn(input), input, 'missing-type', ['(5008 chars)']);
    try {
      parseUrn(input);
    } catch (err) {
      assert.ok(err instanceof XdstpNameError && err.message.length < 400);
    }
  });

  test('canonicalUrn and canonicalUrl throw the parser errors', () => {
    assertNameError(() => canonicalUrn('xdstp://a/t/*'), 'xdstp://a/t/*', 'glob-in-urn', []);
    assertNameError(() => canonicalUrl('xdstp://a/t/x#bogus'), 'xdstp://a/t/x#bogus', 'unknown-directive', []);
  });

  test('illegal-character: formatName refuses a hand-built id with a lone surrogate', () => {
    const n: XdstpName = { authority: 'a', resourceType: 't', id: 'x\uD800', params: [], glob: false };
    assertNameError(() => formatName(n), 'x\uD800', 'illegal-character', ['lone surrogate U+D800 at offset 1']);
  });

  test('empty-type: formatName refuses a hand-built name without a type', () => {
    const n: XdstpName = { authority: 'a', resourceType: '', id: 'x', params: [], glob: false };
    assert.throws(() => formatName(n), (err: unknown) => err instanceof XdstpNameError && err.code === 'empty-type');
  });
});

describe('round trips', () => {
  const urls = [
    'xdstp://foo/t/bar?b=2&a=1',
    'xdstp://%66oo/t/x',
    'xdstp://foo/t/a~b',
    'xdstp://foo/t/%2a',
    'xdstp://f%2F%3F%23%25o/t/a%3Fb%23c%25d%5B%5D/e?%26k%3D=%26v%3D%23%5B%5D',
    'xdstp://exämple/t/é/€/😀?ü=ö',
    'xdstp://foo/t/a\nb\x00c\x7f ~',
    'xdstp:///t',
    'xdstp://a/t//x//',
    'xdstp://a/t/x?a&b=&=c&=',
    'xdstp://a/t/p/*?k=v#alt=xdstp://b/t/p/*?k=v,entry=e.1',
    'xdstp://a/t/x#alt=xdstp://b/t/y%23entry=z%2Calt=xdstp://c/t/w',
    'xdstp://a/t/100%?p=50%',
    'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?xds.node_type=ingress&xds.client_features.envoy.config.no_bind_to_port=true',
  ];
  for (const input of urls) {
    test(`parseUrl(formatName(parseUrl(x))) equals parseUrl(x): ${JSON.stringify(input)}`, () => {
      const n = parseUrl(input);
      assert.deepEqual(parseUrl(formatName(n)), n);
      const canonical = formatName(n, { canonical: true });
      assert.equal(formatName(parseUrl(canonical), { canonical: true }), canonical);
      assert.equal(canonicalUrl(canonicalUrl(input)), canonicalUrl(input));
    });
  }
  const urns = [
    'xdstp://a/t/x#entry=y',
    'xdstp://a/t/x?k=v#w',
    'xdstp://a/t/p/*#x',
    'xdstp://a/t/%23%2523',
  ];
  for (const input of urns) {
    test(`parseUrn(formatName(parseUrn(x))) equals parseUrn(x): ${JSON.stringify(input)}`, () => {
      const n = parseUrn(input);
      assert.deepEqual(parseUrn(formatName(n)), n);
      assert.equal(canonicalUrn(canonicalUrn(input)), canonicalUrn(input));
      // A canonical URN never has a raw '#', so it reads the same as a URL.
      assert.equal(canonicalUrl(canonicalUrn(input)), canonicalUrn(input));
    });
  }
});

describe('names equal modulo parameter order share one key', () => {
  const groups: Array<[name: string, canon: (s: string) => string, spellings: string[]]> = [
    ['a singleton', canonicalUrn, ['xdstp://a/t/x?a=1&b=2', 'xdstp://a/t/x?b=2&a=1', 'xdstp://%61/t/x?b=%32&a=1', 'xdstp://a/t/%78?%62=2&a=1&a=9', 'xdstp://a/t/x?&b=2&&a=1&']],
    ['a glob', canonicalUrl, ['xdstp://a/t/p/*?x=1&y=2', 'xdstp://a/t/p/%2A?y=2&x=1', 'xdstp://a/t/p%2F*?y=2&x=1#entry=e', 'xdstp://a/t/p/*?y=2&x=1#alt=xdstp://b/t/p/*']],
    ['a node-parameterized glob', canonicalUrl, [
      'xdstp://auth/envoy.config.cluster.v3.Cluster/*?xds.node.id=n&xds.node.cluster=c&xds.node.locality.zone=z',
      'xdstp://auth/envoy.config.cluster.v3.Cluster/*?xds.node.locality.zone=z&xds.node.id=n&xds.node.cluster=c',
      'xdstp://auth/envoy.config.cluster.v3.Cluster/*?xds.node.cluster=c&xds.node.locality.zone=z&xds.node.id=n',
    ]],
    ['a singleton with a different parameter value', canonicalUrn, ['xdstp://a/t/x?a=2&b=2', 'xdstp://a/t/x?b=2&a=2']],
    ['a singleton with fewer parameters', canonicalUrn, ['xdstp://a/t/x?a=1', 'xdstp://a/t/x?a=1&a=2']],
    ['a singleton with an empty-valued parameter', canonicalUrn, ['xdstp://a/t/x?a=1&b', 'xdstp://a/t/x?b=&a=1']],
    ['a singleton without parameters', canonicalUrn, ['xdstp://a/t/x', 'xdstp://a/t/x?', 'xdstp://a/t/x?&&']],
    ['the same id on another authority', canonicalUrn, ['xdstp://b/t/x?a=1&b=2', 'xdstp://b/t/x?b=2&a=1']],
  ];
  const keys = new Map<string, string>();
  for (const [name, canon, spellings] of groups) {
    test(`${name}: ${spellings.length} spellings, one key`, () => {
      const distinct = new Set(spellings.map(canon));
      assert.equal(distinct.size, 1, [...distinct].join(' | '));
      const key = [...distinct][0];
      assert.ok(!keys.has(key) || keys.get(key) === name, `${name} shares its key with ${keys.get(key)}`);
      keys.set(key, name);
    });
  }
  test('different resources never share a key', () => {
    assert.equal(new Set(groups.map(([, canon, [first]]) => canon(first))).size, groups.length);
  });
});

describe('formatName options', () => {
  const n = parseUrl('xdstp://a/t/x?b=2&a=1#entry=e');
  const cases: Array<[name: string, opts: Parameters<typeof formatName>[1], expected: string]> = [
    ['defaults keep parameter order and directives', undefined, 'xdstp://a/t/x?b=2&a=1#entry=e'],
    ['empty options are the defaults', {}, 'xdstp://a/t/x?b=2&a=1#entry=e'],
    ['canonical sorts parameters and keeps directives', { canonical: true }, 'xdstp://a/t/x?a=1&b=2#entry=e'],
    ['directives: false drops directives', { directives: false }, 'xdstp://a/t/x?b=2&a=1'],
    ['canonical without directives is the subscription key', { canonical: true, directives: false }, 'xdstp://a/t/x?a=1&b=2'],
  ];
  for (const [name, opts, expected] of cases) {
    test(name, () => assert.equal(formatName(n, opts), expected));
  }
});

describe('isXdstpName', () => {
  const cases: Array<[input: string, expected: boolean]> = [
    ['xdstp://a/t/x', true],
    ['xdstp://a/t/*', true],
    ['xdstp:', true],
    ['xdstp:foo', true],
    ['xdstp://foo', true],
    ['XDSTP://a/t/x', false],
    ['xdstp', false],
    [' xdstp://a/t/x', false],
    ['foo', false],
    ['', false],
    ['*', false],
    ['type.googleapis.com/envoy.config.cluster.v3.Cluster', false],
  ];
  for (const [input, expected] of cases) {
    test(`${JSON.stringify(input)} is ${expected ? '' : 'not '}an xdstp name`, () => assert.equal(isXdstpName(input), expected));
  }
});

describe('resource types', () => {
  const cases: Array<[type: string, collection: boolean]> = [
    ['envoy.config.listener.v3.ListenerCollection', true],
    ['envoy.config.listeners.v3.ListenerCollection', true],
    ['envoy.config.listener.v3.Listener', false],
    ['envoy.config.cluster.v3.Cluster', false],
    ['xds.type.v3.Collection', true],
    ['envoy.config.listener.v3.ListenerCollections', false],
    ['envoy.config.listener.v3.Listenercollection', false],
  ];
  for (const [type, collection] of cases) {
    test(`${type} is ${collection ? '' : 'not '}a list collection`, () => assert.equal(isListCollectionType(type), collection));
  }
  test('typeUrlOf prefixes type.googleapis.com/', () => {
    assert.equal(typeUrlOf('envoy.config.cluster.v3.Cluster'), 'type.googleapis.com/envoy.config.cluster.v3.Cluster');
    assert.equal(typeUrlOf(parseUrn('xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/x').resourceType), 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment');
  });
});
