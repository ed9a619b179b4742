import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  XdstpNameError,
  canonicalUrl,
  canonicalUrn,
  formatName,
  globKeyOf,
  matchesGlob,
  parseUrl,
  parseUrn,
  type XdstpName,
} from '../src/xdstp';
import { prng } from './support/prng';

// Heavy in delimiters, escapes and characters the encoder must handle.
const TOKENS = [
  '%', '%', '/', '/', '/', '?', '?', '#', '#', '&', '&', '=', '=', '*', '*', '~', ' ', ',', ',', '+', '[', ']',
  'a', 'b', 'Z', '0', '.', '-', '_', ':', '@',
  'é', '€', '😀', '\u0000', '\n', '\t', '\x7f', '\uD800', '\uDC00',
  '%2F', '%2f', '%2a', '%2A', '%41', '%25', '%23', '%3F', '%3D', '%26', '%2C', '%20', '%7E', '%C3%A9', '%c3%a9', '%FF', '%E2%82', '%F0%9F%98%80', '%4', '%g1',
  'alt=', 'entry=', 'alt=xdstp://b/T/y', 'entry=e', 'xdstp://', '/*', '*/', 'k=v', 'xds.node.id=n',
];
const TYPES = ['T', 'envoy.config.listener.v3.Listener', 'envoy.config.listener.v3.ListenerCollection', 't~', 't%41', ''];
const CORPUS = [
  'xdstp://foo/t/bar?b=2&a=1',
  'xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?node_type=ingress',
  'xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo#entry=bar',
  'xdstp://c/envoy.config.endpoint.v3.ClusterLoadAssignment/foo#alt=xdstp://o/envoy.config.endpoint.v3.ClusterLoadAssignment/bar',
  'xdstp://%66oo/t/a%2Fb/%2a?x=%41&y#alt=xdstp://b/t/p/*,entry=e',
  'xdstp:///t',
];

function pick<T>(rnd: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rnd() * xs.length)];
}

function tokens(rnd: () => number, max: number): string {
  let s = '';
  const n = Math.floor(rnd() * (max + 1));
  for (let i = 0; i < n; i++) s += pick(rnd, TOKENS);
  return s;
}

function generate(rnd: () => number): string {
  const r = rnd();
  if (r < 0.45) return `xdstp://${tokens(rnd, 3)}/${pick(rnd, TYPES)}/${tokens(rnd, 12)}`;
  if (r < 0.85) {
    // Mutate a known-good name: replace, insert or delete a few spots.
    let s = pick(rnd, CORPUS);
    const edits = 1 + Math.floor(rnd() * 3);
    for (let i = 0; i < edits; i++) {
      const at = Math.floor(rnd() * (s.length + 1));
      const cut = rnd() < 0.5 ? Math.floor(rnd() * 3) : 0;
      s = s.slice(0, at) + (rnd() < 0.8 ? pick(rnd, TOKENS) : '') + s.slice(at + cut);
    }
    return s;
  }
  return (rnd() < 0.7 ? 'xdstp://' : pick(rnd, ['', 'xdstp:', 'xdstp:/', 'XDSTP://', 'http://'])) + tokens(rnd, 20);
}

const KNOWN_CODES = new Set([
  'bad-scheme', 'missing-type', 'empty-type', 'bad-authority', 'duplicate-directive', 'unknown-directive', 'directive-in-urn',
  'glob-in-urn', 'glob-not-last', 'illegal-character', 'bad-entry-name', 'bad-alt', 'empty-directive', 'invalid-utf8',
]);

function tryParse(parse: (s: string) => XdstpName, input: string, codes: Map<string, number>): XdstpName | undefined {
  try {
    return parse(input);
  } catch (err) {
    // The only thing a parser may ever throw.
    assert.ok(err instanceof XdstpNameError, `${JSON.stringify(input)} threw ${String(err)}`);
    assert.ok(KNOWN_CODES.has(err.code), err.code);
    assert.equal(err.input, input);
    assert.ok(err.message.length > 0);
    codes.set(err.code, (codes.get(err.code) ?? 0) + 1);
    return undefined;
  }
}

