/**
 * Connection-level limits and HTTP/2 abuse handling for the downstream
 * listener. Everything here happens below gRPC, per TCP connection:
 *
 * - Each listener's accept queue is as long as the kernel allows (see
 *   ACCEPT_QUEUE), so a burst of connections waits to be accepted instead of
 *   having its handshakes dropped.
 * - `--max-connections` / `--max-connections-per-peer`: a connection over
 *   either bound is closed on arrival, before any TLS or HTTP/2 work; open
 *   connections are never touched.
 * - A TLS connection that has not completed its handshake within
 *   HANDSHAKE_TIMEOUT_MS is closed (a plaintext connection gets its HTTP/2
 *   session at once and is covered by `--max-connection-idle`).
 * - Keepalive enforcement: a PING sooner than `--min-ping-interval` after the
 *   previous one is a strike; more than MAX_PING_STRIKES strikes in a row end
 *   the connection with GOAWAY ENHANCE_YOUR_CALM ("too_many_pings").
 * - `--max-connection-idle`: a session without an open stream for that long
 *   is closed politely (GOAWAY NO_ERROR). Counted here from the stream
 *   listeners this module adds anyway: grpc-js's own idle timeout would add
 *   a `once('close')` wrapper to every stream (~0.3 KB each at 100 streams
 *   per connection).
 * - SETTINGS floods and rapid stream resets drain per-connection token
 *   buckets; an empty bucket ends the connection the same way. (nghttp2
 *   has its own, much looser, rapid-reset limit.)
 * - A stream that announced a message above the receive limit was already
 *   refused by grpc-js with RESOURCE_EXHAUSTED before a byte of it was
 *   buffered (counted as limit `request_size`); one announced at
 *   OVERSIZE_CUT_FACTOR times the limit or more also costs its connection.
 *
 * grpc-js has no public hook for its HTTP/2 sessions, so `attach` reads the
 * server's `http2Servers` (one private field, checked at run time; a grpc-js
 * that changes it makes `attach` throw, and the abuse tests fail).
 */
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log';
import { WarnLimiter } from '../log-limit';
import type { CutReason, SecurityMetrics } from './metrics';
import { TokenBucket } from './token-bucket';

export interface ConnectionLimits {
  /** Open connections at most (0 = no limit). */
  maxConnections: number;
  /** Open connections per peer IP address at most (0 = no limit). */
  maxConnectionsPerPeer: number;
  /** Minimum spacing of client PINGs in ms (0 = not enforced). */
  minPingIntervalMs: number;
  /** A session without any open stream for this long is closed (0 = never). */
  maxConnectionIdleMs: number;
  /** TLS handshake deadline in ms (default HANDSHAKE_TIMEOUT_MS; not a flag). */
  handshakeTimeoutMs?: number;
}

/** Consecutive too-early PINGs tolerated (gRPC's own servers use 2). */
export const MAX_PING_STRIKES = 2;
/** TLS handshake deadline. */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/** SETTINGS frames: a client sends one or two in its life; 20 at once and 2 per second after that is generous. */
export const SETTINGS_BURST = 20;
export const SETTINGS_PER_SECOND = 2;
/** Streams reset by the client (or otherwise ended abnormally): 100 at once, 10 per second after that. */
export const RESET_BURST = 100;
export const RESETS_PER_SECOND = 10;


const GRPC_RESOURCE_EXHAUSTED = '8';

/** A message announced at this many times the receive limit or more closes its connection. */
export const OVERSIZE_CUT_FACTOR = 4;

type AnyHttp2Server = http2.Http2Server | http2.Http2SecureServer;

const OVERSIZE = /^Received message larger than max \((\d+) vs (\d+)\)/;

/** The announced size and the limit, when these response headers/trailers are grpc-js's refusal of an oversized message. */
function oversizeRefusal(headers: http2.OutgoingHttpHeaders | undefined): { size: number; limit: number } | undefined {
  const message = headers?.['grpc-message'];
  if (String(headers?.['grpc-status']) !== GRPC_RESOURCE_EXHAUSTED || typeof message !== 'string') return undefined;
  let text: string;
  try {
    text = decodeURI(message); // grpc-js sends encodeURI(details)
  } catch {
    return undefined;
  }
  const m = OVERSIZE.exec(text);
  return m ? { size: Number(m[1]), limit: Number(m[2]) } : undefined;
}

/** grpc-js's HTTP/2 servers behind a bound grpc.Server (see the module comment). */
function http2ServersOf(server: grpc.Server): AnyHttp2Server[] {
  const map = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(map instanceof Map)) {
    throw new Error('this @grpc/grpc-js version has no Server.http2Servers: connection limits and HTTP/2 abuse checks cannot attach');
  }
  return [...map.keys()].filter((s): s is AnyHttp2Server => s instanceof net.Server);
}

