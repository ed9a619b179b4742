import { parseDirectives } from './directives';
import { XdstpNameError, describeChar } from './errors';
import { SCHEME } from './format';
import { isGlobId, misplacedStarAt } from './glob';
import { parseParams } from './params';
import { firstLoneSurrogate, percentDecode } from './percent';
import type { MutableXdstpName, XdstpName } from './types';

// Each nested alt= costs at least one `xdstp://a/t#alt=` of input, so this only
// stops pathological inputs from recursing until the stack overflows.
const MAX_ALT_DEPTH = 8;

/**
 * True iff `s` claims to be an xdstp name. Such a string must then parse; it is
 * never treated as an opaque legacy name, even when malformed.
 */
export function isXdstpName(s: string): boolean {
  return s.startsWith('xdstp:');
}

/**
 * A resource name (URN): no glob, no directives, and '#' is ordinary data
 * (XDSTP.md), so `xdstp://a/T/x#y` is the resource with id `x#y`.
 */
export function parseUrn(s: string): XdstpName {
  return parseName(s, false, 0);
}

/** A locator (URL): may be a glob and may end in `#alt=<url>,entry=<name>`. */
export function parseUrl(s: string): XdstpName {
  return parseName(s, true, 0);
}

function parseName(input: string, isUrl: boolean, depth: number): XdstpName {
  if (!input.startsWith(SCHEME)) {
    const detail = input.startsWith('xdstp:')
      ? `expected "//" after "xdstp:" at offset 6`
      : `the scheme must be "xdstp://" (lower case) at offset 0`;
    throw new XdstpNameError('bad-scheme', input, detail);
  }
  const lone = firstLoneSurrogate(input);
  if (lone >= 0) {
    throw new XdstpNameError('illegal-character', input, `lone surrogate ${describeChar(input.charCodeAt(lone))} at offset ${lone} has no UTF-8 encoding`);
  }

  const authStart = SCHEME.length;
  const slash = input.indexOf('/', authStart);
  if (slash < 0) throw new XdstpNameError('missing-type', input, `resource type missing: no "/" after the authority`);

  // XDSTP.md (like Envoy) ends the authority at the first '/' only: a '?' or
  // '#' before it is authority data (escaped as %3F / %23 on output), and a
  // URL's directives start at the first '#' of the path, not of the string.
  const firstQuery = input.indexOf('?', slash);
  const firstHash = isUrl ? input.indexOf('#', slash) : -1;
  const end = firstHash >= 0 ? firstHash : input.length;
  const queryAt = firstQuery >= 0 && firstQuery < end ? firstQuery : end;

  const typeStart = slash + 1;
  let typeEnd = input.indexOf('/', typeStart);
  if (typeEnd < 0 || typeEnd > queryAt) typeEnd = queryAt;
  if (typeEnd === typeStart) throw new XdstpNameError('empty-type', input, `resource type is empty at offset ${typeStart}`);
  checkTypeCharacters(input, typeStart, typeEnd);

  const id = typeEnd < queryAt ? percentDecode(input, typeEnd + 1, queryAt, 'id') : '';
  const badStar = misplacedStarAt(id);
  if (badStar >= 0) {
    throw new XdstpNameError(
      'glob-not-last',
      input,
      `the decoded id ${JSON.stringify(id)} has a "*" segment at position ${badStar} that is not its last segment; a glob "*" may only end the id`,
    );
  }
  const glob = isGlobId(id);
  if (glob && !isUrl) {
    throw new XdstpNameError('glob-in-urn', input, `the decoded id ${JSON.stringify(id)} ends in a "*" segment, but a resource name (URN) cannot be a glob`);
  }

  const name: MutableXdstpName = {
    authority: percentDecode(input, authStart, slash, 'authority'),
    resourceType: input.slice(typeStart, typeEnd),
    id,
    params: parseParams(input, queryAt + 1, end),
    glob,
  };
  if (end < input.length) {
    const directives = parseDirectives(input, end + 1);
    if (directives.alt !== undefined) {
      checkAlt(input, directives.alt, directives.altAt, depth);
      name.alt = directives.alt;
    }
    if (directives.entry !== undefined) name.entry = directives.entry;
  }
  return name;
}

/**
 * The type is never percent-decoded or encoded, so it can only hold characters
 * that mean the same to every reader and never need escaping: printable ASCII
 * other than space, '%', '#', '[', ']' and '~' ('/' and '?' end it).
 */
function checkTypeCharacters(input: string, start: number, end: number): void {
  for (let i = start; i < end; i++) {
    const c = input.charCodeAt(i);
    if (c > 0x20 && c < 0x7e && c !== 0x25 && c !== 0x23 && c !== 0x5b && c !== 0x5d) continue;
    throw new XdstpNameError(
      'illegal-character',
      input,
      `resource type has ${describeChar(c)} at offset ${i}; a type is never percent-decoded, so it must be printable ASCII without space, "%", "#", "[", "]" or "~"`,
    );
  }
}

function checkAlt(input: string, alt: string, at: number, depth: number): void {
  if (depth >= MAX_ALT_DEPTH) {
    throw new XdstpNameError('bad-alt', input, `alt= at offset ${at} nests more than ${MAX_ALT_DEPTH} alt= directives deep`);
  }
  try {
    parseName(alt, true, depth + 1);
  } catch (err) {
    if (!(err instanceof XdstpNameError)) throw err;
    throw new XdstpNameError('bad-alt', input, `alt= value at offset ${at} is not a valid xdstp URL (${err.code}: ${err.message})`);
  }
}
