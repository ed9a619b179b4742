import * as os from 'node:os';
import { AdminAccess } from './admin/auth';
import { refreshRelayGauges, registerAdminRoutes, type AdminSources } from './admin/routes';
import { registerHeapDebugRoutes } from './admin/heap';
import { AdminServer } from './admin/server';
import { splitHostPort } from './address';
import { MemoryCache } from './cache/memory-cache';
import { createRedisStore } from './cache/redis-store';
import type { SharedStore } from './cache/types';
import { ResourceStore } from './cache/resource-store';
import { canWarmLoad, warmStart, whenAllConnected } from './cache/warm-start';
import { resolveConfig, sharedWarmTimeoutMs, type RelayConfig, type RelayConfigInput } from './config';
import { createCsdsService } from './downstream/csds';
import type { DrainResult } from './downstream/drain';
import { TOLD_ABSENT } from './downstream/outgoing';
import { DownstreamServer } from './downstream/server';
import { relayStatusSource } from './downstream/status-view';
import { SubscriptionEngine } from './engine/engine';
import { Router } from './engine/routing';
import type { UpstreamPort, UpstreamSink, UpstreamStatus } from './upstream/types';
import { createLogger, type Logger } from './log';
import { RelayMetrics } from './metrics';
import type { Node } from './proto/messages';
import { TTL_CLIENT_FEATURE } from './proto/xds-names';
import { createDownstreamSecurity } from './security/downstream';
import { nodeIdIdentity, peerIdentity } from './security/identity';
import { ALLOW_ALL, PolicyStore, type ClientAuthorizer as JoinAuthorizer } from './security/policy';
import { upstreamChannels } from './upstream/upstream-channels';
import type { UpstreamTlsSpec } from './security/tls';
import { RelayFleet } from './fleet/fleet';
import { FileOrigin } from './upstream/file-origin';
import { GrpcUpstream } from './upstream/grpc-upstream';
import { parseUpstreamUri } from './upstream-uri';
import { relayVersion } from './version';

export interface RunningRelay {
  readonly port: number;
  readonly adminPort: number | null;
  readonly metrics: RelayMetrics;
  readonly logger: Logger;
  /** The authorization policy in force (`--policy`), or allow-all. */
  readonly authorizer: JoinAuthorizer;
  /** Flips /readyz to 503 and sends clients away gradually over `periodMs` (default: config.drainPeriodMs). */
  drain(periodMs?: number): Promise<DrainResult>;
  /**
   * Graceful shutdown: stop accepting, GOAWAY + UNAVAILABLE to every client
   * after its queued writes (bounded by config.shutdownGraceMs), close the
   * upstreams, flush the shared store. Idempotent.
   */
  stop(): Promise<void>;
}

export interface RelayOptions {
  logger?: Logger;
  shared?: SharedStore;
  /** A registry made beforehand, e.g. so a shared store's error callback can count into it. */
  metrics?: RelayMetrics;
  /** Adds POST /debug/gc and /debug/heap-snapshot to the admin server (src/admin/heap.ts; leak hunting only). */
  debugHeap?: boolean;
}

/** An upstream the relay can start and stop (gRPC server list or file origin). */
export interface ManagedUpstream extends UpstreamPort {
  start(): void;
  close(): void;
  readonly status: UpstreamStatus;
}

export function defaultNodeId(): string {
  return `xdstp-relay-${os.hostname()}`;
}

function relayNode(nodeId: string): Node {
  return {
    id: nodeId,
    user_agent_name: 'xdstp-relay',
    user_agent_version: relayVersion(),
    client_features: [TTL_CLIENT_FEATURE],
  };
}

/** What every upstream is built with, whichever its authority. */
interface UpstreamWiring {
  sink: UpstreamSink;
  node: Node;
  metrics: RelayMetrics;
  logger: Logger;
  /** No request upstream exceeds this (the relay's --max-response-bytes). */
  maxRequestBytes: number;
}

