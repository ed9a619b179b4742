import * as grpc from '@grpc/grpc-js';
import type { UpstreamPort } from '../hub/types';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { DeltaAdsClient, openDeltaStream } from '../proto/ads-service';
import { scanDeltaResponse } from '../proto/delta-response';
import { deltaRequestCodec, type DeltaDiscoveryRequest, type Node } from '../proto/messages';
import { insecureChannel, type ChannelSetup } from '../security/tls';
import { Backoff } from './backoff';

export type UpstreamState = 'idle' | 'connecting' | 'ready' | 'backoff' | 'closed';

/** What an upstream hands back to the relay. */
export interface UpstreamSink {
  onResponse(upstream: UpstreamPort, typeUrl: string, resources: Buffer[], removed: string[], receivedAt: bigint): void;
  /** initial_resource_versions for a (re)subscription, from the cache. */
  versionsFor(typeUrl: string, names: Iterable<string>): Record<string, string>;
}

export interface GrpcUpstreamOptions {
  authority: string | null;
  /** `host:port` targets in failover order. */
  targets: string[];
  node: Node;
  sink: UpstreamSink;
  logger: Logger;
  metrics: RelayMetrics;
  /**
   * Minimum spacing of subscription requests per stream. A change after a
   * quiet period goes out at once; changes within the window ride together,
   * so a reconnect storm of N clients costs a handful of requests, not N.
   */
  batchMs?: number;
  connectTimeoutMs?: number;
  backoff?: Backoff;
  /** Credentials and channel options per target (security/upstream-channels.ts); default plaintext. */
  channelFor?: (target: string) => ChannelSetup;
}

type Stream = grpc.ClientDuplexStream<Buffer, Buffer>;

function addAll(map: Map<string, Set<string>>, typeUrl: string, name: string): void {
  let set = map.get(typeUrl);
  if (!set) map.set(typeUrl, (set = new Set()));
  set.add(name);
}

function removeFrom(map: Map<string, Set<string>>, typeUrl: string, name: string): void {
  map.get(typeUrl)?.delete(name);
}

/** Resolves once the channel is READY; rejects on failure or after `timeoutMs`. */
function awaitReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  const channel = client.getChannel();
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const state = channel.getConnectivityState(true);
      if (state === grpc.connectivityState.READY) return resolve();
      if (state === grpc.connectivityState.TRANSIENT_FAILURE || state === grpc.connectivityState.SHUTDOWN) {
        return reject(new Error(`connection failed (${grpc.connectivityState[state]})`));
      }
      channel.watchConnectivityState(state, deadline, (err) => (err ? reject(new Error('connect timed out')) : check()));
    };
    check();
  });
}

/**
 * One authority's delta-ADS stream, all type URLs multiplexed, to the first
 * reachable server of its list. Keeps the desired subscription set and
 * replays it (with cached versions) on every new stream.
 */
export class GrpcUpstream implements UpstreamPort {
  readonly authority: string | null;
  readonly label: string;
  private state: UpstreamState = 'idle';
  private readonly desired = new Map<string, Set<string>>();
  private readonly toSubscribe = new Map<string, Set<string>>();
  private readonly toUnsubscribe = new Map<string, Set<string>>();
  private flushTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private client: grpc.Client | undefined;
  private stream: Stream | undefined;
  private nodeSent = false;
  private outage = false;
  private lastFlushAt = 0;
  private currentTarget = '';
  private readonly backoff: Backoff;
  private readonly batchMs: number;
  private readonly connectTimeoutMs: number;

