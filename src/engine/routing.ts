import type { DropReason, RejectReason } from '../metrics';
import {
  XdstpNameError,
  canonicalUrl,
  formatName,
  globKeyOf,
  isXdstpName,
  parseUrl,
  parseUrn,
  typeUrlOf,
} from '../xdstp';
import { WILDCARD } from '../proto/xds-names';

export type SubscriptionKind = 'singleton' | 'glob' | 'legacy' | 'wildcard';

/** Where a client subscription goes: its dedup key, upstream and the name asked upstream. */
export interface Route {
  readonly kind: SubscriptionKind;
  readonly key: string;
  /** Authority of the upstream that serves it; null = the default upstream (legacy names). */
  readonly authority: string | null;
  /** The name subscribed upstream: canonical for xdstp, verbatim for legacy names. */
  readonly upstreamName: string;
}


export interface Rejection {
  reason: RejectReason;
  message: string;
}

/** Where an upstream resource belongs in the cache. */
export interface ResourceKey {
  key: string;
  /** Name the resource is sent under to collection (glob / wildcard) subscribers. */
  name: string;
  /** Key of the collection it is a direct member of. */
  collection: string;
}



export function legacyKey(typeUrl: string, name: string): string {
  return `legacy:${typeUrl}:${name}`;
}

/** Routes remembered per type URL; past this many, that type's memo starts over. */
const ROUTE_MEMO_LIMIT = 32_768;
/** Type URLs with a memo; past this many (clients inventing type URLs), all start over. */
const ROUTE_MEMO_TYPES = 64;

/** Decides, per name, which upstream serves it and under which key it is deduplicated. */
export class Router {
  /**
   * route() depends only on its arguments, and a reconnect storm asks it the
   * same few names for every client: its answers are remembered (bounded, so
   * clients inventing names cannot grow it without limit).
   */
  private readonly routes = new Map<string, Map<string, Route | Rejection>>();
  /** heldKey's answers, remembered the same way (per-client state asks it for every name a client holds). */
  private readonly heldKeys = new Map<string, Map<string, ResourceKey | null>>();
  /**
   * resourceKey's answers by authority and type, remembered the same way: a
   * control plane sends the same names again with every change, and a
   * remembered key is looked up in the engine's maps with its hash known.
   */
  private readonly resourceKeys = new Map<string | null, Map<string, Map<string, ResourceKey | DropReason>>>();

  constructor(
    private readonly authorities: ReadonlySet<string>,
    private readonly hasDefaultUpstream: boolean,
  ) {}

  route(typeUrl: string, name: string): Route | Rejection {
    const memo = memoOf(this.routes, typeUrl);
    const r = memo.get(name);
    return r !== undefined ? r : remember(memo, name, this.computeRoute(typeUrl, name));
  }

  private computeRoute(typeUrl: string, name: string): Route | Rejection {
    if (!isXdstpName(name)) {
      if (!this.hasDefaultUpstream) {
        return { reason: 'no_default_upstream', message: `non-xdstp name "${name}" and no --default-upstream is configured` };
      }
      const kind = name === WILDCARD ? 'wildcard' : 'legacy';
      return { kind, key: legacyKey(typeUrl, name), authority: null, upstreamName: name };
    }
    let parsed;
    try {
      parsed = parseUrl(name);
    } catch (err) {
      if (err instanceof XdstpNameError) return { reason: 'malformed', message: err.message };
      throw err;
    }
    if (parsed.alt !== undefined || parsed.entry !== undefined) {
      return { reason: 'directive', message: `"${name}" carries a processing directive; subscribe to the resource it locates` };
    }
    if (typeUrlOf(parsed.resourceType) !== typeUrl) {
      return { reason: 'type_mismatch', message: `"${name}" names type ${parsed.resourceType}, not the stream's ${typeUrl}` };
    }
    if (!this.authorities.has(parsed.authority)) {
      return { reason: 'unknown_authority', message: `no upstream is configured for authority "${parsed.authority}"` };
    }
    const key = parsed.glob ? canonicalUrl(name) : formatName(parsed, { canonical: true, directives: false });
    return { kind: parsed.glob ? 'glob' : 'singleton', key, authority: parsed.authority, upstreamName: key };
  }