/**
 * The accept queue asked of the kernel for each listener: as long as it allows
 * (Linux truncates it to `net.core.somaxconn`, 4096 by default since 5.4). Node
 * listens with 511, and a reconnect storm of thousands of clients overflows
 * that whenever the event loop is busy for a moment: the kernel then drops the
 * handshakes it has no room for, and each of those clients retries only after
 * a second or more. A queued connection still meets the limits below when it
 * is accepted.
 */
const ACCEPT_QUEUE = 65535;

/**
 * Asks the kernel for ACCEPT_QUEUE on a listening server: listen(2) on a
 * socket that already listens only changes its queue's length. Node has no
 * public way to set it for a socket grpc-js listened on, so this makes the
 * call Node itself makes, on the server's handle. False when the handle is not
 * there or refuses (the queue stays as Node made it).
 */
function widenAcceptQueue(server: net.Server): boolean {
  const handle = (server as unknown as { _handle?: { listen?: (backlog: number) => number } })._handle;
  if (typeof handle?.listen !== 'function') return false;
  return handle.listen(ACCEPT_QUEUE) === 0;
}

function peerAddress(socket: net.Socket): string {
  const a = socket.remoteAddress ?? 'unknown';
  return a.startsWith('::ffff:') ? a.slice(7) : a;
}

function connectionKey(socket: { remoteAddress?: string; remotePort?: number }): string {
  return `${socket.remoteAddress ?? ''}|${socket.remotePort ?? ''}`;
}

/**
 * One guarded connection: its limits' state, reached from the socket, the
 * session and its streams through the CONNECTION property, so every
 * connection shares the same listener functions (thousands of idle
 * connections, each with its own closures, would cost ~0.5 KB apiece).
 */
interface Connection {
  readonly guard: ConnectionGuard;
  readonly socket: net.Socket;
  readonly peer: string;
  readonly key: string;
  handshakeTimer: NodeJS.Timeout | undefined;
  session: http2.ServerHttp2Session | undefined;
  lastPing: number;
  pingStrikes: number;
  settings: TokenBucket | undefined;
  /** Made by the first reset (most connections never reset a stream): a bucket starts full and fills no further, so one made then is the same. */
  resets: TokenBucket | undefined;
  /** Being closed for abuse (its remaining frames are ignored). */
  cut: boolean;
  /** Streams of its session not yet closed. */
  streams: number;
  /** When its last stream closed (or its session began). */
  idleSince: number;
  /** Closes the session once idle long enough (with --max-connection-idle). */
  idleTimer: NodeJS.Timeout | undefined;
}

function newConnection(guard: ConnectionGuard, socket: net.Socket, peer: string, key: string): Connection {
  return {
    guard,
    socket,
    peer,
    key,
    handshakeTimer: undefined,
    session: undefined,
    lastPing: -Infinity,
    pingStrikes: 0,
    settings: undefined,
    resets: undefined,
    cut: false,
    streams: 0,
    idleSince: 0,
    idleTimer: undefined,
  };
}

const CONNECTION = Symbol('guarded connection');
type Guarded<T> = T & { [CONNECTION]?: Connection };

function connectionOf(target: object): Connection | undefined {
  return (target as Guarded<object>)[CONNECTION];
}

// The shared listeners: an emitter calls each with itself as `this`.

function onSocketClose(this: Guarded<net.Socket>): void {
  const conn = this[CONNECTION];
  if (conn) conn.guard.forget(conn);
}

function onPing(this: Guarded<http2.ServerHttp2Session>): void {
  const conn = this[CONNECTION];
  if (!conn) return;
  const now = performance.now();
  if (now - conn.lastPing < conn.guard.minPingIntervalMs) {
    if (++conn.pingStrikes > MAX_PING_STRIKES) conn.guard.cut(conn, 'ping_flood');
  } else {
    conn.pingStrikes = 0;
  }
  conn.lastPing = now;
}

function onRemoteSettings(this: Guarded<http2.ServerHttp2Session>): void {
  const conn = this[CONNECTION];
  if (conn && !(conn.settings ??= new TokenBucket(SETTINGS_PER_SECOND, SETTINGS_BURST)).take()) conn.guard.cut(conn, 'settings_flood');
}

