import { XdstpNameError } from './errors';
import { formatName, formatParts } from './format';
import { sameParamSet } from './params';
import type { XdstpName } from './types';

const SLASH = 0x2f;
const STAR = 0x2a;

/** Whether a decoded id names a glob collection: its last segment is exactly '*'. */
export function isGlobId(id: string): boolean {
  const n = id.length;
  return n > 0 && id.charCodeAt(n - 1) === STAR && (n === 1 || id.charCodeAt(n - 2) === SLASH);
}

/**
 * Offset in a decoded id of a segment that is exactly '*' but not the last one,
 * or -1. Such a name could be neither a glob (its '*' is not last) nor a plain
 * resource without clients and servers disagreeing about it.
 */
export function misplacedStarAt(id: string): number {
  let star = id.indexOf('*');
  while (star >= 0) {
    const startsSegment = star === 0 || id.charCodeAt(star - 1) === SLASH;
    if (startsSegment && star + 1 < id.length && id.charCodeAt(star + 1) === SLASH) return star;
    star = id.indexOf('*', star + 1);
  }
  return -1;
}

/**
 * The canonical key of the glob collection `urn` is a direct member of: its
 * last id segment replaced by '*'. An id without '/' (including the empty id)
 * belongs to `xdstp://A/T/*`.
 */
export function globKeyOf(urn: XdstpName): string {
  if (urn.glob) {
    throw new XdstpNameError('glob-in-urn', formatName(urn), 'globKeyOf needs a resource name, but this is a glob');
  }
  if (urn.alt !== undefined || urn.entry !== undefined) {
    throw new XdstpNameError('directive-in-urn', formatName(urn), 'globKeyOf needs a resource name, but this one carries processing directives');
  }
  const id = urn.id;
  const globId = id.slice(0, id.lastIndexOf('/') + 1) + '*';
  return formatParts(urn.authority, urn.resourceType, globId, urn.params, true);
}

/**
 * True iff `urn` is a direct member of glob `glob`: same authority and type,
 * the whole context-parameter set equal, and the id's parent path equal to the
 * glob's. Same answer as `globKeyOf(urn) === canonicalUrl(glob)`, without
 * building either string. Never throws: a non-glob `glob`, or a `urn` that is
 * itself a glob or carries directives, simply matches nothing.
 */
export function matchesGlob(urn: XdstpName, glob: XdstpName): boolean {
  if (!glob.glob || urn.glob || urn.alt !== undefined || urn.entry !== undefined) return false;
  // Cheapest discriminators first: most candidates fail on shape, not on content.
  const prefixLen = glob.id.length - 1;
  const id = urn.id;
  if (urn.params.length !== glob.params.length || id.lastIndexOf('/') + 1 !== prefixLen) return false;
  if (urn.authority !== glob.authority || urn.resourceType !== glob.resourceType) return false;
  // The glob id is `prefix*` where prefix is '' or ends in '/'; the member's
  // parent (everything through its last '/') must be exactly that prefix.
  for (let i = 0; i < prefixLen; i++) if (id.charCodeAt(i) !== glob.id.charCodeAt(i)) return false;
  return sameParamSet(urn.params, glob.params);
}
