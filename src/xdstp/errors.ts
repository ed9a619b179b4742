/**
 * Why a string is not a well-formed xdstp:// name. The relay turns these into
 * rejections for clients and drops for upstream resources, so every code names
 * one rule and the message says where the input breaks it.
 */
export type XdstpErrorCode =
  | 'bad-scheme'
  | 'missing-type'
  | 'empty-type'
  /**
   * Not raised by the parsers: XDSTP.md makes every authority spelling valid
   * (it ends at the first '/'; '?' and '#' before that are data). Kept so the
   * code set the relay core was written against stays stable.
   */
  | 'bad-authority'
  | 'duplicate-directive'
  | 'unknown-directive'
  /**
   * A name with processing directives where a URN was required. `parseUrn`
   * never raises it, because in a URN '#' is data (XDSTP.md); `globKeyOf` does,
   * when handed a parsed URL that still carries `alt`/`entry`.
   */
  | 'directive-in-urn'
  | 'glob-in-urn'
  | 'glob-not-last'
  | 'illegal-character'
  | 'bad-entry-name'
  | 'bad-alt'
  | 'empty-directive'
  /** Percent-escapes whose bytes are not UTF-8: a JS string cannot hold them losslessly. */
  | 'invalid-utf8';

// Names come from the network: keep messages bounded however long the input is.
const MAX_QUOTED = 200;

function quote(input: string): string {
  if (input.length <= MAX_QUOTED) return JSON.stringify(input);
  return `${JSON.stringify(input.slice(0, MAX_QUOTED))}… (${input.length} chars)`;
}

export class XdstpNameError extends Error {
  readonly code: XdstpErrorCode;
  readonly input: string;

  /** `detail` says what is wrong and where; the quoted input is appended. */
  constructor(code: XdstpErrorCode, input: string, detail: string) {
    super(`${detail} (in ${quote(input)})`);
    this.name = 'XdstpNameError';
    this.code = code;
    this.input = input;
  }
}

/** Renders one UTF-16 unit for a message: printable ASCII as itself, the rest as U+XXXX. */
export function describeChar(code: number): string {
  if (code > 0x20 && code < 0x7f) return `'${String.fromCharCode(code)}'`;
  return `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
}
