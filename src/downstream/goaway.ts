import type * as grpc from '@grpc/grpc-js';

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
 * them (`drain`, `tryShutdown`). It keeps the session on the call object it
 * wraps (`call.call[.nextCall…].stream.session`); we look for it defensively
 * and return undefined when the shape differs, so an upgrade of grpc-js can
 * only turn the per-connection GOAWAY into a plain stream end.
 */
export function sessionOf(call: grpc.ServerDuplexStream<Buffer, Buffer>): ClosableSession | undefined {
  let node: unknown = (call as unknown as { call?: unknown }).call;
  for (let depth = 0; depth < 8 && typeof node === 'object' && node !== null; depth++) {
    const stream = (node as { stream?: unknown }).stream;
    if (typeof stream === 'object' && stream !== null) {
      const session = (stream as { session?: unknown }).session;
      return isClosableSession(session) ? session : undefined;
    }
    node = (node as { nextCall?: unknown }).nextCall;
  }
  return undefined;
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
