/**
 * Everything the downstream listener needs from the security options, in one
 * place so the server code stays a few lines: credentials (plaintext, TLS or
 * mTLS with reloading certificates), the grpc-js options that carry the
 * connection limits, and the ConnectionGuard to attach once bound.
 */
import * as grpc from '@grpc/grpc-js';
import type * as http2 from 'node:http2';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import type { SecuritySettings } from './config';
import { ConnectionGuard } from './connection-guard';
import { DEFAULT_LIMITS } from './limits';
import { createDownstreamTls } from './tls';

export interface DownstreamSecurity {
  readonly credentials: grpc.ServerCredentials;
  /** Clients present certificates the listener verifies (mTLS): only then can a client be known by its certificate. */
  readonly verifiesClients: boolean;
  /** grpc-js server options: max concurrent streams. */
  readonly serverOptions: grpc.ServerOptions;
  /** Call once the grpc.Server is bound: starts the connection limits and abuse checks. */
  onBound(server: grpc.Server): void;
  /** A guarded session's client address as grpc-js's getPeer() writes it (ConnectionGuard.peerOf). */
  peerOf(session: http2.Http2Session | undefined): string | undefined;
  /** Stops the file watchers and admitting connections. */
  close(): void;
}

export function createDownstreamSecurity(
  settings: SecuritySettings | undefined,
  deps: { logger: Logger; metrics: RelayMetrics; logRepeatIntervalMs?: number },
): DownstreamSecurity {
  const limits = settings?.limits ?? DEFAULT_LIMITS;
  const sec = deps.metrics.security;
  const tls = settings?.tls
    ? createDownstreamTls(settings.tls, {
        logger: deps.logger,
        onReload: (result) => sec.reloads.inc({ file: 'tls', result }),
      })
    : null;
  // The idle-connection limit is the guard's (see connection-guard.ts), not grpc-js's.
  const serverOptions: grpc.ServerOptions = { 'grpc.max_concurrent_streams': limits.maxConcurrentStreams };
  const guard = new ConnectionGuard(limits, { logger: deps.logger, metrics: sec, logRepeatIntervalMs: deps.logRepeatIntervalMs });
  return {
    credentials: tls?.credentials ?? grpc.ServerCredentials.createInsecure(),
    verifiesClients: settings?.tls?.clientCaFile !== undefined,
    serverOptions,
    onBound: (server) => guard.attach(server),
    peerOf: (session) => guard.peerOf(session),
    close: () => {
      guard.close();
      tls?.close();
    },
  };
}