  /** Keys an upstream resource; null authority = the default upstream, which only serves legacy names. */
  resourceKey(authority: string | null, typeUrl: string, name: string): ResourceKey | DropReason {
    // Authorities are the configured ones (and null): one memo each, no bound needed on them.
    let memos = this.resourceKeys.get(authority);
    if (!memos) this.resourceKeys.set(authority, (memos = new Map()));
    const memo = memoOf(memos, typeUrl);
    const k = memo.get(name);
    return k !== undefined ? k : remember(memo, name, this.computeResourceKey(authority, typeUrl, name));
  }

  private computeResourceKey(authority: string | null, typeUrl: string, name: string): ResourceKey | DropReason {
    if (!isXdstpName(name)) {
      if (authority !== null || name === WILDCARD || name === '') return 'foreign_authority';
      return { key: legacyKey(typeUrl, name), name, collection: legacyKey(typeUrl, WILDCARD) };
    }
    if (authority === null) return 'foreign_authority';
    let parsed;
    try {
      parsed = parseUrn(name);
    } catch {
      return 'malformed';
    }
    if (parsed.authority !== authority) return 'foreign_authority';
    if (typeUrlOf(parsed.resourceType) !== typeUrl) return 'type_mismatch';
    const key = formatName(parsed, { canonical: true, directives: false });
    return { key, name: key, collection: globKeyOf(parsed) };
  }

  /**
   * Keys a resource name a client says it holds (initial_resource_versions),
   * whichever upstream serves it; undefined for names no upstream could send.
   */
  heldKey(typeUrl: string, name: string): ResourceKey | undefined {
    const memo = memoOf(this.heldKeys, typeUrl);
    let k = memo.get(name);
    if (k === undefined) k = remember(memo, name, this.computeHeldKey(typeUrl, name) ?? null);
    return k ?? undefined;
  }

  private computeHeldKey(typeUrl: string, name: string): ResourceKey | undefined {
    if (!isXdstpName(name)) {
      if (name === WILDCARD || name === '') return undefined;
      return { key: legacyKey(typeUrl, name), name, collection: legacyKey(typeUrl, WILDCARD) };
    }
    let parsed;
    try {
      parsed = parseUrn(name);
    } catch {
      return undefined;
    }
    if (typeUrlOf(parsed.resourceType) !== typeUrl) return undefined;
    const key = formatName(parsed, { canonical: true, directives: false });
    return { key, name: key, collection: globKeyOf(parsed) };
  }

  /**
   * Keys a name from an upstream's removed_resources: a resource, or a glob URL
   * meaning the collection is empty. Null for names the upstream may not speak for.
   */
  removalKey(authority: string | null, typeUrl: string, name: string): { key: string; isCollection: boolean } | null {
    if (!isXdstpName(name)) {
      if (authority !== null || name === '' || name === WILDCARD) return null;
      return { key: legacyKey(typeUrl, name), isCollection: false };
    }
    if (authority === null) return null;
    try {
      const parsed = parseUrl(name);
      if (parsed.authority !== authority || typeUrlOf(parsed.resourceType) !== typeUrl) return null;
      return { key: formatName(parsed, { canonical: true, directives: false }), isCollection: parsed.glob };
    } catch {
      return null;
    }
  }
}

/**
 * The memo of `typeUrl` among `memos`, made on first use (past
 * ROUTE_MEMO_TYPES types, all start over). The callers look a name up in it
 * and compute only on a miss (remember): no closure per call, as they run
 * for every name of every request and every upstream resource.
 */
function memoOf<T>(memos: Map<string, Map<string, T>>, typeUrl: string): Map<string, T> {
  let memo = memos.get(typeUrl);
  if (!memo) {
    if (memos.size >= ROUTE_MEMO_TYPES) memos.clear();
    memos.set(typeUrl, (memo = new Map()));
  }
  return memo;
}

/** Stores `value` for `name` in `memo` (starting it over past ROUTE_MEMO_LIMIT names) and returns it. */
function remember<T>(memo: Map<string, T>, name: string, value: T): T {
  if (memo.size >= ROUTE_MEMO_LIMIT) memo.clear();
  memo.set(name, value);
  return value;
}

export function isRejection(r: Route | Rejection): r is Rejection {
  return (r as Rejection).reason !== undefined;
}
