import * as os from 'node:os';
import { AdminAccess } from './admin/auth';
import { refreshRelayGauges, registerAdminRoutes, type AdminParts } from './admin/routes';
import { registerHeapDebugRoutes } from './admin/heap';
import { AdminServer } from './admin/server';
import { splitHostPort } from './address';
import { MemoryCache } from './cache/memory-cache';
import { createRedisStore } from './cache/redis-store';
import type { SharedStore } from './cache/types';
import { ResourceStore } from './cache/resource-store';
import { canWarmLoad, warmStart, whenAllConnected } from './cache/warm-start';
import { resolveConfig, sharedStoreTimings, type RelayConfigInput } from './config';
import { createCsdsService } from './downstream/csds';
import type { DrainResult } from './downstream/drain';
import { DownstreamServer } from './downstream/server';
import { relayStatusSource } from './downstream/status-view';
import { SubscriptionEngine } from './hub/engine';
import { Router } from './hub/routing';
import type { UpstreamPort, UpstreamSink, UpstreamStatus } from './upstream/types';
import { createLogger, type Logger } from './log';
import { RelayMetrics } from './metrics';
import type { Node } from './proto/messages';
import { TTL_CLIENT_FEATURE } from './proto/xds-names';
import { createDownstreamSecurity, type DownstreamSecurity } from './security/downstream';
import { peerIdentity } from './security/identity';
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
  /** Off only for the encode-once ablation benchmark. */
  shareResponses?: boolean;
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

interface UpstreamParts {
  sink: UpstreamSink;
  node: Node;
  metrics: RelayMetrics;
  logger: Logger;
  /** No request upstream exceeds this (the relay's --max-response-bytes). */
  maxRequestBytes: number;
}

