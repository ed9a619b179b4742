import type * as grpc from '@grpc/grpc-js';
import { http2StreamOf } from './grpc-call-internals';

/** The part of node:http2's ServerHttp2Session we use. */
interface ClosableSession {
  close(callback?: () => void): void;
  readonly closed: boolean;
  readonly destroyed: boolean;
}

function isClosableSession(v: unknown): v is ClosableSession {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { close?: unknown }).close === 'function' &&
    typeof (v as { closed?: unknown }).closed === 'boolean' &&
    typeof (v as { destroyed?: unknown }).destroyed === 'boolean'
  );
}

/**
 * The HTTP/2 session (connection) a server call runs on.
 *
 * grpc-js has no public API for one connection of a server, only for all of
 * them (`drain`, `tryShutdown`): the session is that of the HTTP/2 stream
 * beneath the call (grpc-call-internals.ts), undefined when grpc-js hides
 * it, so an upgrade of grpc-js can only turn the per-connection GOAWAY into
 * a plain stream end.
 */
export function sessionOf(call: grpc.ServerDuplexStream<Buffer, Buffer>): ClosableSession | undefined {
  const session: unknown = http2StreamOf(call)?.session;
  return isClosableSession(session) ? session : undefined;
}

/**
 * Sends HTTP/2 GOAWAY on the call's connection: streams already open on it
 * carry on, new ones must use a new connection, which a load balancer can
 * route to another relay. Node closes the connection once its last stream
 * ends. Returns false when the connection could not be reached.
 */
export function sendGoaway(call: grpc.ServerDuplexStream<Buffer, Buffer>): boolean {
  const session = sessionOf(call);
  if (!session) return false;
  if (!session.closed && !session.destroyed) session.close();
  return true;
}
