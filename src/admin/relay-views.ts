/**
 * What the admin views read of the relay's running parts, declared here so
 * admin/ imports nothing of downstream/, engine/, upstream/ or cache/: the top
 * (src/relay.ts) hands in its own objects, which have these shapes among
 * others. Each interface names only what admin reads.
 */

/** Of a client stream's state for one resource type (downstream/subscription-state.ts). */
export interface TypeStateView {
  readonly typeUrl: string;
  /** The names it subscribed to, each with its subscription, or null where the relay refused it. */
  readonly names: ReadonlyMap<string, unknown>;
  /** How many of `names` the relay refused. */
  readonly refusedCount: number;
  /** Name as the client knows it → version last sent, or the told-absent marker (AdminSources.toldAbsent). */
  readonly held: ReadonlyMap<string, string>;
  readonly legacyWildcard: boolean;
  readonly nacks: number;
}

/** Of one upstream subscription (engine/subscription.ts). */
export interface SubscriptionView {
  readonly key: string;
  readonly kind: string;
  readonly typeUrl: string;
  readonly upstream: { readonly label: string; readonly connected: boolean };
  readonly upstreamName: string;
  readonly watchers: { readonly size: number };
  /** Set while no client is left and the grace period runs. */
  readonly graceTimer: unknown;
  readonly isCollection: boolean;
  /** Its content was marked do_not_cache. */
  readonly refetch: boolean;
}

/** Of a cached resource (cache/types.ts StoredResource). */
export interface StoredResourceView {
  readonly typeUrl: string;
  readonly resource: Buffer;
  readonly glob?: string;
  readonly expiresAt?: number;
}

/** Of a cache entry (cache/memory-cache.ts). */
export interface CacheEntryView {
  readonly key: string;
  readonly name: string;
  readonly version: string;
  readonly stored: StoredResourceView;
}

/** Of the memory cache (cache/memory-cache.ts). */
export interface CacheView {
  readonly size: number;
  readonly bytes: number;
  get(key: string): { readonly version: string } | undefined;
  isAbsent(key: string): boolean;
  memberCount(collectionKey: string): number;
  entries(): Iterable<CacheEntryView>;
}

/** Of the shared tier (cache/types.ts SharedStore). */
export interface SharedTierView {
  readonly healthy: boolean;
}

/** Of one server of an upstream (upstream/types.ts UpstreamServerStatus). */
export interface UpstreamServerView {
  readonly target: string;
  readonly state: string;
  readonly lastError: { readonly codeName: string; readonly message: string; readonly at: string } | null;
  readonly lastConnected: string | null;
  readonly lastResponse: string | null;
}

/** Of an upstream's status (upstream/types.ts UpstreamStatus); the debug view shows all of it. */
export interface UpstreamStatusView {
  readonly state: string;
  readonly target?: string;
  readonly dir?: string;
  readonly rejectedNames?: number;
  readonly rejected?: ReadonlyArray<{ readonly file: string; readonly error: string }>;
  readonly servers?: readonly UpstreamServerView[];
}

/** Of one resource of a client in the status source (downstream/status-source.ts ResourceStatus). */
export interface ResourceStatusView {
  readonly typeUrl: string;
  readonly name: string;
  /** Its last NACK: the version rejected and the client's message. */
  readonly error?: { readonly version: string; readonly details: string };
}

/** Of one client of the status source (downstream/status-source.ts StatusClient). */
export interface StatusClientView {
  /** `stream/<id>/<protocol>` for a client stream. */
  readonly scope: string;
  resources(includeContents: boolean): Iterable<ResourceStatusView>;
}

/** Of the status source CSDS answers from (downstream/status-source.ts). */
export interface StatusView {
  clients(): Iterable<StatusClientView>;
}

/** Of a finished drain (downstream/drain.ts DrainResult). */
export interface DrainView {
  readonly streams: number;
  readonly batches: number;
  readonly periodMs: number;
}
