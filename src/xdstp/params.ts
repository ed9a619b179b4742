import { PARAM_RESERVED, percentDecode, percentEncode } from './percent';

export type Params = ReadonlyArray<readonly [string, string]>;

const NO_PARAMS: Params = Object.freeze([]);

// Below this many pairs a linear scan beats building a Set; real names carry a handful.
const LINEAR_LIMIT = 16;

/**
 * Context parameters from `input[start, end)` (the text after the path's first
 * '?'). Parts are split on '&' and each at its first '='; a part without '='
 * has an empty value; a repeated (decoded) key keeps its first value. Empty
 * parts (`a=1&&b=2`, a trailing '&', a bare '?') are skipped rather than read
 * as an empty key, so `…/x?` and `…/x` are the same name.
 */
export function parseParams(input: string, start: number, end: number): Params {
  if (start >= end) return NO_PARAMS;
  const out: Array<readonly [string, string]> = [];
  let seen: Set<string> | undefined;
  // Next '=' at or after the current part, found once and reused while parts
  // precede it, so a long run of '='-less parts stays linear.
  let eq = input.indexOf('=', start);
  let p = start;
  while (p <= end) {
    let amp = input.indexOf('&', p);
    if (amp < 0 || amp > end) amp = end;
    if (amp > p) {
      if (eq >= 0 && eq < p) eq = input.indexOf('=', p);
      const hasValue = eq >= 0 && eq < amp;
      const key = percentDecode(input, p, hasValue ? eq : amp, 'context parameter key');
      const value = hasValue ? percentDecode(input, eq + 1, amp, 'context parameter value') : '';
      if (!hasKey(out, seen, key)) {
        out.push([key, value]);
        if (seen !== undefined) seen.add(key);
        else if (out.length === LINEAR_LIMIT) seen = new Set(out.map(([k]) => k));
      }
    }
    p = amp + 1;
  }
  return out.length === 0 ? NO_PARAMS : out;
}

function hasKey(params: Params, seen: Set<string> | undefined, key: string): boolean {
  if (seen !== undefined) return seen.has(key);
  for (let i = 0; i < params.length; i++) if (params[i][0] === key) return true;
  return false;
}

/**
 * `?k=v&…` or ''. Canonical order sorts the encoded `k=v` strings as wholes, so
 * `a.b=…` precedes `a=…`; they are pure ASCII after encoding, so the default
 * UTF-16 comparison is plain byte order.
 */
export function formatParams(params: Params, canonical: boolean): string {
  const n = params.length;
  if (n === 0) return '';
  if (n === 1) return '?' + encodePair(params[0]);
  const parts = new Array<string>(n);
  for (let i = 0; i < n; i++) parts[i] = encodePair(params[i]);
  if (canonical) sortInPlace(parts);
  return '?' + parts.join('&');
}

/**
 * Names carry a handful of parameters, where insertion sort with `<` beats
 * Array#sort's generic machinery. `<` on these ASCII strings is the same byte
 * order the default sort uses.
 */
function sortInPlace(parts: string[]): void {
  if (parts.length > LINEAR_LIMIT) {
    parts.sort();
    return;
  }
  for (let i = 1; i < parts.length; i++) {
    const item = parts[i];
    let j = i - 1;
    while (j >= 0 && parts[j] > item) {
      parts[j + 1] = parts[j];
      j--;
    }
    parts[j + 1] = item;
  }
}

function encodePair([key, value]: readonly [string, string]): string {
  return percentEncode(key, PARAM_RESERVED) + '=' + percentEncode(value, PARAM_RESERVED);
}

/** Same key→value set regardless of order (keys are unique within each side). */
export function sameParamSet(a: Params, b: Params): boolean {
  const n = a.length;
  if (n !== b.length) return false;
  if (n > LINEAR_LIMIT) {
    const values = new Map<string, string>(b);
    for (const [k, v] of a) if (values.get(k) !== v) return false;
    return true;
  }
  outer: for (let i = 0; i < n; i++) {
    const [k, v] = a[i];
    for (let j = 0; j < n; j++) {
      if (b[j][0] === k) {
        if (b[j][1] !== v) return false;
        continue outer;
      }
    }
    return false;
  }
  return true;
}
