/**
 * What the relay keeps per resource. The payload is the envoy `Resource`
 * message exactly as the upstream encoded it: the relay never decodes the
 * `Any` inside, so bytes pass through untouched.
 */
export interface StoredResource {
  /** Cache key: the canonical xdstp URN, or `legacy:<typeUrl>:<name>` for non-xdstp names. */
  key: string;
  typeUrl: string;
  version: string;
  /** Encoded `envoy.service.discovery.v3.Resource` as received from upstream. */
  resource: Buffer;
  /** Absolute expiry (ms since the epoch) for resources sent with a TTL. */
  expiresAt?: number;
  /** Canonical key of the glob collection this resource is a direct member of (xdstp only). */
  glob?: string;
}

/** One write-through batch, produced by one upstream response. */
export interface StoreBatch {
  put: StoredResource[];
  /** Resources that went away; `glob` lets a store drop them from their collection's member set. */
  remove: Array<{ key: string; glob?: string }>;
  /** Keys (singleton URNs or glob keys) the upstream reported as not existing. */
  absent: string[];
}

/**
 * The shared, persistent cache tier behind the in-process cache (Redis).
 * Implementations never throw to the caller and never block it for long: a
 * failing backend resolves reads with `undefined` ("don't know") and counts
 * the error.
 */
export interface SharedStore {
  write(batch: StoreBatch): Promise<void>;
  /** `undefined` = unknown (not stored, or backend unavailable). */
  getResource(key: string): Promise<StoredResource | 'absent' | undefined>;
  /** Members of a glob collection; `'absent'` when known empty, `undefined` when unknown. */
  getGlobMembers(globKey: string): Promise<StoredResource[] | 'absent' | undefined>;
  /** True while the backend is reachable. */
  readonly healthy: boolean;
  close(): Promise<void>;
  /** Fleet membership records on the same backend, when it keeps them (Redis does). */
  memberRecords?(): MemberRecords;
}

/** One live fleet membership record, as the shared tier holds it. */
export interface MemberRecord {
  id: string;
  /** The record as written (JSON, src/fleet/registry.ts). */
  value: string;
  /** How long the record has left before it expires, in ms, by the shared tier's clock. */
  ttlLeftMs: number;
}

/**
 * Fleet membership in the shared tier: one record per relay that expires
 * unless rewritten (the heartbeat). Calls reject when the tier cannot answer.
 */
export interface MemberRecords {
  /** Writes (or rewrites) member `id`'s record, expiring after `ttlMs`. */
  put(id: string, value: string, ttlMs: number): Promise<void>;
  /** Removes member `id` at once (a relay leaving on purpose). */
  remove(id: string): Promise<void>;
  /** Every record not yet expired. */
  list(): Promise<MemberRecord[]>;
}