function createUpstream(authority: string | null, uris: string[], tls: UpstreamTlsSpec | undefined, parts: UpstreamParts): ManagedUpstream {
  const { sink, node, metrics, logger, maxRequestBytes } = parts;
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

/** Starts a relay: downstream server, upstreams, hub, cache and admin HTTP. */
export async function startRelay(input: RelayConfigInput, options: RelayOptions = {}): Promise<RunningRelay> {
  const config = resolveConfig(input);
  const startedAt = Date.now();
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = options.metrics ?? new RelayMetrics();
  // Files first (certificates, policy): a bad one stops the start before anything connects.
  // --policy: the join check (the hub consults it per subscription); reloaded on change.
  const policyFile = config.security?.policyFile;
  const policy = policyFile
    ? new PolicyStore(policyFile, { logger, onReload: (result) => metrics.security.reloads.inc({ file: 'policy', result }) })
    : undefined;
  const authorizer: JoinAuthorizer = policy ?? ALLOW_ALL;
  // TLS / mTLS, connection limits and HTTP/2 abuse checks (src/security/downstream.ts).
  let security: DownstreamSecurity;
  try {
    security = createDownstreamSecurity(config.security ?? undefined, { logger, metrics, logRepeatIntervalMs: config.logRepeatIntervalMs });
  } catch (err) {
    policy?.close();
    throw err;
  }
  const cache = new MemoryCache();
  // --redis / --redis-cluster: the shared tier (a store passed in by the caller wins).
  const ownedStore =
    options.shared === undefined && config.redis
      ? createRedisStore(config.redis.spec, { prefix: config.redis.prefix, logger, onError: (op) => metrics.redisErrors.inc({ op }) })
      : undefined;
  const shared: SharedStore | undefined = options.shared ?? ownedStore;
  const router = new Router(new Set(config.authorities.map((a) => a.name)), config.defaultUpstream !== null);
  const upstreams = new Map<string | null, ManagedUpstream>();
  const node = relayNode(config.nodeId);
  // The engine exists before any upstream can call it back (upstreams start below).
  let engine: SubscriptionEngine | undefined;
  const sink: UpstreamSink = {
    onResponse: (u, update) => engine?.onResponse(u, update),
    versionsFor: (typeUrl, names) => engine?.versionsFor(typeUrl, names) ?? {},
    onRejectedNames: (u, typeUrl, names) => engine?.onRejectedNames(u, typeUrl, names),
    hasServed: (typeUrl, name) => engine?.hasServed(typeUrl, name) ?? false,
  };
  const upstreamParts: UpstreamParts = { sink, node, metrics, logger, maxRequestBytes: config.maxResponseBytes };
  for (const a of config.authorities) upstreams.set(a.name, createUpstream(a.name, a.uris, a.tls, upstreamParts));
  if (config.defaultUpstream) upstreams.set(null, createUpstream(null, config.defaultUpstream, config.security?.defaultUpstreamTls, upstreamParts));

  const store = new ResourceStore({ memory: cache, shared, logger, metrics, onExpired: (keys) => engine?.onExpired(keys) });
  const hub = (engine = new SubscriptionEngine({
    store,
    router,
    upstreams,
    metrics,
    logger,
    unsubscribeGraceMs: config.unsubscribeGraceMs,
    authorizer: policy ? authorizer : undefined,
    // The router only routes configured authorities, so the label stays bounded.
    onDenied: (authority) => metrics.security.deniedSubscriptions.inc({ authority: authority ?? '(default)' }),
  }));
  // --max-connection-age: grpc-js sends GOAWAY after the age ±10 % (its own jitter), cuts the connection after the grace.
  const serverOptions = config.maxConnectionAgeMs
    ? { 'grpc.max_connection_age_ms': config.maxConnectionAgeMs, 'grpc.max_connection_age_grace_ms': config.maxConnectionAgeGraceMs }
    : undefined;
  const downstream = new DownstreamServer({
    engine: hub,
    metrics,
    logger,
    serverOptions: { ...security.serverOptions, ...serverOptions },
    credentials: security.credentials,
    onBound: (server) => security.onBound(server),
    maxResponseBytes: config.maxResponseBytes,
    maxRequestBytes: config.maxRequestBytes,
    shareResponses: options.shareResponses ?? true,
    limits: config.security?.limits,
    logRepeatIntervalMs: config.logRepeatIntervalMs,
    // A client is known by its verified certificate; by its node id only where the policy allows it.
    identify: (call, nodeId) => peerIdentity(call, nodeId, authorizer.allowNodeIdIdentity),
  });
  // Per-client config status: CSDS on the listen port (only for identities the policy grants it), and the clients-by-status gauge.
  const statusSource = relayStatusSource({ streams: () => downstream.streams, engine: hub, upstreams: () => upstreams.values(), relayNode: node });
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
    const withdrawn = hub.reauthorize();
    if (withdrawn > 0) logger.info({ withdrawn }, 'policy changed: subscriptions it denies were withdrawn');
  });
  const port = await downstream.listen(config.listen).catch(async (err: unknown) => {
    security.close();
    policy?.close();
    hub.close();
    store.close();
    await ownedStore?.close();
    throw err;
  });

  let listening = true;
  const drainPeriodMs = config.drainPeriodMs;
  const parts: AdminParts = {
    metrics,
    logger,
    cache,
    shared,
    hub,
    downstream,
    upstreams,
    drainPeriodMs,
    listening: () => listening,
    serverInfo: { version: relayVersion(), startedAt, config },
    status: statusSource,
    fleet: () => fleet.view(),
  };
  metrics.addCollector(() => refreshRelayGauges(parts));
  const reloadedFiles: Array<'tls' | 'policy' | 'admin_token'> = [];
  if (config.security?.tls) reloadedFiles.push('tls');
  if (policy) reloadedFiles.push('policy');
  if (config.admin && config.security?.adminTokenFile) reloadedFiles.push('admin_token');
  metrics.zeroKnownSeries({ authorities: [...upstreams.values()].map((u) => u.label), redis: ownedStore !== undefined, reloadedFiles });

  let admin: AdminServer | undefined;
  let adminAccess: AdminAccess | undefined;
  let adminPort: number | null = null;
  if (config.admin) {
    const addr = splitHostPort(config.admin);
    try {
      if (!addr) throw new Error(`--admin ${config.admin}: expected HOST:PORT`);
      adminAccess = new AdminAccess(config.security?.adminTokenFile ?? null, { logger, metrics: metrics.security });
      const access = adminAccess;
      admin = registerAdminRoutes(new AdminServer(logger, (req, path) => access.check(req, path)), parts);
      if (options.debugHeap) registerHeapDebugRoutes(admin);
      adminPort = await admin.listen(addr.host, addr.port);
    } catch (err) {
      adminAccess?.close();
      security.close();
      policy?.close();
      await downstream.shutdown(0);
      hub.close();
      store.close();
      await ownedStore?.close();
      throw err;
    }
  }

  // Warm start (cache/warm-start.ts): what the fleet stored in Redis goes into
  // memory before any upstream stream opens; leftovers nobody subscribed to are
  // dropped once every upstream is connected.
  let stopWarmEviction: (() => void) | undefined;
  if (canWarmLoad(shared)) {
    const warm = await warmStart(
      shared,
      (r) => !cache.get(r.key) && !cache.isAbsent(r.key) && store.admit(r) !== undefined,
      (config.redis ?? sharedStoreTimings()).warmTimeoutMs,
    );
    logger.info(warm, 'warm start from redis');
    if (warm.loaded > 0) {
      stopWarmEviction = whenAllConnected(upstreams.values(), () => {
        const n = hub.evictAllUnclaimed();
        if (n > 0) logger.info({ resources: n }, 'warm start: dropped resources no client subscribed to (upstreams connected)');
      });
    }
  }

  for (const u of upstreams.values()) u.start();
  fleet.join(port);
  logger.info({ port, adminPort, authorities: config.authorities.map((a) => a.name), nodeId: config.nodeId, advertise: fleet.advertised }, 'relay listening');

  const drain = (periodMs = drainPeriodMs): Promise<DrainResult> => downstream.drain(periodMs);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      const t0 = Date.now();
      listening = false;
      const shutdownGraceMs = config.shutdownGraceMs;
      logger.info({ streams: downstream.streams.size, graceMs: shutdownGraceMs }, 'shutting down: no new streams, sending clients away');
      // Out of the fleet first, so fleet status stops asking for it (the record's removal finishes before Redis closes).
      const left = fleet.leave();
      security.close();
      policy?.close();
      const { streams, forced } = await downstream.shutdown(shutdownGraceMs);
      for (const u of upstreams.values()) u.close();
      stopWarmEviction?.();
      hub.close();
      store.close();
      await left;
      // The shared store flushes its pending writes (bounded by its own write deadline).
      await shared?.close();
      await admin?.close();
      adminAccess?.close();
      logger.info({ streams, forced, ms: Date.now() - t0 }, 'shutdown complete');
    })());

  return { port, adminPort, metrics, logger, authorizer, drain, stop };
}
