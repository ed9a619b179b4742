/**
 * The connection under a RedisStore and whether it serves: the ioredis client
 * (standalone, Sentinel or Cluster), deadlines on every command, health
 * (up / down, logged once per transition) and the probe that brings a store
 * back up after timeouts on a connection that stayed open. The fault
 * behaviour it implements is described in redis-store.ts.
 */
import Redis, { Cluster } from 'ioredis';
import type { ChainableCommander, ClusterOptions, RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { parseHostPort, type ParsedRedisSpec } from './redis-spec';
import type { RawCommand } from './resp';

/** The connection part of RedisStoreOptions. */
export interface RedisConnectionOptions extends ParsedRedisSpec {
  /** Password of the sentinels themselves, when they require one. */
  sentinelPassword?: string;
  /** Deadline of one read (one round trip). Default 250 ms. */
  commandTimeoutMs?: number;
  /** TCP connect timeout. Default 2000 ms. */
  connectTimeoutMs?: number;
  /** Cap of the reconnect backoff. Default 2000 ms. */
  maxReconnectDelayMs?: number;
  /** Interval of health probes while unhealthy but connected. Default 500 ms. */
  probeIntervalMs?: number;
  onError?: (op: string) => void;
}

type Client = Redis | Cluster;
type ExecResult = Array<[Error | null, unknown]> | null;

/** What a command under a deadline resolves to when the server could not serve it. */
export const FAILED = Symbol('failed');
/** Reply errors that mean "this server can't serve right now" (vs. a bad command). */
const TRANSIENT_REPLY = /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|MOVED|ASK|BUSY|NOREPLICAS|OOM)\b/;
const PROBE_FAILURES_BEFORE_RECONNECT = 3;

export class RedisConnection {
  readonly client: Client;
  readonly isCluster: boolean;
  readonly log: Logger | undefined;
  /** Deadline of one read (one round trip). */
  readonly readTimeoutMs: number;
  private readonly onErrorCb: ((op: string) => void) | undefined;
  private readonly probeIntervalMs: number;

  private state: 'connecting' | 'up' | 'down' = 'connecting';
  private isClosed = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private probeFailures = 0;
  private probing = false;
  private upWaiters = new Set<() => void>();

  /** `onUp`: called each time the store turns healthy (after waiters are woken). */
  constructor(
    opts: RedisConnectionOptions,
    log: Logger | undefined,
    private readonly onUp: () => void,
  ) {
    this.log = log;
    this.onErrorCb = opts.onError;
    this.readTimeoutMs = opts.commandTimeoutMs ?? 250;
    this.probeIntervalMs = opts.probeIntervalMs ?? 500;
    const connectTimeout = opts.connectTimeoutMs ?? 2000;
    const maxDelay = opts.maxReconnectDelayMs ?? 2000;
    const backoff = (times: number): number =>
      Math.min(maxDelay, 50 * 2 ** Math.min(times, 16)) + Math.floor(Math.random() * 100);
    const tls = opts.tls === true ? {} : opts.tls || undefined;

    const common: RedisOptions = {
      connectTimeout,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      enableReadyCheck: true,
      autoResubscribe: false,
      lazyConnect: false,
      ...(opts.username !== undefined ? { username: opts.username } : {}),
      ...(opts.password !== undefined ? { password: opts.password } : {}),
      ...(tls ? { tls } : {}),
    };

    const modes = [opts.url, opts.cluster, opts.sentinel].filter((m) => m !== undefined).length;
    if (modes > 1) throw new Error('RedisStore: give only one of url, cluster, sentinel');

    if (opts.cluster) {
      if (opts.cluster.length === 0) throw new Error('RedisStore: empty cluster node list');
      this.isCluster = true;
      const { enableOfflineQueue: _e, maxRetriesPerRequest: _m, ...redisOptions } = common;
      const clusterOptions: ClusterOptions = {
        enableOfflineQueue: false,
        enableReadyCheck: true,
        scaleReads: 'master',
        slotsRefreshTimeout: Math.max(connectTimeout, 1000),
        clusterRetryStrategy: backoff,
        retryDelayOnClusterDown: 100,
        retryDelayOnFailover: 100,
        redisOptions: { ...redisOptions, maxRetriesPerRequest: 0 },
      };
      this.client = new Cluster(opts.cluster.map(parseHostPort(6379)), clusterOptions);
      this.client.on('node error', (err: Error) => this.connectionError(err));
    } else if (opts.sentinel) {
      this.isCluster = false;
      this.client = new Redis({
        ...common,
        sentinels: opts.sentinel.sentinels,
        name: opts.sentinel.name,
        ...(opts.sentinel.db !== undefined ? { db: opts.sentinel.db } : {}),
        ...(opts.sentinelPassword !== undefined ? { sentinelPassword: opts.sentinelPassword } : {}),
        ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
        sentinelRetryStrategy: backoff,
        retryStrategy: backoff,
      });
    } else {
      this.isCluster = false;
      this.client = new Redis(opts.url ?? 'redis://127.0.0.1:6379', { ...common, retryStrategy: backoff });
    }

    this.client.on('error', (err: Error) => this.connectionError(err));
    // A cluster turns 'ready' again while a master may still be missing:
    // verify it serves every slot before trusting it.
    this.client.on('ready', () => (this.isCluster ? void this.probe() : this.markUp('connected')));
    this.client.on('close', () => this.markDown('connection closed'));
    this.client.on('end', () => this.markDown('connection ended'));
  }

