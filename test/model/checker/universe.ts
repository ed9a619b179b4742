/**
 * The small world a checker run lives in: which types, authorities and names
 * exist. It is kept deliberately small so that clients keep colliding on the
 * same upstream keys, which is where a caching relay goes wrong.
 */
import { CLUSTER, ENDPOINT, LISTENER, LISTENER_COLLECTION, keyOf, typeName } from '../../support/names';
import type { Authority, ModelOptions } from '../types';

export { CLUSTER, ENDPOINT, LISTENER, LISTENER_COLLECTION };

/** Authorities the relay serves; `a1` has two control-plane servers (failover). */
export const AUTHORITIES = ['a1', 'a2'] as const;
/** An authority the relay is not configured for: subscriptions to it are refused. */
export const UNKNOWN_AUTHORITY = 'zz';

export const TYPES = [CLUSTER, ENDPOINT, LISTENER_COLLECTION] as const;
/** Types whose empty first request is the legacy wildcard. */
export const LEGACY_WILDCARD_TYPES = new Set<string>([LISTENER, CLUSTER]);
/** SotW types whose responses carry the whole state of the world. */
export const FULL_STATE_TYPES = new Set<string>([LISTENER, CLUSTER]);

export function modelOptions(): ModelOptions {
  return {
    fullStateTypes: FULL_STATE_TYPES,
    legacyWildcardTypes: LEGACY_WILDCARD_TYPES,
    authorities: new Set(AUTHORITIES),
    hasDefaultUpstream: true,
  };
}

/** The context parameters every parametrized name carries; spellings differ in their order. */
const PARAMS = [
  ['k', '1'],
  ['j', '2'],
] as const;

/** One upstream resource identity: where it lives and its canonical name. */
export interface ResourceSlot {
  authority: Authority;
  typeUrl: string;
  /** Canonical for xdstp names, verbatim for legacy ones; the control plane stores it under this spelling. */
  name: string;
}

/** An xdstp name with `?k=1&j=2` in the given order (or none). */
function xname(authority: string, typeUrl: string, id: string, params: 'kj' | 'jk' | 'none'): string {
  const base = `xdstp://${authority}/${typeName(typeUrl)}/${id}`;
  if (params === 'none') return base;
  const ps = params === 'kj' ? PARAMS : [...PARAMS].reverse();
  return `${base}?${ps.map(([k, v]) => `${k}=${v}`).join('&')}`;
}

/** Resources a control plane may hold (what `put` / `delete` act on). */
export function slotsOf(typeUrl: string): ResourceSlot[] {
  const out: ResourceSlot[] = [];
  if (typeUrl === LISTENER_COLLECTION) {
    for (const a of AUTHORITIES) out.push({ authority: a, typeUrl, name: keyOf(xname(a, typeUrl, 'c1', 'kj')) });
    return out;
  }
  out.push({ authority: 'a1', typeUrl, name: keyOf(xname('a1', typeUrl, 's1', 'kj')) });
  out.push({ authority: 'a2', typeUrl, name: keyOf(xname('a2', typeUrl, 's1', 'kj')) });
  for (const m of ['m1', 'm2', 'm3']) out.push({ authority: 'a1', typeUrl, name: keyOf(xname('a1', typeUrl, `g/${m}`, 'kj')) });
  out.push({ authority: 'a2', typeUrl, name: keyOf(xname('a2', typeUrl, 'g/m1', 'kj')) });
  // In the glob's path but without its context parameters: not a member.
  out.push({ authority: 'a1', typeUrl, name: keyOf(xname('a1', typeUrl, 'g/m4', 'none')) });
  out.push({ authority: null, typeUrl, name: 'l1' });
  out.push({ authority: null, typeUrl, name: 'l2' });
  return out;
}

/** Every way a client may spell a subscription of `typeUrl` (the generator picks among these). */
export interface SubscriptionChoices {
  /** Singletons that may exist, each with its spellings. */
  singletons: string[][];
  globs: string[][];
  legacy: string[];
  /** Names no control plane ever holds. */
  missing: string[];
  /** Names under an authority the relay does not serve. */
  refused: string[];
  /** Whether `*` (legacy wildcard) is meaningful for the type. */
  wildcard: boolean;
}

export function choicesOf(typeUrl: string): SubscriptionChoices {
  const spell = (a: string, id: string): string[] => [
    xname(a, typeUrl, id, 'kj'),
    xname(a, typeUrl, id, 'jk'),
    // Percent-encoding an unreserved character is another spelling of the same name.
    xname(a, typeUrl, id.replace(/1$/, '%31'), 'jk'),
  ];
  if (typeUrl === LISTENER_COLLECTION) {
    return {
      singletons: AUTHORITIES.map((a) => spell(a, 'c1')),
      globs: [],
      legacy: [],
      missing: [xname('a2', typeUrl, 'c9', 'kj')],
      refused: [xname(UNKNOWN_AUTHORITY, typeUrl, 'c1', 'kj')],
      wildcard: false,
    };
  }
  return {
    singletons: [spell('a1', 's1'), spell('a2', 's1'), spell('a1', 'g/m1'), [xname('a1', typeUrl, 'g/m4', 'none')]],
    globs: [
      [xname('a1', typeUrl, 'g/*', 'kj'), xname('a1', typeUrl, 'g/*', 'jk')],
      [xname('a2', typeUrl, 'g/*', 'jk'), xname('a2', typeUrl, 'g/*', 'kj')],
    ],
    legacy: ['l1', 'l2', 'l9'],
    missing: [xname('a2', typeUrl, 'nope', 'kj')],
    refused: [xname(UNKNOWN_AUTHORITY, typeUrl, 's1', 'kj')],
    wildcard: LEGACY_WILDCARD_TYPES.has(typeUrl),
  };
}

/** Every spelling the generator can produce for a type, plus the canonical names: candidates for the per-response checks. */
export function candidateNames(typeUrl: string): string[] {
  const c = choicesOf(typeUrl);
  const all = [...c.singletons.flat(), ...c.globs.flat(), ...c.legacy, ...c.missing, ...c.refused];
  for (const s of slotsOf(typeUrl)) all.push(s.name);
  return [...new Set([...all, ...all.map(keyOf)])];
}

/** The payload every resource carries, so a SotW client (which gets only payloads) knows name and version. */
export function encodePayload(name: string, version: string): Buffer {
  return Buffer.from(JSON.stringify({ n: name, v: version }));
}

export function decodePayload(bytes: Uint8Array | undefined): { n: string; v: string } | undefined {
  if (!bytes) return undefined;
  try {
    const o = JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
    if (o && typeof o === 'object' && typeof (o as { n?: unknown }).n === 'string' && typeof (o as { v?: unknown }).v === 'string') {
      return o as { n: string; v: string };
    }
  } catch {
    /* not ours */
  }
  return undefined;
}

/** Short form of a type URL for messages. */
export function shortType(typeUrl: string): string {
  return typeName(typeUrl).split('.').pop() ?? typeUrl;
}
