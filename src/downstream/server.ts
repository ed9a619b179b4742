import * as grpc from '@grpc/grpc-js';
import type { Hub } from '../hub/hub';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { deltaAdsServiceDefinition } from '../proto/ads-service';
import { ClientStream } from './client-stream';

export interface DownstreamServerOptions {
  hub: Hub;
  metrics: RelayMetrics;
  logger: Logger;
  hasDefaultUpstream: boolean;
  /** Extra grpc-js server options (e.g. max connection age). */
  serverOptions?: grpc.ServerOptions;
}

/** The delta-ADS server clients connect to. */
export class DownstreamServer {
  private readonly server: grpc.Server;
  readonly streams = new Set<ClientStream>();

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
  }

  /** Binds `host:port`; resolves with the bound port. */
  listen(address: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
    });
  }

  /** Stops accepting, ends open streams, waits up to `graceMs` for writes to flush. */
  async shutdown(graceMs: number): Promise<void> {
    for (const s of [...this.streams]) s.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      timer.unref();
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
