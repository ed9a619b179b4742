import * as grpc from '@grpc/grpc-js';
import type { Hub } from '../hub/hub';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { deltaAdsServiceDefinition } from '../proto/ads-service';
import { ClientStream } from './client-stream';
import { Drainer, type DrainResult } from './drain';

export interface DownstreamServerOptions {
  hub: Hub;
  metrics: RelayMetrics;
  logger: Logger;
  hasDefaultUpstream: boolean;
  /** Extra grpc-js server options (e.g. max connection age). */
  serverOptions?: grpc.ServerOptions;
  /** TLS / mTLS (security/downstream.ts); default plaintext. */
  credentials?: grpc.ServerCredentials;
  /** Called once bound, before any connection is accepted (connection limits attach here). */
  onBound?: (server: grpc.Server) => void;
}

/** The delta-ADS server clients connect to. */
export class DownstreamServer {
  private readonly server: grpc.Server;
  readonly streams = new Set<ClientStream>();
  private drainer: Drainer<ClientStream> | undefined;
  private closing = false;

  constructor(private readonly opts: DownstreamServerOptions) {
    this.server = new grpc.Server({
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': 4 * 1024 * 1024,
      ...opts.serverOptions,
    });
    this.server.addService(deltaAdsServiceDefinition, {
      DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.accept(call),
    });
  }

  private accept(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const { metrics } = this.opts;
    const stream = new ClientStream(call, {
      hub: this.opts.hub,
      metrics,
      logger: this.opts.logger,
      hasDefaultUpstream: this.opts.hasDefaultUpstream,
      onClose: (s) => {
        if (this.streams.delete(s)) metrics.downstreamStreams.dec();
      },
    });
    this.streams.add(stream);
    metrics.downstreamStreams.inc();
    metrics.downstreamStreamsTotal.inc();
    // Arrived after the drain finished (or during shutdown): send it on at once.
    if (this.closing) this.sendAway(stream, 'shutdown');
    else if (this.drainer && this.drainer.state !== 'draining') this.sendAway(stream, 'drain');
  }

  private sendAway(stream: ClientStream, reason: 'drain' | 'shutdown'): void {
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
    return { streams: open.length, forced: await finished };
  }
}