function createUpstream(authority: string | null, uris: string[], tls: UpstreamTlsSpec | undefined, wiring: UpstreamWiring): ManagedUpstream {
  const { sink, node, metrics, logger, maxRequestBytes } = wiring;
  const targets: string[] = [];
  for (const uri of uris) {
    const parsed = parseUpstreamUri(uri);
    if (parsed.scheme === 'file') {
      // A directory is the origin itself: nothing to fail over to or from.
      if (uris.length > 1) throw new Error(`authority ${authority ?? '(default)'}: ${uri}: a file:// origin cannot be combined with other upstream URIs`);
      return new FileOrigin({ authority, dir: parsed.path, sink, logger, metrics });
    }
    targets.push(parsed.target);
  }
  const channelFor = upstreamChannels(uris, tls, logger.child({ authority: authority ?? '(default)' }));
  return new GrpcUpstream({ authority, targets, node, sink, logger, metrics, maxRequestBytes, channelFor });
}

/**
 * The steps of a relay's teardown, in the order they run. stop() and a start
 * that fails part-way run the same list; a step runs only once what it closes
 * has been opened (registered with Teardown.set).
 */
const TEARDOWN_ORDER = [
  /** Out of the fleet first, so fleet status stops asking for this relay (the record's removal is awaited below). */
  'leave fleet',
  'downstream security',
  'policy',
  /** No new streams; GOAWAY + UNAVAILABLE to every client after its queued writes, bounded by the grace. */
  'downstream',
  'upstreams',
  'warm eviction',
  'engine',
  'store',
  /** The fleet record is gone (or given up on) before Redis closes. */
  'fleet record removed',
  /** The shared store flushes its pending writes (bounded by its own write deadline). */
  'shared store',
  'admin server',
  'admin access',
] as const;
type TeardownStep = (typeof TEARDOWN_ORDER)[number];

/** What a teardown step closes; `graceMs` bounds how long clients' in-flight writes may take. */
type Closer = (graceMs: number) => unknown;

class Teardown {
  private readonly closers = new Map<TeardownStep, Closer>();

  /** Registers (or replaces) what `step` closes, once it is open. */
  set(step: TeardownStep, close: Closer): void {
    this.closers.set(step, close);
  }

  /** Runs the registered steps in TEARDOWN_ORDER, awaiting those that return a promise. */
  async run(graceMs: number): Promise<void> {
    for (const step of TEARDOWN_ORDER) {
      const result = this.closers.get(step)?.(graceMs);
      if (result instanceof Promise) await result;
    }
  }
}

/** Starts a relay: downstream server, upstreams, engine, cache and admin HTTP. */
export async function startRelay(input: RelayConfigInput, options: RelayOptions = {}): Promise<RunningRelay> {
  const config = resolveConfig(input);
  const startedAt = Date.now();
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = options.metrics ?? new RelayMetrics();
  const teardown = new Teardown();
  try {
    return await wireRelay(config, options, { startedAt, logger, metrics, teardown });
  } catch (err) {
    // Whatever was opened before the failure closes, in the order stop() uses; nothing waits for clients.
    await teardown.run(0);
    throw err;
  }
}

