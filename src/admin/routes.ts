/**
 * The admin HTTP endpoints, built from a small typed view of the relay's
 * objects (AdminSources). GETs only read; the two POSTs are the only state
 * changes (drain, log level).
 */
import type { Readiness } from './readiness';
import { isLogLevel, LOG_LEVELS, setLogLevel, type Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import type { CacheView, DrainView, SharedTierView, StatusView, SubscriptionView } from './relay-views';
import type { AdminReply, AdminServer } from './server';
import {
  cacheView,
  clientsView,
  flagParam,
  limitParam,
  subscriptionsView,
  upstreamsView,
  type ClientStreamInfo,
  type UpstreamInfo,
} from './debug';
import { summarizeClients } from './client-summary';
import { renderHomePage, wantsHomePage, type LimitCount } from './home-page';
import { envoyPayloadDecoder, type PayloadDecoder } from './payload';
import { serverInfo, type ServerInfoSource } from './server-info';

/** What the admin server sees of a running relay. */
export interface AdminSources {
  readonly metrics: RelayMetrics;
  readonly logger: Logger;
  readonly cache: CacheView;
  readonly shared?: SharedTierView;
  readonly engine: { subscriptions(): Iterable<SubscriptionView>; readonly clientSubscriptionCount: number };
  readonly downstream: {
    readonly streams: ReadonlySet<ClientStreamInfo>;
    readonly draining: boolean;
    drain(periodMs: number): Promise<DrainView>;
  };
  readonly upstreams: ReadonlyMap<string | null, UpstreamInfo>;
  /** Default period of POST /drain. */
  readonly drainPeriodMs: number;
  /** True while the downstream listener is bound (false once stopping). */
  listening(): boolean;
  /** Payload → JSON for /debug/cache; Envoy's registry by default. */
  readonly decodePayload?: PayloadDecoder;
  /** Version, start time and configuration for /server_info (absent: the endpoint is not served). */
  readonly serverInfo?: ServerInfoSource;
  /** Per-client config status (CSDS's source) for the home page's client statuses and NACK messages. */
  readonly status?: StatusView;
  /** What a stream's `held` map stores for a name the client was told does not exist (downstream/outgoing.ts TOLD_ABSENT). */
  readonly toldAbsent: string;
  /** The fleet as this relay sees it, for /debug/fleet (src/fleet/registry.ts; absent: not served). */
  readonly fleet?: () => Promise<Record<string, unknown>>;
}

/** Known upstream states; grows (boundedly) with states other upstream kinds report. */
const UPSTREAM_STATES = ['idle', 'connecting', 'ready', 'backoff', 'closed'];


/** Ready = listening, not draining, and either an upstream is connected or the cache can serve. */
export function readiness(sources: AdminSources): Readiness {
  const listening = sources.listening();
  const draining = sources.downstream.draining;
  const upstreams: Readiness['upstreams'] = {};
  let anyConnected = false;
  for (const u of sources.upstreams.values()) {
    upstreams[u.label] = { connected: u.connected, state: u.status.state };
    anyConnected ||= u.connected;
  }
  const upstreamConnected = sources.upstreams.size === 0 || anyConnected;
  const sharedTier = sources.shared === undefined ? 'none' : sources.shared.healthy ? 'healthy' : 'unavailable';
  const cacheCanServe = sources.cache.size > 0 || sharedTier === 'healthy';
  return {
    ready: listening && !draining && (upstreamConnected || cacheCanServe),
    listening,
    draining,
    upstreamConnected,
    cacheCanServe,
    upstreams,
    cachedResources: sources.cache.size,
    sharedTier,
    redis: sharedTier === 'none' ? 'off' : sharedTier === 'healthy' ? 'up' : 'down',
  };
}

/** Sets the gauges that are computed at scrape time; registered with RelayMetrics.addCollector. */
export function refreshRelayGauges(sources: AdminSources): void {
  const { metrics } = sources;
  let upstreamSubs = 0;
  for (const u of sources.upstreams.values()) {
    const n = u.subscriptionCount();
    upstreamSubs += n;
    metrics.upstreamSubscriptions.set({ authority: u.label }, n);
    metrics.upstreamConnected.set({ authority: u.label }, u.connected ? 1 : 0);
    const state = u.status.state;
    // The gRPC upstream's states, plus whatever another kind of upstream reports (a short, fixed set each).
    if (!UPSTREAM_STATES.includes(state) && UPSTREAM_STATES.length < 16) UPSTREAM_STATES.push(state);
    for (const s of UPSTREAM_STATES) metrics.upstreamState.set({ authority: u.label, state: s }, s === state ? 1 : 0);
  }
  metrics.dedupRatio.set(upstreamSubs === 0 ? 1 : sources.engine.clientSubscriptionCount / upstreamSubs);
  metrics.cacheResources.set(sources.cache.size);
  metrics.cacheBytes.set(sources.cache.bytes);
  metrics.draining.set(sources.downstream.draining ? 1 : 0);
}

/** The counters of limits hit, every series (those at 0 too). */
async function limitCounts(metrics: RelayMetrics): Promise<LimitCount[]> {
  const out: LimitCount[] = [];
  const { security } = metrics;
  for (const counter of [security.limitExceeded, security.connectionsRefused, security.connectionsCut]) {
    const m = await counter.get();
    for (const v of m.values) {
      const labels = Object.entries(v.labels).map(([k, x]) => `${k}="${String(x)}"`).join(',');
      out.push({ metric: m.name, labels, value: v.value });
    }
  }
  return out;
}

/** The home page, from the data behind /readyz, /debug/upstreams, /debug/clients and the client status gauge. */
async function homePage(sources: AdminSources): Promise<string> {
  const now = Date.now();
  const ready = readiness(sources);
  return renderHomePage({
    now,
    version: sources.serverInfo?.version,
    startedAt: sources.serverInfo?.startedAt,
    nodeVersion: process.versions.node,
    readiness: ready,
    upstreams: [...sources.upstreams.values()],
    clients: summarizeClients(sources.downstream.streams, sources.status, { maxRows: 200, maxMessages: 10, now }),
    cache: { resources: ready.cachedResources, bytes: sources.cache.bytes, sharedTier: ready.sharedTier },
    limits: await limitCounts(sources.metrics),
    endpoints: ENDPOINTS,
  });
}

function bad(message: string): AdminReply {
  return { status: 400, body: { error: message } };
}

const ENDPOINTS = {
  'GET /?format=html': 'the admin home page (what a browser gets): upstreams, clients by status, NACK messages, cache, limits hit',
  'GET /healthz': 'process is alive',
  'GET /readyz': '200 when listening, not draining, and an upstream is connected or the cache can serve; else 503',
  'GET /metrics': 'Prometheus metrics',
  'GET /debug/clients?node=&limit=&held=': 'client streams: node ids, subscriptions, ack state',
  'GET /debug/subscriptions?prefix=&limit=': 'upstream subscriptions: keys, refcounts, sync state; upstream states',
  'GET /debug/cache?prefix=&limit=&payloads=': 'cached resources: names, versions, payloads as JSON',
  'GET /server_info': 'version, Node version, start time, uptime, the effective configuration (secrets redacted) and its sha256',
  'GET /debug/upstreams': 'upstreams and their servers: state, last error, last connected, last response',
  'GET /debug/fleet': 'relays of the fleet (with --redis): address, version, heartbeat age, clients, drain state',
  'GET /log-level': 'current log level',
  'POST /drain?period=MS&wait=1': 'flip /readyz to 503 and send clients away gradually',
  'POST /log-level?level=LEVEL': `change the log level (${LOG_LEVELS.join('|')})`,
};

/** Adds every admin endpoint to `admin`. */
export function registerAdminRoutes(admin: AdminServer, sources: AdminSources): AdminServer {
  const { logger, metrics } = sources;
  let decoder = sources.decodePayload;
  let drainLogged = false;

  if (sources.serverInfo) {
    const src = sources.serverInfo;
    admin.route('GET /server_info', () => ({ status: 200, body: serverInfo(src) }));
  }
  if (sources.fleet) {
    const fleet = sources.fleet;
    admin.route('GET /debug/fleet', async () => ({ status: 200, body: await fleet() }));
  }
  return admin
    // A browser gets the home page (protected like /debug/*: admin/auth.ts); tools keep the JSON index.
    .route('GET /', async (req, url) =>
      wantsHomePage(req.headers.accept, url.searchParams)
        ? { status: 200, body: await homePage(sources), contentType: 'text/html; charset=utf-8', headers: { 'cache-control': 'no-store' } }
        : { status: 200, body: { service: 'xdstp-relay', endpoints: ENDPOINTS } },
    )
    .route('GET /healthz', () => ({ status: 200, body: { status: 'ok' } }))
    .route('GET /readyz', () => {
      const r = readiness(sources);
      return { status: r.ready ? 200 : 503, body: r };
    })
    .route('GET /metrics', async () => ({
      status: 200,
      body: await metrics.registry.metrics(),
      contentType: metrics.registry.contentType,
    }))
    .route('GET /debug/clients', (_req, url) => ({
      status: 200,
      body: clientsView(sources.downstream.streams, {
        node: url.searchParams.get('node') ?? undefined,
        limit: limitParam(url),
        held: flagParam(url, 'held'),
      }, sources.toldAbsent),
    }))
    .route('GET /debug/subscriptions', (_req, url) => ({
      status: 200,
      body: subscriptionsView(
        sources.engine.subscriptions(),
        sources.cache,
        sources.upstreams.values(),
        { clientSubscriptions: sources.engine.clientSubscriptionCount },
        { prefix: url.searchParams.get('prefix') ?? undefined, limit: limitParam(url) },
      ),
    }))
    .route('GET /debug/upstreams', () => ({ status: 200, body: { upstreams: upstreamsView(sources.upstreams.values()) } }))
    .route('GET /debug/cache', (_req, url) => {
      const payloads = url.searchParams.get('payloads');
      decoder ??= envoyPayloadDecoder();
      return {
        status: 200,
        body: cacheView(sources.cache, sources.shared, decoder, {
          prefix: url.searchParams.get('prefix') ?? undefined,
          limit: limitParam(url, 100),
          payloads: payloads === null || flagParam(url, 'payloads'),
        }),
      };
    })
    .route('GET /log-level', () => ({ status: 200, body: { level: logger.level } }))
    .route('POST /log-level', (_req, url) => {
      const level = url.searchParams.get('level');
      if (!isLogLevel(level)) return bad(`?level= must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
      // Log where it will be seen: before a change that silences info, after one that enables it.
      const before = logger.isLevelEnabled('info');
      if (before) logger.info({ from: logger.level, to: level }, 'log level changed');
      const previous = setLogLevel(logger, level);
      if (!before) logger.info({ from: previous, to: level }, 'log level changed');
      return { status: 200, body: { level, previous } };
    })
    .route('POST /drain', async (_req, url) => {
      let periodMs = sources.drainPeriodMs;
      const period = url.searchParams.get('period');
      if (period !== null) {
        periodMs = Number(period);
        if (!Number.isInteger(periodMs) || periodMs < 0) return bad(`?period= must be a non-negative number of ms, got ${JSON.stringify(period)}`);
      }
      const already = sources.downstream.draining;
      const open = sources.downstream.streams.size;
      const done = sources.downstream.drain(periodMs);
      if (!drainLogged) {
        drainLogged = true;
        logger.info({ streams: open, periodMs }, 'drain started: /readyz now 503, clients are sent away gradually');
        void done.then((r) => logger.info({ streams: r.streams, batches: r.batches, periodMs: r.periodMs }, 'drain complete'));
      }
      if (flagParam(url, 'wait')) {
        const r = await done;
        return { status: 200, body: { draining: true, complete: true, ...r } };
      }
      return { status: 202, body: { draining: true, alreadyDraining: already, streams: open, periodMs: already ? undefined : periodMs } };
    });
}
