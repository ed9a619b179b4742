import * as client from 'prom-client';
import { SecurityMetrics } from './security/metrics';
import { relayVersion } from './version';
import { collectProcessMetrics } from './process-metrics';

const MAX_TYPE_LABELS = 32;

/** A client stream's status for one type (see the `xdstp_relay_clients` help). */
export type ClientStatus = 'synced' | 'stale' | 'nacked';
/** Values of the `status` label of xdstp_relay_clients. */
export const CLIENT_STATUSES: readonly ClientStatus[] = ['synced', 'stale', 'nacked'];
/** Per type URL: client streams by status. */
export type ClientStatusCounts = ReadonlyMap<string, Readonly<Record<ClientStatus, number>>>;

/** Every value of a label, checked complete by the compiler (a missing or unknown key does not build). */
function values<K extends string>(all: Record<K, true>): K[] {
  return Object.keys(all) as K[];
}

/** Why a subscription was refused (the label values of xdstp_relay_rejected_subscriptions_total). */
export type RejectReason = 'malformed' | 'unknown_authority' | 'type_mismatch' | 'no_default_upstream' | 'directive';
/** Why an upstream resource was not forwarded (besides `unsubscribed`). */
export type DropReason = 'malformed' | 'foreign_authority' | 'type_mismatch';
/** Why the relay NACKed an upstream response. */
export type UpstreamNackReason = 'undecodable' | 'duplicate_name' | 'added_and_removed' | 'type_mismatch';
const DROP_REASONS = values<DropReason | 'unsubscribed'>({ unsubscribed: true, malformed: true, foreign_authority: true, type_mismatch: true });
const REJECT_REASONS = values<RejectReason>({ malformed: true, unknown_authority: true, type_mismatch: true, no_default_upstream: true, directive: true });
const UPSTREAM_NACK_REASONS = values<UpstreamNackReason>({ undecodable: true, duplicate_name: true, added_and_removed: true, type_mismatch: true });
const UPSTREAM_REQUEST_KINDS = ['subscribe', 'ack', 'nack'] as const;
/** What an upstream request is, as xdstp_relay_upstream_requests_total counts it. */
export type UpstreamRequestKind = (typeof UPSTREAM_REQUEST_KINDS)[number];
const BAD_REQUEST_REASONS = ['truncated', 'undecodable', 'missing_type_url'] as const;
const GOAWAY_REASONS = ['drain', 'shutdown'] as const;
/** Operations RedisStore reports through onError (src/cache/redis-store.ts). */
const REDIS_OPS = ['connection', 'getResource', 'getGlobMembers', 'write', 'write-dropped', 'warmLoad', 'decode', 'probe', 'fleet'] as const;

/** What a relay is set up with that decides which labelled series exist from the start. */
export interface KnownSeries {
  /** Upstream labels (authority names, `(default)`). */
  authorities: readonly string[];
  redis: boolean;
  /** Files the relay watches and reloads. */
  reloadedFiles: ReadonlyArray<'tls' | 'policy' | 'admin_token'>;
}

/**
 * Per-type counts kept as plain numbers on the hot paths (every response to
 * every client, every subscription in a reconnect storm) and copied into
 * their prom-client metrics at scrape time: an increment through prom-client
 * hashes its labels each time.
 */
export interface TypeTally {
  responses: number;
  resources: number;
  subscriptions: number;
}

/** Label-less hot-path counts, copied into their metrics at scrape time like TypeTally. */
interface Tally {
  bytesSent: number;
  cacheHitsMemory: number;
  cacheHitsShared: number;
  cacheMisses: number;
}

/**
 * Every metric the relay exports, on a registry of its own so several relays
 * in one process (tests, benchmarks) never share counters. Labels are bounded:
 * no client, node or resource name ever becomes a label value.
 */
export class RelayMetrics {
  readonly registry = new client.Registry();
  private readonly typeLabels = new Set<string>();

