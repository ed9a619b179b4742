/**
 * The JSON views behind /debug/*. Pure reads of the relay's state: nothing
 * here changes a subscription, a cache entry or a stream.
 */
import type { Node } from '../proto/messages';
import type { CacheView, SharedTierView, SubscriptionView, TypeStateView, UpstreamStatusView } from './relay-views';
import { decodeResource, type PayloadDecoder } from './payload';

/** What /debug/clients needs of a downstream stream (src/downstream/ads-stream.ts). */
export interface ClientStreamInfo {
  readonly id: number;
  readonly peer: string;
  readonly openedAt: number;
  readonly node: Node | undefined;
  readonly protocol: 'delta' | 'sotw';
  /** Per type URL, in the order of each type's first request. */
  readonly states: readonly TypeStateView[];
  readonly nacks: number;
  readonly lastNonce: string;
  readonly lastAckedNonce: string;
  readonly isSlow: boolean;
  /** Its status for one type (`synced`, `stale`, `nacked`) as the client-status gauge counts it, in constant time; undefined while it subscribes nothing there. */
  typeStatus(typeUrl: string): string | undefined;
}

/** What the debug views need of an upstream. */
export interface UpstreamInfo {
  readonly authority: string | null;
  readonly label: string;
  readonly connected: boolean;
  readonly status: UpstreamStatusView;
  subscriptionCount(): number;
}

export const DEFAULT_LIMIT = 1000;
export const MAX_LIMIT = 100_000;

/** `?limit=` within [1, MAX_LIMIT]; `fallback` when absent or malformed. */
export function limitParam(url: URL, fallback = DEFAULT_LIMIT): number {
  const raw = url.searchParams.get('limit');
  if (raw === null) return fallback;
  const n = Number(raw);
  return Number.isInteger(n) && n > 0 ? Math.min(n, MAX_LIMIT) : fallback;
}

/** `?name=true|1|yes` (and a bare `?name`). */
export function flagParam(url: URL, name: string): boolean {
  const v = url.searchParams.get(name);
  return v !== null && (v === '' || v === '1' || v === 'true' || v === 'yes');
}

function byString<T>(key: (t: T) => string): (a: T, b: T) => number {
  return (a, b) => {
    const x = key(a);
    const y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };
}

// ------------------------------------------------------------ /debug/clients

export interface ClientsQuery {
  /** Only streams whose node id equals this. */
  node?: string;
  limit: number;
  /** Include name → version of every resource each stream holds. */
  held: boolean;
}

function typeView(view: TypeStateView, withHeld: boolean, toldAbsent: string): Record<string, unknown> {
  const subscriptions: string[] = [];
  const rejected: string[] = [];
  for (const [name, sub] of view.names) (sub === null ? rejected : subscriptions).push(name);
  subscriptions.sort();
  rejected.sort();
  let absent = 0;
  for (const v of view.held.values()) if (v === toldAbsent) absent++;
  const out: Record<string, unknown> = {
    typeUrl: view.typeUrl,
    subscriptions,
    held: view.held.size - absent,
    toldAbsent: absent,
  };
  if (rejected.length > 0) out.rejected = rejected;
  if (view.legacyWildcard) out.legacyWildcard = true;
  if (view.nacks > 0) out.nacks = view.nacks;
  if (withHeld) {
    const versions: Record<string, string | null> = {};
    for (const name of [...view.held.keys()].sort()) {
      const v = view.held.get(name)!;
      versions[name] = v === toldAbsent ? null : v;
    }
    out.versions = versions;
  }
  return out;
}

/** `toldAbsent`: what a stream's `held` map stores for a name the client was told does not exist. */
export function clientsView(streams: Iterable<ClientStreamInfo>, q: ClientsQuery, toldAbsent: string, now = Date.now()): Record<string, unknown> {
  const matched: ClientStreamInfo[] = [];
  let total = 0;
  for (const s of streams) {
    total++;
    if (q.node !== undefined && (s.node?.id ?? '') !== q.node) continue;
    matched.push(s);
  }
  matched.sort((a, b) => a.id - b.id);
  const shown = matched.slice(0, q.limit);
  return {
    streams: total,
    matched: matched.length,
    truncated: shown.length < matched.length,
    clients: shown.map((s) => {
      const node = s.node;
      return {
        id: s.id,
        peer: s.peer,
        protocol: s.protocol,
        node: node
          ? {
              id: node.id ?? '',
              cluster: node.cluster ?? '',
              userAgent: [node.user_agent_name, node.user_agent_version].filter(Boolean).join('/'),
              ...(node.locality ? { locality: node.locality } : {}),
              ...(node.client_features && node.client_features.length > 0 ? { clientFeatures: node.client_features } : {}),
            }
          : null,
        openedAt: new Date(s.openedAt).toISOString(),
        ageSeconds: Math.max(0, Math.round((now - s.openedAt) / 1000)),
        ack: {
          lastNonce: s.lastNonce,
          lastAckedNonce: s.lastAckedNonce,
          // Every response sent so far has been ACKed (NACKs don't count as ACKs).
          upToDate: s.lastNonce === s.lastAckedNonce,
          nacks: s.nacks,
        },
        slow: s.isSlow,
        types: [...s.states].sort(byString((v) => v.typeUrl)).map((v) => typeView(v, q.held, toldAbsent)),
      };
    }),
  };
}

