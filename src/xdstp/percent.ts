import { XdstpNameError, describeChar } from './errors';

/*
 * Percent-encoding as xdstp names use it (XDSTP.md), which is deliberately not
 * encodeURIComponent: a space stays raw, '~' is escaped, hex is uppercase and
 * each component has its own reserved set. Our canonical strings must be
 * byte-identical to the ones Envoy subscribes with, or the relay would keep two
 * upstream subscriptions (and two cache entries) for one resource.
 */

/** One flag per ASCII code: 1 = escape it. Non-ASCII is always escaped and never looked up. */
export type ReservedSet = Uint8Array;

function reservedSet(extra: string): ReservedSet {
  const set = new Uint8Array(128);
  // Controls, '~' and DEL are escaped in every component.
  set.fill(1, 0, 0x20);
  set[0x7e] = 1;
  set[0x7f] = 1;
  for (let i = 0; i < extra.length; i++) set[extra.charCodeAt(i)] = 1;
  return set;
}

export const AUTHORITY_RESERVED: ReservedSet = reservedSet('%/?#');
export const ID_RESERVED: ReservedSet = reservedSet('%?#[]');
export const PARAM_RESERVED: ReservedSet = reservedSet('%#[]&=');
export const DIRECTIVE_RESERVED: ReservedSet = reservedSet('%#[],');

const HEX = '0123456789ABCDEF';

function escapeByte(b: number): string {
  return '%' + HEX[b >> 4] + HEX[b & 0x0f];
}

/** Encodes `s` (a decoded component) as UTF-8 with the component's reserved set escaped. */
export function percentEncode(s: string, reserved: ReservedSet): string {
  const n = s.length;
  let i = 0;
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c >= 0x80 || reserved[c] === 1) break;
    i++;
  }
  // The usual case on the hot path: nothing to escape, so no copy at all.
  if (i === n) return s;

  let out = s.slice(0, i);
  let runStart = i;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (reserved[c] === 1) {
        out += s.slice(runStart, i) + escapeByte(c);
        runStart = i + 1;
      }
      continue;
    }
    out += s.slice(runStart, i);
    if (c < 0x800) {
      out += escapeByte(0xc0 | (c >> 6)) + escapeByte(0x80 | (c & 0x3f));
    } else if (c < 0xd800 || c > 0xdfff) {
      out += escapeByte(0xe0 | (c >> 12)) + escapeByte(0x80 | ((c >> 6) & 0x3f)) + escapeByte(0x80 | (c & 0x3f));
    } else {
      const low = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c > 0xdbff || low < 0xdc00 || low > 0xdfff) {
        throw new XdstpNameError('illegal-character', s, `lone surrogate ${describeChar(c)} at offset ${i} has no UTF-8 encoding`);
      }
      const cp = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
      out +=
        escapeByte(0xf0 | (cp >> 18)) +
        escapeByte(0x80 | ((cp >> 12) & 0x3f)) +
        escapeByte(0x80 | ((cp >> 6) & 0x3f)) +
        escapeByte(0x80 | (cp & 0x3f));
      i++;
    }
    runStart = i + 1;
  }
  return out + s.slice(runStart);
}

// A cheap native pre-check; the exact (pair-aware) scan runs only when it hits.
const ANY_SURROGATE = /[\uD800-\uDFFF]/;

/** Offset of the first UTF-16 unit that is half of no pair (so has no UTF-8 form), or -1. */
export function firstLoneSurrogate(s: string): number {
  if (!ANY_SURROGATE.test(s)) return -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    const low = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
    if (c > 0xdbff || low < 0xdc00 || low > 0xdfff) return i;
    i++;
  }
  return -1;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

// Decoding is synchronous and never re-entered, so one growable buffer serves every call.
let scratch = new Uint8Array(64);

/**
 * Decodes `input[start, end)`. `%XX` (either case) becomes its byte; a `%` not
 * followed by two hex digits is kept as data (and so re-encodes as `%25`); `+`
 * is just `+`. Runs of escapes must form UTF-8, since a JS string cannot carry
 * arbitrary bytes without two distinct names colliding. `what` names the
 * component in error messages; offsets are into `input`.
 */
export function percentDecode(input: string, start: number, end: number, what: string): string {
  let pct = input.indexOf('%', start);
  if (pct < 0 || pct >= end) return input.slice(start, end);

  if (scratch.length < (end - start) / 3) scratch = new Uint8Array(Math.ceil((end - start) / 3));
  let out = '';
  let runStart = start;
  while (pct >= 0 && pct < end) {
    let j = pct;
    let count = 0;
    while (j + 2 < end && input.charCodeAt(j) === 0x25) {
      const hi = hexValue(input.charCodeAt(j + 1));
      const lo = hexValue(input.charCodeAt(j + 2));
      if (hi < 0 || lo < 0) break;
      scratch[count++] = (hi << 4) | lo;
      j += 3;
    }
    if (count === 0) {
      pct = input.indexOf('%', pct + 1);
      continue;
    }
    out += input.slice(runStart, pct) + utf8Decode(scratch, count, input, pct, what);
    runStart = j;
    pct = input.indexOf('%', j);
  }
  return out + input.slice(runStart, end);
}

/** Strict UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF). `at` = offset of the first escape. */
function utf8Decode(bytes: Uint8Array, count: number, input: string, at: number, what: string): string {
  let out = '';
  let i = 0;
  while (i < count) {
    const b = bytes[i];
    if (b < 0x80) {
      out += String.fromCharCode(b);
      i++;
      continue;
    }
    let follow: number;
    let cp: number;
    let min: number;
    if (b >= 0xc2 && b <= 0xdf) {
      follow = 1;
      cp = b & 0x1f;
      min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
      follow = 2;
      cp = b & 0x0f;
      min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
      follow = 3;
      cp = b & 0x07;
      min = 0x10000;
    } else {
      throw invalidUtf8(input, at + 3 * i, 1, what);
    }
    if (i + follow >= count) throw invalidUtf8(input, at + 3 * i, count - i, what);
    for (let k = 1; k <= follow; k++) {
      const c = bytes[i + k];
      if ((c & 0xc0) !== 0x80) throw invalidUtf8(input, at + 3 * i, k + 1, what);
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      throw invalidUtf8(input, at + 3 * i, follow + 1, what);
    }
    out += String.fromCodePoint(cp);
    i += follow + 1;
  }
  return out;
}

function invalidUtf8(input: string, offset: number, escapes: number, what: string): XdstpNameError {
  const shown = input.slice(offset, offset + 3 * escapes);
  return new XdstpNameError('invalid-utf8', input, `${what}: percent-escapes ${shown} at offset ${offset} are not valid UTF-8`);
}
