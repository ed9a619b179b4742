import { formatDirectives } from './directives';
import { XdstpNameError } from './errors';
import { formatParams, type Params } from './params';
import { AUTHORITY_RESERVED, ID_RESERVED, percentEncode } from './percent';
import type { XdstpName } from './types';

export interface FormatOptions {
  /** Sort context parameters into canonical order (default: keep their order). */
  readonly canonical?: boolean;
  /** Append `#alt=…,entry=…` when present (default: true). */
  readonly directives?: boolean;
}

export const SCHEME = 'xdstp://';

/**
 * Renders a name. Canonical and without directives, this is the key the relay
 * caches and deduplicates by; `parseUrl`/`parseUrn` of the result gives back
 * an equal name.
 */
export function formatName(n: XdstpName, opts?: FormatOptions): string {
  const s = formatParts(n.authority, n.resourceType, n.id, n.params, opts?.canonical === true);
  return opts?.directives === false ? s : s + formatDirectives(n.alt, n.entry);
}

/** Shared with `globKeyOf`, which formats a name with a substituted id. */
export function formatParts(authority: string, resourceType: string, id: string, params: Params, canonical: boolean): string {
  // Without a type the output would not parse back; refuse rather than emit it.
  if (resourceType === '') {
    throw new XdstpNameError('empty-type', `${SCHEME}${authority}//${id}`, 'cannot format a name whose resource type is empty');
  }
  const path = id === '' ? '' : '/' + percentEncode(id, ID_RESERVED);
  return SCHEME + percentEncode(authority, AUTHORITY_RESERVED) + '/' + resourceType + path + formatParams(params, canonical);
}