  constructor(private readonly opts: GrpcUpstreamOptions) {
    this.authority = opts.authority;
    this.label = opts.authority ?? '(default)';
    this.backoff = opts.backoff ?? new Backoff();
    this.batchMs = opts.batchMs ?? 100;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 2000;
    opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  get connected(): boolean {
    return this.state === 'ready';
  }

  get status(): { state: UpstreamState; target: string; types: Record<string, number> } {
    const types: Record<string, number> = {};
    for (const [t, names] of this.desired) types[t] = names.size;
    return { state: this.state, target: this.currentTarget, types };
  }

  start(): void {
    if (this.state === 'idle') void this.connectRound();
  }

  subscriptionCount(): number {
    let n = 0;
    for (const names of this.desired.values()) n += names.size;
    return n;
  }

  subscribe(typeUrl: string, name: string): void {
    addAll(this.desired, typeUrl, name);
    removeFrom(this.toUnsubscribe, typeUrl, name);
    addAll(this.toSubscribe, typeUrl, name);
    this.scheduleFlush();
  }

  unsubscribe(typeUrl: string, name: string): void {
    removeFrom(this.desired, typeUrl, name);
    removeFrom(this.toSubscribe, typeUrl, name);
    addAll(this.toUnsubscribe, typeUrl, name);
    this.scheduleFlush();
  }

  refetch(typeUrl: string, name: string): void {
    if (!this.desired.get(typeUrl)?.has(name)) return;
    addAll(this.toSubscribe, typeUrl, name);
    this.scheduleFlush();
  }

  close(): void {
    this.state = 'closed';
    clearTimeout(this.flushTimer);
    clearTimeout(this.retryTimer);
    this.stream?.cancel();
    this.client?.close();
    this.stream = undefined;
    this.client = undefined;
    this.opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  // A method, not a field read, because the state changes across awaits.
  private isClosed(): boolean {
    return this.state === 'closed';
  }

  private scheduleFlush(): void {
    if (this.flushTimer || this.state !== 'ready') return;
    const wait = this.lastFlushAt + this.batchMs - Date.now();
    // Even "at once" waits a tick, so one client request's changes travel together.
    this.flushTimer = setTimeout(() => this.runFlush(), Math.max(0, wait));
  }

  private runFlush(): void {
    this.flushTimer = undefined;
    this.lastFlushAt = Date.now();
    this.flush();
  }

  /** One request per type URL carrying every subscription change since the last flush. */
  private flush(): void {
    if (this.state !== 'ready') return;
    const types = new Set([...this.toSubscribe.keys(), ...this.toUnsubscribe.keys()]);
    for (const typeUrl of types) {
      const sub = [...(this.toSubscribe.get(typeUrl) ?? [])];
      const unsub = [...(this.toUnsubscribe.get(typeUrl) ?? [])];
      if (sub.length === 0 && unsub.length === 0) continue;
      this.send({ type_url: typeUrl, resource_names_subscribe: sub, resource_names_unsubscribe: unsub }, 'subscribe');
    }
    this.toSubscribe.clear();
    this.toUnsubscribe.clear();
  }

  private send(req: DeltaDiscoveryRequest, kind: 'subscribe' | 'ack' | 'nack'): void {
    if (!this.stream) return;
    if (!this.nodeSent) {
      req.node = this.opts.node;
      this.nodeSent = true;
    }
    this.stream.write(deltaRequestCodec.encode(req));
    this.opts.metrics.upstreamRequests.inc({ authority: this.label, kind });
  }

  private setState(state: UpstreamState): void {
    if (this.state === state || this.state === 'closed') return;
    const was = this.state;
    this.state = state;
    this.opts.metrics.upstreamConnected.set({ authority: this.label }, state === 'ready' ? 1 : 0);
    const log = { authority: this.label, target: this.currentTarget, from: was, to: state };
    // Warn once per outage, not once per retry.
    if (state === 'backoff' && !this.outage) {
      this.outage = true;
      this.opts.logger.warn(log, 'upstream unavailable');
    } else if (state === 'ready') {
      this.outage = false;
      this.opts.logger.info(log, 'upstream connected');
    } else {
      this.opts.logger.debug(log, 'upstream state');
    }
  }

  /** Tries each server in order; backs off after a full round fails. */
  private async connectRound(): Promise<void> {
    for (const target of this.opts.targets) {
      if (this.state === 'closed') return;
      this.currentTarget = target;
      this.setState('connecting');
      const channel = (this.opts.channelFor ?? insecureChannel)(target);
      const client = new DeltaAdsClient(target, channel.credentials, {
        'grpc.keepalive_time_ms': 30_000,
        'grpc.keepalive_timeout_ms': 10_000,
        'grpc.max_receive_message_length': 64 * 1024 * 1024,
        'grpc.initial_reconnect_backoff_ms': 200,
        ...channel.options,
      });
      try {
        await awaitReady(client, this.connectTimeoutMs);
      } catch (err) {
        client.close();
        this.opts.logger.debug({ authority: this.label, target, err: (err as Error).message }, 'upstream server unreachable');
        continue;
      }
      if (this.isClosed()) {
        client.close();
        return;
      }
      this.openStream(client);
      return;
    }
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.state === 'closed') return;
    this.setState('backoff');
    this.opts.metrics.upstreamReconnects.inc({ authority: this.label });
    this.retryTimer = setTimeout(() => void this.connectRound(), this.backoff.next());
    this.retryTimer.unref();
  }

  private openStream(client: grpc.Client): void {
    this.client = client;
    const stream = openDeltaStream(client);
    this.stream = stream;
    this.nodeSent = false;
    let ended = false;
    const onEnd = (why: string): void => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) {
        this.stream = undefined;
        this.client = undefined;
        client.close();
        if (this.state !== 'closed') {
          this.opts.logger.warn({ authority: this.label, target: this.currentTarget, why }, 'upstream stream ended');
          this.scheduleRetry();
        }
      }
    };
    stream.on('data', (bytes: Buffer) => this.onData(bytes));
    stream.on('error', (err: grpc.ServiceError) => onEnd(`${grpc.status[err.code] ?? err.code}: ${err.details ?? err.message}`));
    stream.on('status', (s: grpc.StatusObject) => onEnd(`${grpc.status[s.code]}: ${s.details}`));
    stream.on('end', () => onEnd('closed by server'));
    this.setState('ready');
    this.backoff.reset();
    // The new stream starts from nothing: replay the whole subscription set with the versions we hold.
    this.toSubscribe.clear();
    this.toUnsubscribe.clear();
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const [typeUrl, names] of this.desired) {
      if (names.size === 0) continue;
      this.send(
        {
          type_url: typeUrl,
          resource_names_subscribe: [...names],
          initial_resource_versions: this.opts.sink.versionsFor(typeUrl, names),
        },
        'subscribe',
      );
    }
  }

  private onData(bytes: Buffer): void {
    const receivedAt = process.hrtime.bigint();
    this.opts.metrics.upstreamResponses.inc({ authority: this.label });
    let scanned;
    try {
      scanned = scanDeltaResponse(bytes);
    } catch (err) {
      this.opts.logger.warn({ authority: this.label, err: (err as Error).message }, 'undecodable upstream response');
      return;
    }
    try {
      this.opts.sink.onResponse(this, scanned.typeUrl, scanned.resources, scanned.removed, receivedAt);
    } catch (err) {
      this.opts.logger.error({ authority: this.label, err }, 'failed to apply upstream response');
    }
    // ACK what we stored: the relay keeps serving the last good state either way.
    if (scanned.nonce) this.send({ type_url: scanned.typeUrl, response_nonce: scanned.nonce }, 'ack');
  }
}