function onStream(this: Guarded<http2.ServerHttp2Session>, stream: Guarded<http2.ServerHttp2Stream>): void {
  // A stream has no session any more when it closes: it keeps its connection itself.
  const conn = this[CONNECTION];
  stream[CONNECTION] = conn;
  if (conn) conn.streams++;
  stream.on('close', onStreamClose);
  stream.on('finish', onStreamFinish);
}

// 'close' and 'finish' come once per stream: no once() wrappers.
function onStreamClose(this: Guarded<http2.ServerHttp2Stream>): void {
  const conn = this[CONNECTION];
  if (!conn) return;
  if (--conn.streams === 0 && conn.idleTimer) {
    conn.idleSince = performance.now();
    // Refreshed rather than made again: a timer per stream closed would be garbage at churn rates.
    conn.idleTimer.refresh();
  }
  if (this.rstCode === undefined || this.rstCode === http2.constants.NGHTTP2_NO_ERROR) return;
  if (!(conn.resets ??= new TokenBucket(RESETS_PER_SECOND, RESET_BURST)).take()) conn.guard.cut(conn, 'rapid_reset');
}

/**
 * Our side is done (status sent). grpc-js refuses a message announced above
 * the receive limit as soon as its 5-byte prefix arrives, ending that stream
 * only; an announcement of several times the limit is no mistake but a probe,
 * and the connection goes too.
 */
function onStreamFinish(this: Guarded<http2.ServerHttp2Stream>): void {
  const declared = oversizeRefusal(this.sentTrailers ?? this.sentHeaders);
  const conn = this[CONNECTION];
  if (declared === undefined || !conn) return;
  conn.guard.oversized(conn, declared);
}

/** The idle timer of `conn` fired: its session goes if no stream opened since it last was without one. */
function onIdleTimeout(conn: Connection): void {
  const session = conn.session;
  if (!session || session.closed || session.destroyed || conn.streams > 0) return;
  const idleFor = performance.now() - conn.idleSince;
  const limit = conn.guard.maxConnectionIdleMs;
  if (idleFor >= limit) session.close();
  else conn.idleTimer?.refresh();
}

