import { formatName } from './format';
import { parseUrl, parseUrn } from './parse';

const CANONICAL = { canonical: true, directives: false } as const;

/** The cache / dedup key of a resource name. Throws `XdstpNameError` when `s` is not a valid URN. */
export function canonicalUrn(s: string): string {
  return formatName(parseUrn(s), CANONICAL);
}

/**
 * The subscription key of a locator: canonical, glob kept, directives dropped
 * (they tell a client how to fetch, not what the resource is).
 */
export function canonicalUrl(s: string): string {
  return formatName(parseUrl(s), CANONICAL);
}