  get healthy(): boolean {
    return this.state === 'up' && !this.isClosed;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Resolves `true` once healthy, `false` after `timeoutMs` or on close. */
  waitUntilHealthy(timeoutMs: number): Promise<boolean> {
    if (this.healthy) return Promise.resolve(true);
    if (this.isClosed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.upWaiters.delete(done);
        resolve(this.healthy);
      };
      const timer = setTimeout(done, timeoutMs);
      timer.unref();
      this.upWaiters.add(done);
    });
  }

  /**
   * Sends commands back to back and waits for every reply (one round trip).
   * False when the server could not serve them (timeout, connection,
   * transient reply error: the store is marked down); a command failing for
   * its own reasons (e.g. WRONGTYPE on foreign data) is counted and ignored.
   */
  async sendAll(op: string, commands: RawCommand[], timeoutMs: number): Promise<boolean> {
    const replies = commands.map((c) => {
      void this.client.sendCommand(c);
      return c.promise;
    });
    const res = await this.guard(op, Promise.allSettled(replies), timeoutMs);
    if (res === FAILED) return false;
    let counted = false;
    for (const r of res) {
      if (r.status === 'fulfilled') continue;
      if (!isPermanent(r.reason)) {
        this.failure(op, r.reason);
        return false;
      }
      if (!counted) this.failure(op, r.reason);
      counted = true;
    }
    return true;
  }

  /**
   * Runs a pipeline under a deadline. `FAILED` = the server could not serve it
   * (timeout, connection, transient reply error; the store is marked down).
   * A command that failed for its own reasons (e.g. WRONGTYPE) is counted and
   * left in the result as its `Error`.
   */
  async exec(op: string, p: ChainableCommander, timeoutMs: number): Promise<unknown[] | typeof FAILED> {
    const res = await this.guard(op, p.exec() as Promise<ExecResult>, timeoutMs);
    if (res === FAILED) return FAILED;
    if (!res) {
      this.failure(op, new Error('pipeline aborted'));
      return FAILED;
    }
    const out: unknown[] = new Array(res.length);
    let counted = false;
    for (let i = 0; i < res.length; i++) {
      const [err, value] = res[i]!;
      if (!err) {
        out[i] = value;
        continue;
      }
      if (!isPermanent(err)) {
        this.failure(op, err);
        return FAILED;
      }
      if (!counted) this.failure(op, err);
      counted = true;
      out[i] = err;
    }
    return out;
  }

  /** Settles within `timeoutMs`, never rejects; marks the store down on timeouts. */
  guard<T>(op: string, promise: Promise<T>, timeoutMs: number): Promise<T | typeof FAILED> {
    return new Promise((resolve) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        this.failure(op, new Error(`redis ${op} timed out after ${timeoutMs} ms`));
        resolve(FAILED);
      }, timeoutMs);
      promise.then(
        (v) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.failure(op, err);
          resolve(FAILED);
        },
      );
    });
  }

  /** Like guard, without counting or changing health. */
  guardSilent<T>(promise: Promise<T>, timeoutMs: number): Promise<T | typeof FAILED> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(FAILED), timeoutMs);
      promise.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        () => {
          clearTimeout(timer);
          resolve(FAILED);
        },
      );
    });
  }

  countError(op: string): void {
    try {
      this.onErrorCb?.(op);
    } catch {
      // a metrics callback must not break the store
    }
  }

  private failure(op: string, err: unknown): void {
    if (this.isClosed) return;
    this.countError(op);
    const e = err instanceof Error ? err : new Error(String(err));
    if (isPermanent(e)) {
      this.log?.debug({ op, err: e.message }, 'redis command error');
      return; // a bad command or data; the server itself is fine
    }
    this.markDown(e.message);
  }

  private connectionError(err: Error): void {
    if (this.isClosed) return;
    this.countError('connection');
    this.markDown(err.message);
  }

  private markUp(reason: string): void {
    if (this.isClosed) return;
    this.probeFailures = 0;
    this.stopProbe();
    if (this.state !== 'up') {
      this.log?.info({ reason, previous: this.state }, 'redis available: shared cache in use');
      this.state = 'up';
    }
    for (const w of [...this.upWaiters]) w();
    this.onUp();
  }

  private markDown(reason: string): void {
    if (this.isClosed) return;
    if (this.state !== 'down') {
      this.log?.warn({ reason, previous: this.state }, 'redis unavailable: bypassing shared cache until it recovers');
      this.state = 'down';
    }
    this.startProbe();
  }

  private startProbe(): void {
    if (this.probeTimer || this.isClosed) return;
    this.probeTimer = setInterval(() => void this.probe(), this.probeIntervalMs);
    this.probeTimer.unref();
  }

  private stopProbe(): void {
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = undefined;
  }

  /**
   * While down with a connection that claims to be ready (timeouts, not a
   * disconnect), check that Redis answers; success → up. Standalone: PING.
   * Cluster: every master owning slots must be connected and report
   * `cluster_state:ok` (CLUSTER INFO), so a dead master keeps the store down
   * instead of letting it flap between the healthy and the dead nodes.
   * A disconnected client needs no probe: ioredis reconnects and 'ready'
   * marks the store up.
   */
  private async probe(): Promise<void> {
    if (this.isClosed || this.state === 'up' || this.probing || this.client.status !== 'ready') return;
    this.probing = true;
    try {
      const check = this.isCluster ? this.clusterServing(this.client as Cluster) : this.client.ping().then(() => true);
      const r = await this.guardSilent(check, this.readTimeoutMs * 2);
      if (r === true) {
        this.markUp('probe succeeded');
        return;
      }
      this.countError('probe');
      this.markDown('health probe failed'); // from 'connecting': start the probe timer
      if (++this.probeFailures >= PROBE_FAILURES_BEFORE_RECONNECT && !this.isClosed) {
        this.probeFailures = 0;
        this.log?.debug('redis not answering on an open connection: reconnecting');
        this.client.disconnect(true);
      }
    } finally {
      this.probing = false;
    }
  }

  private async clusterServing(cluster: Cluster): Promise<boolean> {
    const owners = new Set<string>();
    for (const s of cluster.slots) if (s?.[0]) owners.add(s[0]);
    const byKey = new Map<string, Redis>();
    for (const n of cluster.nodes('master')) byKey.set(`${n.options.host}:${n.options.port}`, n);
    if (owners.size === 0) return false;
    const infos = await Promise.all(
      [...owners].map((k) => {
        const n = byKey.get(k);
        return n && n.status === 'ready' ? (n.cluster('INFO') as Promise<string>) : Promise.resolve('');
      }),
    );
    return infos.every((i) => i.includes('cluster_state:ok'));
  }

  /** From now on the store is closed: no probes, no health changes; waiters wake (unhealthy). */
  markClosed(): void {
    this.isClosed = true;
    this.stopProbe();
    for (const w of [...this.upWaiters]) w();
  }

  /** Ends the connection (QUIT, bounded to 1 s, then disconnect). */
  async disconnect(): Promise<void> {
    await this.guardSilent(this.client.quit(), 1000);
    this.client.disconnect();
  }
}

/** A reply error about the command or data, not about the server's ability to serve. */
function isPermanent(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError' && !TRANSIENT_REPLY.test(err.message);
}