// ------------------------------------------------------ /debug/subscriptions

export interface SubscriptionsQuery {
  /** Only keys starting with this. */
  prefix?: string;
  limit: number;
}

/** Where a subscription stands with respect to its upstream. */
export type SyncState = 'synced' | 'absent' | 'pending' | 'uncacheable';

function syncOf(sub: SubscriptionView, cache: CacheView): { state: SyncState; version?: string; members?: number } {
  if (sub.isCollection) {
    const members = cache.memberCount(sub.key);
    if (members > 0) return { state: 'synced', members };
    if (cache.isAbsent(sub.key)) return { state: 'absent', members: 0 };
  } else {
    const entry = cache.get(sub.key);
    if (entry) return { state: 'synced', version: entry.version };
    if (cache.isAbsent(sub.key)) return { state: 'absent' };
  }
  return { state: sub.refetch ? 'uncacheable' : 'pending' };
}

export function upstreamsView(upstreams: Iterable<UpstreamInfo>): Array<Record<string, unknown>> {
  return [...upstreams].map((u) => ({
    authority: u.authority,
    label: u.label,
    connected: u.connected,
    state: u.status.state,
    subscriptions: u.subscriptionCount(),
    // Per server: state, last error (gRPC code and message), last connected, last response.
    servers: u.status.servers ?? [],
    status: u.status,
  }));
}

export function subscriptionsView(
  subs: Iterable<SubscriptionView>,
  cache: CacheView,
  upstreams: Iterable<UpstreamInfo>,
  counts: { clientSubscriptions: number },
  q: SubscriptionsQuery,
): Record<string, unknown> {
  const all = [...subs];
  const matched = q.prefix === undefined ? all : all.filter((s) => s.key.startsWith(q.prefix!));
  matched.sort(byString((s) => s.key));
  const shown = matched.slice(0, q.limit);
  return {
    upstreamSubscriptions: all.length,
    clientSubscriptions: counts.clientSubscriptions,
    dedupRatio: all.length === 0 ? 1 : counts.clientSubscriptions / all.length,
    upstreams: upstreamsView(upstreams),
    matched: matched.length,
    truncated: shown.length < matched.length,
    subscriptions: shown.map((s) => ({
      key: s.key,
      kind: s.kind,
      typeUrl: s.typeUrl,
      authority: s.upstream.label,
      upstreamName: s.upstreamName,
      refcount: s.watchers.size,
      // No client left: the upstream subscription ends when the grace timer fires.
      releasing: s.graceTimer !== undefined,
      upstreamConnected: s.upstream.connected,
      ...syncOf(s, cache),
    })),
  };
}

// ------------------------------------------------------------- /debug/cache

export interface CacheQuery {
  /** Only resources whose key (canonical URN, or `legacy:<type>:<name>`) or name starts with this. */
  prefix?: string;
  limit: number;
  /** Decode payloads (default true); false lists names and versions only. */
  payloads: boolean;
}

export function cacheView(
  cache: CacheView,
  shared: SharedTierView | undefined,
  decode: PayloadDecoder,
  q: CacheQuery,
  now = Date.now(),
): Record<string, unknown> {
  const matched = [];
  for (const e of cache.entries()) {
    if (q.prefix === undefined || e.key.startsWith(q.prefix) || e.name.startsWith(q.prefix)) matched.push(e);
  }
  matched.sort(byString((e) => e.key));
  const shown = matched.slice(0, q.limit);
  return {
    resources: cache.size,
    bytes: cache.bytes,
    sharedTier: shared === undefined ? 'none' : shared.healthy ? 'healthy' : 'unavailable',
    matched: matched.length,
    truncated: shown.length < matched.length,
    entries: shown.map((e) => {
      const s = e.stored;
      const out: Record<string, unknown> = {
        key: e.key,
        name: e.name,
        typeUrl: s.typeUrl,
        version: e.version,
        bytes: s.resource.length,
      };
      if (s.glob !== undefined) out.glob = s.glob;
      if (s.expiresAt !== undefined) {
        out.expiresAt = new Date(s.expiresAt).toISOString();
        out.expiresInSeconds = Math.max(0, (s.expiresAt - now) / 1000);
      }
      if (q.payloads) Object.assign(out, decodeResource(s.resource, decode));
      return out;
    }),
  };
}
