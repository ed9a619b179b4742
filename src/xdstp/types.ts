/**
 * A parsed xdstp:// name. Every string is already percent-decoded except
 * `resourceType`, which XDSTP.md says is never encoded nor decoded.
 */
export interface XdstpName {
  readonly authority: string;
  /** e.g. `envoy.config.listener.v3.Listener`. */
  readonly resourceType: string;
  /** Segments joined by '/'; may be ''. */
  readonly id: string;
  /**
   * Context parameters in input order. Keys are unique (the first occurrence
   * wins at parse time); `formatName` relies on that, so hand-built names must
   * keep it too.
   */
  readonly params: ReadonlyArray<readonly [string, string]>;
  /** The id's last segment is exactly '*' (only ever true for a URL). */
  readonly glob: boolean;
  /** URL only: the fallback URL of `#alt=`. */
  readonly alt?: string;
  /** URL only: the inline-entry name of `#entry=`. */
  readonly entry?: string;
}

export type MutableXdstpName = { -readonly [K in keyof XdstpName]: XdstpName[K] };