/** Builds and starts every part of the relay, registering each with `teardown` as it opens. */
async function wireRelay(
  config: RelayConfig,
  options: RelayOptions,
  { startedAt, logger, metrics, teardown }: { startedAt: number; logger: Logger; metrics: RelayMetrics; teardown: Teardown },
): Promise<RunningRelay> {
  // Files first (certificates, policy): a bad one stops the start before anything connects.
  // --policy: the join check (the engine consults it per subscription); reloaded on change.
  const policyFile = config.security?.policyFile;
  const policy = policyFile
    ? new PolicyStore(policyFile, { logger, onReload: (result) => metrics.security.reloads.inc({ file: 'policy', result }) })
    : undefined;
  if (policy) teardown.set('policy', () => policy.close());
  const authorizer: JoinAuthorizer = policy ?? ALLOW_ALL;
  // TLS / mTLS, connection limits and HTTP/2 abuse checks (src/security/downstream.ts).
  const security = createDownstreamSecurity(config.security ?? undefined, { logger, metrics, logRepeatIntervalMs: config.logRepeatIntervalMs });
  teardown.set('downstream security', () => security.close());
  const cache = new MemoryCache();
  // --redis / --redis-cluster: the shared tier (a store passed in by the caller wins).
  const ownedStore =
    options.shared === undefined && config.redis
      ? createRedisStore(config.redis.spec, { prefix: config.redis.prefix, logger, onError: (op) => metrics.redisErrors.inc({ op }) })
      : undefined;
  if (ownedStore) teardown.set('shared store', () => ownedStore.close());
  const shared: SharedStore | undefined = options.shared ?? ownedStore;
  const router = new Router(new Set(config.authorities.map((a) => a.name)), config.defaultUpstream !== null);
  // Expiry only happens once the engine below exists (nothing expires while starting).
  const store = new ResourceStore({ memory: cache, shared, logger, onExpired: (keys) => engine.onExpired(keys) });
  teardown.set('store', () => store.close());
  // The engine looks an authority's upstream up when a subscription first needs it: the upstreams attach below.
  const upstreams = new Map<string | null, ManagedUpstream>();
  const engine = new SubscriptionEngine({
    store,
    router,
    upstreams,
    metrics,
    logger,
    unsubscribeGraceMs: config.unsubscribeGraceMs,
    authorizer: policy ? authorizer : undefined,
    // The router only routes configured authorities, so the label stays bounded.
    onDenied: (authority) => metrics.security.deniedSubscriptions.inc({ authority: authority ?? '(default)' }),
  });
  teardown.set('engine', () => engine.close());
  const node = relayNode(config.nodeId);
  const upstreamWiring: UpstreamWiring = { sink: engine, node, metrics, logger, maxRequestBytes: config.maxResponseBytes };
  for (const a of config.authorities) upstreams.set(a.name, createUpstream(a.name, a.uris, a.tls, upstreamWiring));
  if (config.defaultUpstream) upstreams.set(null, createUpstream(null, config.defaultUpstream, config.security?.defaultUpstreamTls, upstreamWiring));

  // --max-connection-age: grpc-js sends GOAWAY after the age ±10 % (its own jitter), cuts the connection after the grace.
  const serverOptions = config.maxConnectionAgeMs
    ? { 'grpc.max_connection_age_ms': config.maxConnectionAgeMs, 'grpc.max_connection_age_grace_ms': config.maxConnectionAgeGraceMs }
    : undefined;
  const downstream = new DownstreamServer({
    engine,
    metrics,
    logger,
    serverOptions: { ...security.serverOptions, ...serverOptions },
    credentials: security.credentials,
    onBound: (server) => security.onBound(server),
    peerOf: (session) => security.peerOf(session),
    maxResponseBytes: config.maxResponseBytes,
    maxRequestBytes: config.maxRequestBytes,
    limits: config.security?.limits,
    logRepeatIntervalMs: config.logRepeatIntervalMs,
    // A client is known by its verified certificate; by its node id only where the policy allows it.
    // Without mTLS there is no certificate to ask grpc-js for (a proxied socket's type check, twice per stream).
    identify: security.verifiesClients
      ? (call, nodeId) => peerIdentity(call, nodeId, authorizer.allowNodeIdIdentity)
      : (_call, nodeId) => nodeIdIdentity(nodeId, authorizer.allowNodeIdIdentity),
  });
  // Per-client config status: CSDS on the listen port (only for identities the policy grants it), and the clients-by-status gauge.
  const statusSource = relayStatusSource({ streams: () => downstream.streams, engine, upstreams: () => upstreams.values(), relayNode: node });
  // The fleet (src/fleet/): membership in Redis once bound, fleet-wide CSDS, /debug/fleet.
  const fleet = new RelayFleet({ config, shared, node, statusSource, downstream, upstreams: () => upstreams.values(), startedAt, logger });
  const csds = createCsdsService({
    source: statusSource,
    logger,
    logRepeatIntervalMs: config.logRepeatIntervalMs,
    authorize: policy ? (call, request) => authorizer.allowsCsds(peerIdentity(call, request.node?.id, authorizer.allowNodeIdIdentity)) : undefined,
    fleet: fleet.csds,
  });
  downstream.addService(csds.definition, csds.implementation);
  metrics.watchClientStatus(() => downstream.statusTally.counts());
  // A new policy withdraws what it no longer allows (the clients get removals).
  policy?.on('change', () => {
    for (const s of downstream.streams) s.reidentify();
    const withdrawn = engine.reauthorize();
    if (withdrawn > 0) logger.info({ withdrawn }, 'policy changed: subscriptions it denies were withdrawn');
  });
  const port = await downstream.listen(config.listen);
  let sentAway = { streams: 0, forced: false };
  teardown.set('downstream', async (graceMs) => {
    sentAway = await downstream.shutdown(graceMs);
  });

  let listening = true;
  const adminSources: AdminSources = {
    metrics,
    logger,
    cache,
    shared,
    engine,
    downstream,
    upstreams,
    drainPeriodMs: config.drainPeriodMs,
    listening: () => listening,
    serverInfo: { version: relayVersion(), startedAt, config },
    status: statusSource,
    fleet: () => fleet.view(),
    toldAbsent: TOLD_ABSENT,
  };
  metrics.addCollector(() => refreshRelayGauges(adminSources));
  const reloadedFiles: Array<'tls' | 'policy' | 'admin_token'> = [];
  if (config.security?.tls) reloadedFiles.push('tls');
  if (policy) reloadedFiles.push('policy');
  if (config.admin && config.security?.adminTokenFile) reloadedFiles.push('admin_token');
  metrics.zeroKnownSeries({ authorities: [...upstreams.values()].map((u) => u.label), redis: ownedStore !== undefined, reloadedFiles });

  let adminPort: number | null = null;
  if (config.admin) {
    const addr = splitHostPort(config.admin);
    if (!addr) throw new Error(`--admin ${config.admin}: expected HOST:PORT`);
    const access = new AdminAccess(config.security?.adminTokenFile ?? null, { logger, metrics: metrics.security });
    teardown.set('admin access', () => access.close());
    const admin = registerAdminRoutes(new AdminServer(logger, (req, url) => access.check(req, url)), adminSources);
    if (options.debugHeap) registerHeapDebugRoutes(admin);
    adminPort = await admin.listen(addr.host, addr.port);
    teardown.set('admin server', () => admin.close());
  }

  // Warm start (cache/warm-start.ts): what the fleet stored in Redis goes into
  // memory before any upstream stream opens; leftovers nobody subscribed to are
  // dropped once every upstream is connected.
  if (canWarmLoad(shared)) {
    // What the warm start puts in memory that clients asked for meanwhile (a later subscriber finds it in memory).
    const awaited = new Set<string>();
    const warm = await warmStart(
      shared,
      (r) => {
        if (cache.get(r.key) || cache.isAbsent(r.key) || store.admit(r) === undefined) return false;
        if (engine.subscription(r.key)) awaited.add(r.key);
        if (r.glob !== undefined && engine.subscription(r.glob)) awaited.add(r.glob);
        return true;
      },
      config.redis?.warmTimeoutMs ?? sharedWarmTimeoutMs(),
    );
    logger.info(warm, 'warm start from redis');
    // Clients that connected during the load and whose read-through found nothing are answered now.
    engine.answerFromMemory(awaited);
    if (warm.loaded > 0) {
      const stopWarmEviction = whenAllConnected(upstreams.values(), () => {
        const n = engine.evictAllUnclaimed();
        if (n > 0) logger.info({ resources: n }, 'warm start: dropped resources no client subscribed to (upstreams connected)');
      });
      teardown.set('warm eviction', () => stopWarmEviction());
    }
  }

  for (const u of upstreams.values()) u.start();
  teardown.set('upstreams', () => {
    for (const u of upstreams.values()) u.close();
  });
  fleet.join(port);
  teardown.set('leave fleet', () => void fleet.leave());
  teardown.set('fleet record removed', () => fleet.leave());
  // Once started, the relay closes a store it was handed as well as its own.
  if (shared) teardown.set('shared store', () => shared.close());
  logger.info({ port, adminPort, authorities: config.authorities.map((a) => a.name), nodeId: config.nodeId, advertise: fleet.advertised }, 'relay listening');

  const drain = (periodMs = config.drainPeriodMs): Promise<DrainResult> => downstream.drain(periodMs);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      const t0 = Date.now();
      listening = false;
      logger.info({ streams: downstream.streams.size, graceMs: config.shutdownGraceMs }, 'shutting down: no new streams, sending clients away');
      await teardown.run(config.shutdownGraceMs);
      logger.info({ ...sentAway, ms: Date.now() - t0 }, 'shutdown complete');
    })());

  return { port, adminPort, metrics, logger, authorizer, drain, stop };
}
