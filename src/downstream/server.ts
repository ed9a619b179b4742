import * as grpc from '@grpc/grpc-js';
import type { SubscriptionEngine } from '../engine/engine';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { adsServiceDefinition } from '../proto/ads-service';
import { TokenBudget } from '../security/token-bucket';
import type { AdsStream, AdsStreamOptions } from './ads-stream';
import { RequestScheduler } from './request-scheduler';
import { ClientStatusTally } from './status-tally';
import { clientStatusJudge } from './status-view';
import { DeltaStream } from './delta-stream';
import { Drainer, type DrainResult } from './drain';
import { WarnBudget, WarnLimiter } from '../log-limit';
import { DeltaResponses, NonceSource, SotwResponses } from './responses';
import { SotwStream } from './sotw-stream';

export interface DownstreamServerOptions {
  engine: SubscriptionEngine;
  metrics: RelayMetrics;
  logger: Logger;
  /** No response to a client exceeds this many bytes (larger sets go in several). */
  maxResponseBytes: number;
  /** A larger request ends that stream with RESOURCE_EXHAUSTED. */
  maxRequestBytes: number;
  /** A client's identity (see AdsStreamOptions.identify). */
  identify?: AdsStreamOptions['identify'];
  /** A client's address (see AdsStreamOptions.peerOf). */
  peerOf?: AdsStreamOptions['peerOf'];
  /** Per-stream limits (see AdsStreamOptions.limits). */
  limits?: AdsStreamOptions['limits'];
  /** Extra grpc-js server options (e.g. max connection age). */
  serverOptions?: grpc.ServerOptions;
  /** TLS / mTLS (security/downstream.ts); default plaintext. */
  credentials?: grpc.ServerCredentials;
  /** Repeated warnings (per stream, and stream endings relay-wide) are summarized at most this often (default 10 s). */
  logRepeatIntervalMs?: number;
  /** Called once bound, before any connection is accepted (connection limits attach here). */
  onBound?: (server: grpc.Server) => void;
}

/** The ADS server clients connect to: delta (Envoy) and state of the world (gRPC) on one listener. */
export class DownstreamServer {
  private readonly server: grpc.Server;
  readonly streams = new Set<AdsStream>();
  private drainer: Drainer<AdsStream> | undefined;
  private closing = false;
  /** Stream endings with an error status: any number of clients can cause them. */
  private readonly relayWarnings: WarnLimiter;
  private readonly warnBudget: WarnBudget;
  private readonly delta: DeltaResponses;
  /** Fair turns for clients' large requests (request-scheduler.ts). */
  private readonly scheduler = new RequestScheduler();
  /** Client streams by status per type, kept as counts (the `xdstp_relay_clients` gauge). */
  readonly statusTally: ClientStatusTally;

  constructor(private readonly opts: DownstreamServerOptions) {
    this.relayWarnings = new WarnLimiter(opts.logger, opts.logRepeatIntervalMs);
    this.warnBudget = new WarnBudget(opts.logger, opts.logRepeatIntervalMs);
    this.statusTally = new ClientStatusTally(clientStatusJudge(opts.engine));
    this.server = new grpc.Server({
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': opts.maxRequestBytes,
      ...opts.serverOptions,
    });
    const nonces = new NonceSource();
    const maxResponse = opts.maxResponseBytes;
    const delta = (this.delta = new DeltaResponses(nonces, opts.metrics, maxResponse));
    const sotw = new SotwResponses(nonces, opts.metrics, maxResponse);
    // One options object per protocol, shared by all its streams (tens of thousands of them).
    const deltaOptions = this.streamOptions(delta);
    const sotwOptions = this.streamOptions(sotw);
    this.server.addService(adsServiceDefinition, {
      DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.accept(new DeltaStream(call, deltaOptions)),
      StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.accept(new SotwStream(call, sotwOptions)),
    });
  }

  /** Adds another gRPC service on the same listener (e.g. client status). */
  addService(definition: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation): void {
    this.server.addService(definition, implementation);
  }

  private streamOptions(builder: AdsStreamOptions['builder']): AdsStreamOptions {
    const { metrics } = this.opts;
    return {
      engine: this.opts.engine,
      builder,
      metrics,
      logger: this.opts.logger,
      identify: this.opts.identify,
      peerOf: this.opts.peerOf,
      limits: this.opts.limits,
      changeBudget: this.opts.limits && new TokenBudget(this.opts.limits.subscriptionRate, this.opts.limits.subscriptionBurst),
      relayWarnings: this.relayWarnings,
      warnBudget: this.warnBudget,
      logRepeatIntervalMs: this.opts.logRepeatIntervalMs,
      scheduler: this.scheduler,
      statusTally: this.statusTally,
      onClose: (s) => {
        if (this.streams.delete(s)) metrics.streamsByProtocol[s.protocol].open.dec();
      },
    };
  }

  private accept(stream: AdsStream): void {
    const { metrics } = this.opts;
    this.streams.add(stream);
    const byProtocol = metrics.streamsByProtocol[stream.protocol];
    byProtocol.open.inc();
    byProtocol.total.inc();
    // Arrived after the drain finished (or during shutdown): send it on at once.
    if (this.closing) this.sendAway(stream, 'shutdown');
    else if (this.drainer && this.drainer.state !== 'draining') this.sendAway(stream, 'drain');
  }

  private sendAway(stream: AdsStream, reason: 'drain' | 'shutdown'): void {
    this.opts.metrics.goaways.inc({ reason });
    stream.goAway(reason === 'drain' ? 'relay draining, reconnect' : 'relay shutting down, reconnect');
  }

  /** True once a drain or shutdown has started. */
  get draining(): boolean {
    return this.closing || this.drainer !== undefined;
  }

  /**
   * Sends every client away gradually over `periodMs` (GOAWAY, then
   * UNAVAILABLE), streams that arrive meanwhile included; keeps sending new
   * arrivals away afterwards. Idempotent: a second call joins the first drain.
   */
  drain(periodMs: number): Promise<DrainResult> {
    // Shutting down already sent everyone away.
    if (this.closing && !this.drainer) return Promise.resolve({ streams: 0, batches: 0, periodMs: 0 });
    this.drainer ??= new Drainer({
      periodMs,
      open: () => this.streams,
      openCount: () => this.streams.size,
      send: (s) => this.sendAway(s, 'drain'),
    });
    return this.drainer.done;
  }

  /** Binds `host:port`; resolves with the bound port. */
  listen(address: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, this.opts.credentials ?? grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) return reject(err);
        try {
          this.opts.onBound?.(this.server);
        } catch (hookErr) {
          this.server.forceShutdown();
          return reject(hookErr as Error);
        }
        resolve(port);
      });
    });
  }

  /**
   * Stops accepting (the listener closes and every connection gets GOAWAY),
   * ends the open streams with UNAVAILABLE after their queued writes, and
   * waits up to `graceMs` for that to finish before cutting connections.
   * Resolves with the number of streams it ended and whether it had to force.
   */
  async shutdown(graceMs: number): Promise<{ streams: number; forced: boolean }> {
    this.closing = true;
    this.drainer?.cancel();
    const finished = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve(true);
      }, graceMs);
      timer.unref();
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    const open = [...this.streams];
    for (const s of open) this.sendAway(s, 'shutdown');
    const forced = await finished;
    this.relayWarnings.close();
    this.warnBudget.close();
    this.delta.close();
    return { streams: open.length, forced };
  }
}