  readonly downstreamStreams = new client.Gauge({
    name: 'xdstp_relay_downstream_streams_open',
    help: 'Open downstream ADS streams, by protocol (delta, sotw).',
    labelNames: ['protocol'],
    registers: [this.registry],
  });
  readonly downstreamStreamsTotal = new client.Counter({
    name: 'xdstp_relay_downstream_streams_total',
    help: 'Downstream ADS streams accepted since start, by protocol (delta, sotw).',
    labelNames: ['protocol'],
    registers: [this.registry],
  });
  /** Pre-resolved per-protocol children: a reconnect storm does not hash labels per stream. */
  readonly streamsByProtocol = {
    delta: { open: this.downstreamStreams.labels('delta'), total: this.downstreamStreamsTotal.labels('delta') },
    sotw: { open: this.downstreamStreams.labels('sotw'), total: this.downstreamStreamsTotal.labels('sotw') },
  };
  readonly downstreamSubscriptions = new client.Gauge({
    name: 'xdstp_relay_downstream_subscriptions',
    help: 'Client subscriptions (names and globs) across all streams, by type.',
    labelNames: ['type'],
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  readonly upstreamConnected = new client.Gauge({
    name: 'xdstp_relay_upstream_connected',
    help: '1 while the authority has a ready upstream stream, else 0.',
    labelNames: ['authority'],
    registers: [this.registry],
  });
  readonly upstreamState = new client.Gauge({
    name: 'xdstp_relay_upstream_state',
    help: 'Upstream stream state per authority: 1 for the current state (idle, connecting, ready, backoff, closed), 0 for the others.',
    labelNames: ['authority', 'state'],
    registers: [this.registry],
    collect: () => this.runCollectors(),
  });
  readonly upstreamSubscriptions = new client.Gauge({
    name: 'xdstp_relay_upstream_subscriptions',
    help: 'Deduplicated subscriptions held upstream, by authority.',
    labelNames: ['authority'],
    registers: [this.registry],
    collect: () => this.runCollectors(),
  });
  readonly upstreamReconnects = new client.Counter({
    name: 'xdstp_relay_upstream_reconnects_total',
    help: 'Upstream stream (re)connection attempts after a failure.',
    labelNames: ['authority'],
    registers: [this.registry],
  });
  readonly upstreamRequests = new client.Counter({
    name: 'xdstp_relay_upstream_requests_total',
    help: 'DeltaDiscoveryRequests sent upstream (subscription changes and ACKs).',
    labelNames: ['authority', 'kind'],
    registers: [this.registry],
  });
  readonly upstreamResponses = new client.Counter({
    name: 'xdstp_relay_upstream_responses_total',
    help: 'DeltaDiscoveryResponses received from upstream.',
    labelNames: ['authority'],
    registers: [this.registry],
  });
  readonly upstreamNacks = new client.Counter({
    name: 'xdstp_relay_upstream_nacks_total',
    help: 'Upstream responses the relay rejected (NACKed) without applying any of them, by reason (undecodable, duplicate_name, added_and_removed, type_mismatch).',
    labelNames: ['authority', 'reason'],
    registers: [this.registry],
  });
  readonly upstreamRejectedNames = new client.Counter({
    name: 'xdstp_relay_upstream_rejected_names_total',
    help: 'Names dropped from the upstream subscription because subscribing them ends the upstream stream (poison); their clients are answered in removed_resources.',
    labelNames: ['authority'],
    registers: [this.registry],
  });
  readonly dedupRatio = new client.Gauge({
    name: 'xdstp_relay_dedup_ratio',
    help: 'Client subscriptions divided by upstream subscriptions (1 when there are none).',
    registers: [this.registry],
    collect: () => this.runCollectors(),
  });
  readonly cacheResources = new client.Gauge({
    name: 'xdstp_relay_cache_resources',
    help: 'Resources held in the in-process cache.',
    registers: [this.registry],
    collect: () => this.runCollectors(),
  });
  readonly cacheBytes = new client.Gauge({
    name: 'xdstp_relay_cache_bytes',
    help: 'Encoded bytes of the resources held in the in-process cache.',
    registers: [this.registry],
    collect: () => this.runCollectors(),
  });
  readonly cacheHits = new client.Counter({
    name: 'xdstp_relay_cache_hits_total',
    help: 'New subscriptions answered from the cache without waiting for upstream.',
    labelNames: ['tier'],
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  readonly cacheMisses = new client.Counter({
    name: 'xdstp_relay_cache_misses_total',
    help: 'New subscriptions that had to wait for upstream.',
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  readonly redisErrors = new client.Counter({
    name: 'xdstp_relay_redis_errors_total',
    help: 'Failed or timed-out Redis operations.',
    labelNames: ['op'],
    registers: [this.registry],
  });
  readonly responsesSent = new client.Counter({
    name: 'xdstp_relay_responses_sent_total',
    help: 'DeltaDiscoveryResponses written to clients.',
    labelNames: ['type'],
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  readonly resourcesSent = new client.Counter({
    name: 'xdstp_relay_resources_sent_total',
    help: 'Resources (adds and updates) written to clients.',
    labelNames: ['type'],
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  readonly bytesSent = new client.Counter({
    name: 'xdstp_relay_sent_bytes_total',
    help: 'Response bytes written to clients.',
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  readonly responsesEncoded = new client.Counter({
    name: 'xdstp_relay_responses_encoded_total',
    help: 'Distinct response encodings built (shared by every client that gets the same bytes).',
    registers: [this.registry],
  });
  readonly nacks = new client.Counter({
    name: 'xdstp_relay_nacks_total',
    help: 'NACKs received from clients.',
    labelNames: ['type'],
    registers: [this.registry],
  });
  readonly droppedResources = new client.Counter({
    name: 'xdstp_relay_dropped_resources_total',
    help: 'Upstream resources not forwarded, by reason (unsubscribed, foreign_authority, malformed, type_mismatch).',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly rejectedSubscriptions = new client.Counter({
    name: 'xdstp_relay_rejected_subscriptions_total',
    help: 'Client subscriptions answered in removed_resources because they cannot be routed, by reason.',
    labelNames: ['reason'],
    registers: [this.registry],
    collect: () => this.flushTallies(),
  });
  /**
   * Unroutable subscriptions by reason as plain numbers, copied into
   * rejectedSubscriptions with the other tallies (flushTallies): one request
   * can name hundreds of thousands of them, and a labelled inc hashes its
   * labels every time.
   */
  readonly rejected: Record<RejectReason, number> = { malformed: 0, unknown_authority: 0, type_mismatch: 0, no_default_upstream: 0, directive: 0 };
  private readonly rejectedFlushed: Record<RejectReason, number> = { ...this.rejected };
  readonly badRequests = new client.Counter({
    name: 'xdstp_relay_bad_requests_total',
    help: 'Client streams ended because of a malformed request.',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly coalescedUpdates = new client.Counter({
    name: 'xdstp_relay_coalesced_updates_total',
    help: 'Updates held back for a slow client and merged into its next response.',
    registers: [this.registry],
  });
  readonly pushLatency = new client.Histogram({
    name: 'xdstp_relay_push_latency_seconds',
    help: 'Time from receipt of an upstream response to the write of the resulting client responses.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  readonly draining = new client.Gauge({
    name: 'xdstp_relay_draining',
    help: '1 once a drain (POST /drain) or shutdown has started: /readyz answers 503.',
    registers: [this.registry],
  });
  readonly goaways = new client.Counter({
    name: 'xdstp_relay_goaways_total',
    help: 'Client streams sent away (GOAWAY, then UNAVAILABLE) so they reconnect elsewhere, by reason (drain, shutdown).',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly clients = new client.Gauge({
    name: 'xdstp_relay_clients',
    help: 'Client streams by config status per type: nacked if any of its resources of that type is NACKed, else stale if any is stale, else synced.',
    labelNames: ['type', 'status'],
    registers: [this.registry],
    collect: () => this.collectClientStatus(),
  });
  readonly buildInfo = new client.Gauge({
    name: 'xdstp_relay_build_info',
    help: 'Always 1; labels carry the relay and Node.js versions.',
    labelNames: ['version', 'nodejs'],
    registers: [this.registry],
  });

  /** TLS, authorization, limits and abuse (src/security/metrics.ts). */
  readonly security = new SecurityMetrics(this.registry);

  /** Refreshers of the gauges computed at scrape time (sizes, ratios, states). */
  private readonly collectors: Array<() => void> = [];

  constructor(opts: { defaultMetrics?: boolean; version?: string } = {}) {
    // Standard names (process_cpu_seconds_total, nodejs_heap_size_used_bytes…): stock Node and process dashboards find them.
    if (opts.defaultMetrics ?? true) collectProcessMetrics(this.registry);
    this.buildInfo.set({ version: opts.version ?? relayVersion(), nodejs: process.versions.node }, 1);
    // Labelled counters whose label values are known up front start at 0: rate() and increase() see their first event.
    for (const reason of DROP_REASONS) this.droppedResources.inc({ reason }, 0);
    for (const reason of REJECT_REASONS) this.rejectedSubscriptions.inc({ reason }, 0);
    for (const reason of BAD_REQUEST_REASONS) this.badRequests.inc({ reason }, 0);
    for (const reason of GOAWAY_REASONS) this.goaways.inc({ reason }, 0);
    for (const tier of ['memory', 'shared']) this.cacheHits.inc({ tier }, 0);
  }

  /** Starts the series that depend on the configuration at 0: per authority, Redis operations, reloaded files. */
  zeroKnownSeries(known: KnownSeries): void {
    for (const authority of known.authorities) {
      this.upstreamReconnects.inc({ authority }, 0);
      this.upstreamResponses.inc({ authority }, 0);
      this.upstreamRejectedNames.inc({ authority }, 0);
      for (const kind of UPSTREAM_REQUEST_KINDS) this.upstreamRequests.inc({ authority, kind }, 0);
      for (const reason of UPSTREAM_NACK_REASONS) this.upstreamNacks.inc({ authority, reason }, 0);
    }
    if (known.redis) for (const op of REDIS_OPS) this.redisErrors.inc({ op }, 0);
    this.security.zeroConfiguredSeries(known);
  }

  /**
   * Registers a function that sets the scrape-time gauges from the relay's
   * state. It runs on every read of the registry (cheap: it walks upstreams,
   * not clients or resources); a failing collector never breaks a scrape.
   */
  addCollector(fn: () => void): void {
    this.collectors.push(fn);
  }

  private runCollectors(): void {
    for (const fn of this.collectors) {
      try {
        fn();
      } catch {
        // A metric left stale is better than a failed scrape.
      }
    }
  }

  private clientStatusCounts: (() => ClientStatusCounts) | undefined;

  /** Where `xdstp_relay_clients` is read from at scrape time: counts kept as clients change. */
  watchClientStatus(counts: () => ClientStatusCounts): void {
    this.clientStatusCounts = counts;
  }

  private collectClientStatus(): void {
    let counts: ClientStatusCounts;
    try {
      const read = this.clientStatusCounts;
      if (!read) return;
      counts = read();
    } catch {
      // The last values are better than a failed scrape.
      return;
    }
    const byLabel = new Map<string, Record<ClientStatus, number>>();
    for (const [typeUrl, c] of counts) {
      const type = this.typeLabel(typeUrl);
      let sum = byLabel.get(type);
      if (!sum) byLabel.set(type, (sum = { synced: 0, stale: 0, nacked: 0 }));
      for (const status of CLIENT_STATUSES) sum[status] += c[status];
    }
    this.clients.reset();
    for (const [type, sum] of byLabel) {
      for (const status of CLIENT_STATUSES) this.clients.set({ type, status }, sum[status]);
    }
  }

  /** Type URL → the tally of its label (several URLs may share the `other` label's). */
  private readonly perType = new Map<string, TypeTally>();
  private readonly perLabel = new Map<string, { tally: TypeTally; flushed: TypeTally }>();
  /** Hot-path counts without labels (see TypeTally). */
  readonly tally: Tally = { bytesSent: 0, cacheHitsMemory: 0, cacheHitsShared: 0, cacheMisses: 0 };
  private readonly flushed: Tally = { bytesSent: 0, cacheHitsMemory: 0, cacheHitsShared: 0, cacheMisses: 0 };

  /** The per-type tally for a type URL: plain numbers the hot paths add to (see TypeTally). */
  forType(typeUrl: string): TypeTally {
    let t = this.perType.get(typeUrl);
    if (!t) {
      const type = this.typeLabel(typeUrl);
      let byLabel = this.perLabel.get(type);
      if (!byLabel) {
        byLabel = { tally: { responses: 0, resources: 0, subscriptions: 0 }, flushed: { responses: 0, resources: 0, subscriptions: 0 } };
        this.perLabel.set(type, byLabel);
      }
      t = byLabel.tally;
      if (this.perType.size < MAX_TYPE_LABELS * 4) this.perType.set(typeUrl, t);
    }
    return t;
  }

  /** Copies the tallies into their metrics (runs on every read of one of them; idempotent). */
  private flushTallies(): void {
    for (const [type, { tally, flushed }] of this.perLabel) {
      if (tally.responses !== flushed.responses) this.responsesSent.inc({ type }, tally.responses - flushed.responses);
      if (tally.resources !== flushed.resources) this.resourcesSent.inc({ type }, tally.resources - flushed.resources);
      this.downstreamSubscriptions.set({ type }, tally.subscriptions);
      flushed.responses = tally.responses;
      flushed.resources = tally.resources;
    }
    const t = this.tally;
    const f = this.flushed;
    if (t.bytesSent !== f.bytesSent) this.bytesSent.inc(t.bytesSent - f.bytesSent);
    if (t.cacheHitsMemory !== f.cacheHitsMemory) this.cacheHits.inc({ tier: 'memory' }, t.cacheHitsMemory - f.cacheHitsMemory);
    if (t.cacheHitsShared !== f.cacheHitsShared) this.cacheHits.inc({ tier: 'shared' }, t.cacheHitsShared - f.cacheHitsShared);
    if (t.cacheMisses !== f.cacheMisses) this.cacheMisses.inc(t.cacheMisses - f.cacheMisses);
    Object.assign(f, t);
    for (const reason of REJECT_REASONS) {
      const n = this.rejected[reason] - this.rejectedFlushed[reason];
      if (n > 0) this.rejectedSubscriptions.inc({ reason }, n);
    }
    Object.assign(this.rejectedFlushed, this.rejected);
  }

  /** A bounded label for a type URL: its message name, or `other` once the set is full. */
  typeLabel(typeUrl: string): string {
    const slash = typeUrl.lastIndexOf('/');
    const name = slash >= 0 ? typeUrl.slice(slash + 1) : typeUrl;
    if (this.typeLabels.has(name)) return name;
    if (this.typeLabels.size >= MAX_TYPE_LABELS || name.length > 100 || !/^[A-Za-z0-9_.]+$/.test(name)) return 'other';
    this.typeLabels.add(name);
    return name;
  }
}