function checkParsed(input: string, n: XdstpName, isUrl: boolean): void {
  const parse = isUrl ? parseUrl : parseUrn;
  const ctx = `input ${JSON.stringify(input)} (${isUrl ? 'URL' : 'URN'})`;

  // Lossless: the non-canonical spelling parses back to the same name.
  assert.deepEqual(parse(formatName(n)), n, ctx);

  // Canonical form is a fixed point, with and without directives.
  const withDirectives = formatName(n, { canonical: true });
  assert.equal(formatName(parse(withDirectives), { canonical: true }), withDirectives, ctx);
  const key = formatName(n, { canonical: true, directives: false });
  const canon = isUrl ? canonicalUrl : canonicalUrn;
  assert.equal(canon(input), key, ctx);
  assert.equal(canon(key), key, ctx);
  assert.ok(/^[\x20-\x7d]*$/.test(key), `${ctx}: canonical key ${JSON.stringify(key)} is not printable ASCII`);

  // Parameter order never changes the key.
  const reversed: XdstpName = { ...n, params: [...n.params].reverse() };
  assert.equal(formatName(reversed, { canonical: true, directives: false }), key, ctx);

  if (n.glob) {
    // A child of the glob is a member, and its glob key is this glob's key.
    const member: XdstpName = { authority: n.authority, resourceType: n.resourceType, id: n.id.slice(0, -1) + 'm', params: n.params, glob: false };
    assert.ok(matchesGlob(member, n), ctx);
    assert.equal(globKeyOf(member), key, ctx);
    assert.equal(matchesGlob(n, n), false, ctx);
  } else if (n.alt === undefined && n.entry === undefined) {
    const globKey = globKeyOf(n);
    const glob = parseUrl(globKey);
    assert.ok(glob.glob, ctx);
    assert.equal(canonicalUrl(globKey), globKey, ctx);
    assert.ok(matchesGlob(n, glob), ctx);
  }
}

test('fuzz: parsers only ever return or throw XdstpNameError, and canonical forms are stable', () => {
  const rnd = prng(0x5eed1234);
  const iterations = 4000;
  const codes = new Map<string, number>();
  let parsedUrn = 0;
  let parsedUrl = 0;
  const started = Date.now();
  for (let i = 0; i < iterations; i++) {
    const input = generate(rnd);
    const urn = tryParse(parseUrn, input, codes);
    if (urn !== undefined) {
      parsedUrn++;
      checkParsed(input, urn, false);
      assert.equal(urn.glob, false);
      assert.equal(urn.alt, undefined);
      assert.equal(urn.entry, undefined);
    }
    const url = tryParse(parseUrl, input, codes);
    if (url !== undefined) {
      parsedUrl++;
      checkParsed(input, url, true);
    }
    // A string without '#' means the same resource either way.
    if (urn !== undefined && url !== undefined && !input.includes('#')) assert.deepEqual(url, urn);
  }
  const elapsed = Date.now() - started;
  // Guard against a generator that silently stops exercising either side.
  assert.ok(parsedUrn > iterations / 10, `only ${parsedUrn} URNs parsed`);
  assert.ok(parsedUrl > iterations / 10, `only ${parsedUrl} URLs parsed`);
  assert.ok(codes.size >= 10, `only error codes ${[...codes.keys()].join(', ')} were hit`);
  assert.ok(elapsed < 2000, `took ${elapsed} ms`);
});

test('fuzz: parameter permutations of one name share one key', () => {
  const rnd = prng(42);
  for (let i = 0; i < 500; i++) {
    const count = 1 + Math.floor(rnd() * 8);
    const pairs: string[] = [];
    for (let k = 0; k < count; k++) pairs.push(`${tokens(rnd, 2).replace(/[&#]/g, '')}k${k}=${tokens(rnd, 3).replace(/[&#]/g, '')}`);
    const shuffled = [...pairs];
    for (let k = shuffled.length - 1; k > 0; k--) {
      const j = Math.floor(rnd() * (k + 1));
      [shuffled[k], shuffled[j]] = [shuffled[j], shuffled[k]];
    }
    const a = `xdstp://a/T/x?${pairs.join('&')}`;
    const b = `xdstp://a/T/x?${shuffled.join('&')}`;
    let keyA: string | undefined;
    try {
      keyA = canonicalUrn(a);
    } catch (err) {
      assert.ok(err instanceof XdstpNameError);
      continue;
    }
    // Keys are unique per pair, so order is the only difference (a key's own spelling can still
    // decode equal to another's, e.g. %6B vs k; then the first-wins rule may differ by order).
    const keysDecoded = parseUrn(a).params.length === count;
    if (keysDecoded) assert.equal(canonicalUrn(b), keyA, `${a} vs ${b}`);
  }
});