export class ConnectionGuard {
  private readonly attached = new WeakSet<AnyHttp2Server>();
  private readonly open = new Map<string, Connection>();
  private readonly perPeer = new Map<string, number>();
  private readonly log: Logger;
  /** A connection flood causes one refusal or cut per connection: warnings bounded by time. */
  private readonly warnings: WarnLimiter;
  private closed = false;

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly deps: { logger: Logger; metrics: SecurityMetrics; logRepeatIntervalMs?: number },
  ) {
    this.log = deps.logger.child({ component: 'connections' });
    this.warnings = new WarnLimiter(this.log, deps.logRepeatIntervalMs);
  }

  /**
   * The client address of a session this guard saw arrive, as grpc-js's
   * `getPeer()` writes it (address:port), read from the accepted socket:
   * `getPeer()` reads it through the session's socket proxy, three property
   * reads through a proxy trap per stream. Undefined for a session it does
   * not know.
   */
  peerOf(session: http2.Http2Session | undefined): string | undefined {
    const socket = session ? connectionOf(session)?.socket : undefined;
    if (!socket) return undefined;
    // As getPeer(): no address is not an address (it answers 'unknown'), no port leaves the port out.
    const address = socket.remoteAddress;
    if (!address) return undefined;
    const port = socket.remotePort;
    return port ? `${address}:${port}` : address;
  }

  get minPingIntervalMs(): number {
    return this.limits.minPingIntervalMs;
  }

  get maxConnectionIdleMs(): number {
    return this.limits.maxConnectionIdleMs;
  }

  /** Starts guarding every listener of a bound grpc.Server (call right after bindAsync succeeds). */
  attach(server: grpc.Server): void {
    for (const h2 of http2ServersOf(server)) {
      if (this.attached.has(h2)) continue;
      this.attached.add(h2);
      if (!widenAcceptQueue(h2)) this.log.warn("could not lengthen a listener's accept queue: a burst of connections may be dropped and retried");
      // First in line: a refused connection never reaches TLS or HTTP/2.
      h2.prependListener('connection', (socket: net.Socket) => this.onConnection(socket));
      h2.on('session', (session: http2.ServerHttp2Session) => this.onSession(session));
      // A hang-up before any handshake (a refused connection, a port scan) is not a failed handshake.
      h2.on('tlsClientError', (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ECONNRESET') this.deps.metrics.tlsHandshakeFailures.inc();
      });
    }
  }

  private onConnection(socket: Guarded<net.Socket>): void {
    const peer = peerAddress(socket);
    const { maxConnections, maxConnectionsPerPeer } = this.limits;
    const reason =
      this.closed ? 'closed'
      : maxConnections > 0 && this.open.size >= maxConnections ? 'total'
      : maxConnectionsPerPeer > 0 && (this.perPeer.get(peer) ?? 0) >= maxConnectionsPerPeer ? 'per_peer'
      : undefined;
    if (reason !== undefined) {
      if (reason !== 'closed') {
        this.deps.metrics.connectionsRefused.inc({ reason });
        this.warnings.warn(`refused: ${reason}`, { peer, reason, open: this.open.size }, 'connection refused: limit reached');
      }
      socket.destroy();
      return;
    }
    const conn = newConnection(this, socket, peer, connectionKey(socket));
    conn.handshakeTimer = setTimeout(() => this.cutSocket(conn, 'handshake_timeout'), this.limits.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS);
    conn.handshakeTimer.unref();
    socket[CONNECTION] = conn;
    this.open.set(conn.key, conn);
    this.perPeer.set(peer, (this.perPeer.get(peer) ?? 0) + 1);
    this.deps.metrics.connections.inc();
    socket.on('close', onSocketClose);
  }

  /** The socket of `conn` closed. */
  forget(conn: Connection): void {
    clearTimeout(conn.handshakeTimer);
    conn.handshakeTimer = undefined;
    clearTimeout(conn.idleTimer);
    conn.idleTimer = undefined;
    if (this.open.get(conn.key) !== conn) return;
    this.open.delete(conn.key);
    const n = (this.perPeer.get(conn.peer) ?? 1) - 1;
    if (n <= 0) this.perPeer.delete(conn.peer);
    else this.perPeer.set(conn.peer, n);
    this.deps.metrics.connections.dec();
  }

  private onSession(session: Guarded<http2.ServerHttp2Session>): void {
    const socket = session.socket;
    // session.socket stands for the accepted socket (a proxy of it), or for the TLS socket over it: then it is found by its address.
    const found = socket ? (connectionOf(socket) ?? this.open.get(connectionKey(socket))) : undefined;
    // One not seen arriving (not kept in `open`, key '') is guarded all the same.
    const conn = found ?? newConnection(this, socket as net.Socket, socket ? peerAddress(socket as net.Socket) : 'unknown', '');
    clearTimeout(conn.handshakeTimer);
    conn.handshakeTimer = undefined;
    conn.session = session;
    session[CONNECTION] = conn;
    if (this.limits.minPingIntervalMs > 0) session.on('ping', onPing);
    session.on('remoteSettings', onRemoteSettings);
    session.on('stream', onStream);
    if (this.limits.maxConnectionIdleMs > 0) {
      conn.idleSince = performance.now();
      conn.idleTimer = setTimeout(onIdleTimeout, this.limits.maxConnectionIdleMs, conn);
      conn.idleTimer.unref();
    }
  }

  /** A stream of `conn` was refused a message announced above the receive limit. */
  oversized(conn: Connection, declared: { size: number; limit: number }): void {
    this.deps.metrics.limitExceeded.inc({ limit: 'request_size' });
    if (declared.size >= OVERSIZE_CUT_FACTOR * declared.limit) this.cut(conn, 'oversized_message');
  }

  /** Closes the session of `conn` for HTTP/2 abuse: GOAWAY ENHANCE_YOUR_CALM, then everything is dropped. */
  cut(conn: Connection, reason: CutReason): void {
    const session = conn.session;
    if (!session || session.destroyed || conn.cut) return;
    conn.cut = true;
    this.deps.metrics.connectionsCut.inc({ reason });
    this.warnings.warn(`cut: ${reason}`, { peer: conn.peer, reason }, 'connection closed: HTTP/2 abuse');
    try {
      session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from(reason === 'ping_flood' ? 'too_many_pings' : reason));
    } catch {
      // already going away
    }
    // Give the GOAWAY a moment to leave, then drop everything, open streams included.
    setTimeout(() => session.destroy(), 50).unref();
  }

  private cutSocket(conn: Connection, reason: CutReason): void {
    conn.handshakeTimer = undefined;
    if (conn.session || conn.socket.destroyed) return;
    this.deps.metrics.connectionsCut.inc({ reason });
    this.warnings.warn(`cut: ${reason}`, { peer: conn.peer, reason }, 'connection closed: no TLS handshake in time');
    conn.socket.destroy();
  }

  /** Stops admitting connections (existing ones are left to the server's shutdown). */
  close(): void {
    this.closed = true;
    for (const c of this.open.values()) {
      clearTimeout(c.handshakeTimer);
      clearTimeout(c.idleTimer);
    }
    this.warnings.close();
  }
}
