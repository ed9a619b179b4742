import * as os from 'node:os';
import { AdminServer } from './admin/server';
import { splitHostPort } from './address';
import { MemoryCache } from './cache/memory-cache';
import type { SharedStore } from './cache/types';
import type { RelayConfig } from './config';
import { DownstreamServer } from './downstream/server';
import { Hub } from './hub/hub';
import { Router } from './hub/routing';
import type { UpstreamPort } from './hub/types';
import { createLogger, type Logger } from './log';
import { RelayMetrics } from './metrics';
import type { Node } from './proto/messages';
import { GrpcUpstream, type UpstreamSink } from './upstream/grpc-upstream';
import { parseUpstreamUri } from './upstream/uri';

export interface RunningRelay {
  readonly port: number;
  readonly adminPort: number | null;
  readonly metrics: RelayMetrics;
  stop(): Promise<void>;
}

export interface RelayOptions {
  logger?: Logger;
  shared?: SharedStore;
  /** Off only for the encode-once ablation benchmark. */
  shareResponses?: boolean;
}

/** An upstream the relay can start and stop (gRPC server list or file origin). */
export interface ManagedUpstream extends UpstreamPort {
  start(): void;
  close(): void;
  readonly status: object;
}

export function defaultNodeId(): string {
  return `xdstp-relay-${os.hostname()}`;
}

function relayNode(nodeId: string): Node {
  return {
    id: nodeId,
    user_agent_name: 'xdstp-relay',
    user_agent_version: process.env.npm_package_version ?? '0.1.0',
    client_features: ['xds.config.supports-resource-ttl'],
  };
}

function createUpstream(authority: string | null, uris: string[], sink: UpstreamSink, node: Node, metrics: RelayMetrics, logger: Logger): ManagedUpstream {
  const targets: string[] = [];
  for (const uri of uris) {
    const parsed = parseUpstreamUri(uri);
    if (parsed.scheme !== 'grpc') throw new Error(`authority ${authority ?? '(default)'}: ${uri}: file:// origins are not supported yet`);
    targets.push(parsed.target);
  }
  return new GrpcUpstream({ authority, targets, node, sink, logger, metrics });
}

/** Starts a relay: downstream server, upstreams, hub, cache and admin HTTP. */
export async function startRelay(config: RelayConfig, options: RelayOptions = {}): Promise<RunningRelay> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = new RelayMetrics();
  const cache = new MemoryCache();
  const router = new Router(new Set(config.authorities.map((a) => a.name)), config.defaultUpstream !== null);
  const upstreams = new Map<string | null, ManagedUpstream>();
  const node = relayNode(config.nodeId);
  let hub: Hub | undefined;
  const sink: UpstreamSink = {
    onResponse: (u, typeUrl, resources, removed, at) => hub?.applyUpstream(u, typeUrl, resources, removed, at),
    versionsFor: (typeUrl, names) => hub?.versionsFor(typeUrl, names) ?? {},
  };
  for (const a of config.authorities) upstreams.set(a.name, createUpstream(a.name, a.uris, sink, node, metrics, logger));
  if (config.defaultUpstream) upstreams.set(null, createUpstream(null, config.defaultUpstream, sink, node, metrics, logger));

  hub = new Hub({
    cache,
    shared: options.shared,
    router,
    upstreams,
    metrics,
    logger,
    unsubscribeGraceMs: config.unsubscribeGraceMs,
    shareResponses: options.shareResponses ?? true,
  });
  const downstream = new DownstreamServer({ hub, metrics, logger, hasDefaultUpstream: config.defaultUpstream !== null });
  const port = await downstream.listen(config.listen);

  const refreshGauges = (): void => {
    let upstreamSubs = 0;
    for (const u of upstreams.values()) {
      const n = u.subscriptionCount();
      upstreamSubs += n;
      metrics.upstreamSubscriptions.set({ authority: u.label }, n);
    }
    metrics.dedupRatio.set(upstreamSubs === 0 ? 1 : hub!.clientSubscriptionCount / upstreamSubs);
    metrics.cacheResources.set(cache.size);
    metrics.cacheBytes.set(cache.bytes);
  };

  let admin: AdminServer | undefined;
  let adminPort: number | null = null;
  if (config.admin) {
    const addr = splitHostPort(config.admin);
    if (!addr) throw new Error(`--admin ${config.admin}: expected HOST:PORT`);
    admin = new AdminServer(logger)
      .route('GET /healthz', () => ({ status: 200, body: { status: 'ok' } }))
      .route('GET /readyz', () => {
        const connected = [...upstreams.values()].some((u) => u.connected);
        const ready = upstreams.size === 0 || connected || cache.size > 0;
        return { status: ready ? 200 : 503, body: { ready, upstreamConnected: connected, cachedResources: cache.size } };
      })
      .route('GET /metrics', async () => {
        refreshGauges();
        return { status: 200, body: await metrics.registry.metrics(), contentType: metrics.registry.contentType };
      });
    adminPort = await admin.listen(addr.host, addr.port);
  }

  for (const u of upstreams.values()) u.start();
  logger.info({ port, adminPort, authorities: config.authorities.map((a) => a.name), nodeId: config.nodeId }, 'relay listening');

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await downstream.shutdown(2000);
      for (const u of upstreams.values()) u.close();
      hub?.close();
      await admin?.close();
      await options.shared?.close();
    })());

  return { port, adminPort, metrics, stop };
}
