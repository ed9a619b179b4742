import { XdstpNameError } from './errors';
import { DIRECTIVE_RESERVED, percentDecode, percentEncode } from './percent';

/** Decoded processing directives of a URL. `alt` is not yet checked to be a URL: the parser does that. */
export interface Directives {
  alt?: string;
  /** Offset in the input of the alt value, for error messages. */
  altAt: number;
  entry?: string;
}

const ENTRY_PATTERN = '[a-zA-Z0-9_\\-./]+';

/**
 * Reads the fragment `input[start…]` (after a URL's first '#'): comma-separated
 * `alt=<url>` / `entry=<name>`, each at most once. Names are case-sensitive. An
 * empty item (`#`, `#,entry=x`, a trailing ',') is an error rather than
 * ignored, because it is almost always a hand-edited name gone wrong.
 */
export function parseDirectives(input: string, start: number): Directives {
  const out: Directives = { altAt: -1 };
  let entryAt = -1;
  let p = start;
  for (;;) {
    let comma = input.indexOf(',', p);
    if (comma < 0) comma = input.length;
    if (comma === p) {
      throw new XdstpNameError('empty-directive', input, `empty processing directive at offset ${p}`);
    }
    const eq = input.indexOf('=', p);
    const name = eq >= 0 && eq < comma ? input.slice(p, eq) : undefined;
    if (name === 'alt') {
      if (out.altAt >= 0) throw duplicate(input, 'alt', out.altAt, eq + 1);
      out.altAt = eq + 1;
      out.alt = percentDecode(input, eq + 1, comma, 'alt= value');
      if (out.alt === '') throw new XdstpNameError('bad-alt', input, `alt= at offset ${p} has an empty value; it needs an xdstp:// URL`);
    } else if (name === 'entry') {
      if (entryAt >= 0) throw duplicate(input, 'entry', entryAt, eq + 1);
      entryAt = eq + 1;
      out.entry = percentDecode(input, eq + 1, comma, 'entry= value');
      checkEntryName(input, out.entry, entryAt);
    } else {
      const shown = JSON.stringify(input.slice(p, Math.min(comma, p + 40)));
      throw new XdstpNameError(
        'unknown-directive',
        input,
        `unknown processing directive ${shown} at offset ${p}; only alt=<xdstp URL> and entry=<name> exist`,
      );
    }
    if (comma === input.length) return out;
    p = comma + 1;
  }
}

function duplicate(input: string, name: string, first: number, second: number): XdstpNameError {
  return new XdstpNameError(
    'duplicate-directive',
    input,
    `directive ${name}= appears twice (values at offsets ${first} and ${second}); each directive may appear once`,
  );
}

/** The proposal's entry-name rule, checked on the decoded value. */
function checkEntryName(input: string, entry: string, at: number): void {
  if (entry === '') {
    throw new XdstpNameError('bad-entry-name', input, `entry= at offset ${at} has an empty name; it must match ${ENTRY_PATTERN}`);
  }
  for (let i = 0; i < entry.length; i++) {
    const c = entry.charCodeAt(i);
    const ok =
      (c >= 0x61 && c <= 0x7a) || // a-z
      (c >= 0x41 && c <= 0x5a) || // A-Z
      (c >= 0x2d && c <= 0x39) || // - . / 0-9
      c === 0x5f; // _
    if (!ok) {
      throw new XdstpNameError(
        'bad-entry-name',
        input,
        `entry name ${JSON.stringify(entry)} (value at offset ${at}) has ${JSON.stringify(entry[i])} at position ${i}; it must match ${ENTRY_PATTERN}`,
      );
    }
  }
}

/** `#alt=…,entry=…` or ''. A fixed order, so equal directive sets format identically. */
export function formatDirectives(alt: string | undefined, entry: string | undefined): string {
  if (alt === undefined) return entry === undefined ? '' : '#entry=' + percentEncode(entry, DIRECTIVE_RESERVED);
  const first = '#alt=' + percentEncode(alt, DIRECTIVE_RESERVED);
  return entry === undefined ? first : first + ',entry=' + percentEncode(entry, DIRECTIVE_RESERVED);
}
