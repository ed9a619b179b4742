/**
 * `RedisStore`: the shared, persistent cache tier (docs/fleet.md, "Redis") on Redis
 * (standalone, Sentinel or Cluster) via ioredis.
 *
 * Key layout: see redis-keys.ts (a record string per URN, which may instead hold
 * its absent marker; a set per glob; one cluster hash tag per collection);
 * record format: redis-record.ts.
 *
 * Speed: a chunk of up to 1000 coalesced write operations is one pipeline of
 * a handful of multi-key commands (MSET, DEL, SADD/SREM per glob, SET … PXAT
 * per TTL'd resource; redis-write-batch.ts), several chunks in flight; reads
 * are one GET per resource, one MGET per glob or warm-start page.
 *
 * Fault behaviour — Redis down or slow never blocks or fails the caller:
 *  - Every operation has its own deadline (`commandTimeoutMs`, default 250 ms,
 *    for reads; `writeTimeoutMs` per write pipeline). ioredis runs with
 *    `enableOfflineQueue: false` and `maxRetriesPerRequest: 0`, so commands
 *    issued while disconnected fail at once instead of queueing.
 *  - Reads resolve `undefined` ("unknown") on any failure; nothing ever throws
 *    or rejects. While the store is unhealthy reads are not even sent (they
 *    resolve `undefined` immediately), which also bounds ioredis's command
 *    queue when Redis hangs with the TCP connection still open.
 *  - Writes go through a coalescing backlog (latest operation per key, in
 *    order, at most `maxPendingWrites` keys). `write()` resolves once the
 *    attempt is over (at once while unhealthy, never later than
 *    `writeTimeoutMs`); a failed attempt leaves the
 *    operations in the backlog, and the backlog is replayed when Redis is back,
 *    so a removal made during an outage is not lost. A later write to the same
 *    key supersedes an older pending one. On overflow the oldest pending
 *    operations are dropped (`onError('write-dropped')`, logged once per outage):
 *    Redis may then hold stale entries until they are rewritten or expire.
 *  - Failures are counted through `onError(op)` with op one of `connection`,
 *    `getResource`, `getGlobMembers`, `write`, `write-dropped`, `warmLoad`,
 *    `decode`, `probe`. Calls skipped because the store is unhealthy are not
 *    counted.
 *  - `healthy` becomes false on a connection loss, a timeout or a
 *    server-not-serving error, and true again on ioredis 'ready' or a
 *    successful probe (PING every `probeIntervalMs` while the connection claims
 *    to be up; after 3 failed probes the connection is dropped and re-made;
 *    in cluster mode the probe requires every slot-owning master to be
 *    connected and to report cluster_state:ok).
 *    The state change is logged once per transition (connecting→up/down,
 *    up→down, down→up).
 *  - ioredis reconnects by itself forever with capped exponential backoff
 *    (50 ms doubling up to `maxReconnectDelayMs`, default 2 s, plus jitter).
 *  - 'error' events always have a listener; every promise has a handler.
 *  In cluster mode health is store-wide: one unreachable master (or a
 *  cluster reporting CLUSTERDOWN) makes the whole store unhealthy, i.e. the
 *  relay serves from memory/upstream only, until every master serves again.
 */
import Redis, { Cluster } from 'ioredis';
import type { ChainableCommander, ClusterOptions, RedisOptions } from 'ioredis';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import type { Logger } from 'pino';
import type { SharedStore, StoreBatch, StoredResource } from './types';
import { DEFAULT_PREFIX, RedisKeyLayout, tagOf } from './redis-keys';
import { StringTable, decodeRecord, isAbsentRecord } from './redis-record';
import { WriteBatch, type Entry } from './redis-write-batch';
import { BufferPool, type RawCommand } from './resp';

export interface RedisSentinelSpec {
  sentinels: Array<{ host: string; port: number }>;
  /** Master group name as configured in the sentinels. */
  name: string;
  db?: number;
}

export interface RedisStoreOptions {
  /** `redis://[[user]:password@]host[:port][/db]` or `rediss://…` (TLS). */
  url?: string;
  /** Redis Cluster seed nodes, `host:port` each (`[v6addr]:port` for IPv6). */
  cluster?: string[];
  sentinel?: RedisSentinelSpec;
  /** Auth for the data nodes (cluster / sentinel-managed master); a `url` carries its own. */
  username?: string;
  password?: string;
  /** Password of the sentinels themselves, when they require one. */
  sentinelPassword?: string;
  /** TLS towards the data nodes (and sentinels). `rediss://` implies `true`. */
  tls?: boolean | TlsOptions;
  /** Prefix of every key; must not contain `{` or `}`. Default `xdstp-relay:`. */
  prefix?: string;
  /** Deadline of one read (one round trip). Default 250 ms. */
  commandTimeoutMs?: number;
  /** Deadline of one write pipeline (≤ 1000 keys / 8 MiB). Default max(4 × commandTimeoutMs, 1000 ms). */
  writeTimeoutMs?: number;
  /** Deadline of one SCAN page or MGET page during `warmLoad`. Default 5000 ms. */
  warmTimeoutMs?: number;
  /** TCP connect timeout. Default 2000 ms. */
  connectTimeoutMs?: number;
  /** Cap of the reconnect backoff. Default 2000 ms. */
  maxReconnectDelayMs?: number;
  /** Interval of health probes while unhealthy but connected. Default 500 ms. */
  probeIntervalMs?: number;
  /** Max keys with a pending (not yet written) operation. Default 100 000. */
  maxPendingWrites?: number;
  logger?: Logger;
  onError?: (op: string) => void;
}

type Client = Redis | Cluster;
/** One warm-start page: its canonical keys and the MGET of their records. */
type WarmFetch = { names: string[]; values: Promise<Array<Buffer | null> | typeof FAILED> };
type ExecResult = Array<[Error | null, unknown]> | null;

const FAILED = Symbol('failed');
/** Reply errors that mean "this server can't serve right now" (vs. a bad command). */
const TRANSIENT_REPLY = /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|MOVED|ASK|BUSY|NOREPLICAS|OOM)\b/;
const WRITE_CHUNK_ENTRIES = 1000;
const WRITE_CHUNK_BYTES = 8 << 20;
const WRITE_CHUNKS_IN_FLIGHT = 3;
const WARM_FETCHES_IN_FLIGHT = 4;
const PROBE_FAILURES_BEFORE_RECONNECT = 3;

export class RedisStore implements SharedStore {
  readonly keys: RedisKeyLayout;
  private readonly client: Client;
  private readonly isCluster: boolean;
  private readonly log: Logger | undefined;
  private readonly onErrorCb: ((op: string) => void) | undefined;
  private readonly readTimeoutMs: number;
  private readonly writeTimeoutMs: number;
  private readonly warmTimeoutMs: number;
  private readonly probeIntervalMs: number;
  private readonly maxPending: number;

  private state: 'connecting' | 'up' | 'down' = 'connecting';
  private closed = false;
  private pending = new Map<string, Entry>();
  private flushing = false;
  private flushWaiters: Array<() => void> = [];
  private droppedThisOutage = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private probeFailures = 0;
  private probing = false;
  private upWaiters = new Set<() => void>();
  /** Reused buffers of the write commands (resp.ts). */
  private readonly buffers = new BufferPool();

  constructor(opts: RedisStoreOptions = {}) {
    this.keys = new RedisKeyLayout(opts.prefix ?? DEFAULT_PREFIX);
    this.log = opts.logger?.child({ component: 'redis-store' });
    this.onErrorCb = opts.onError;
    this.readTimeoutMs = opts.commandTimeoutMs ?? 250;
    this.writeTimeoutMs = opts.writeTimeoutMs ?? Math.max(4 * this.readTimeoutMs, 1000);
    this.warmTimeoutMs = opts.warmTimeoutMs ?? 5000;
    this.probeIntervalMs = opts.probeIntervalMs ?? 500;
    this.maxPending = opts.maxPendingWrites ?? 100_000;
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
    return this.state === 'up' && !this.closed;
  }

  /** Resolves `true` once healthy, `false` after `timeoutMs` or on close. */
  waitUntilHealthy(timeoutMs: number): Promise<boolean> {
    if (this.healthy) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
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

  // ---------------------------------------------------------------- reads

  async getResource(key: string): Promise<StoredResource | 'absent' | undefined> {
    if (!this.healthy) return undefined;
    // One GET: the key holds the record or the absent marker.
    const record = await this.guard('getResource', this.client.getBuffer(this.keys.resource(key)), this.readTimeoutMs);
    if (record === FAILED || !record) return undefined;
    if (isAbsentRecord(record)) return 'absent';
    return this.decode(key, record);
  }

  async getGlobMembers(globKey: string): Promise<StoredResource[] | 'absent' | undefined> {
    if (!this.healthy) return undefined;
    const gtag = tagOf(globKey);
    const setKey = this.keys.members(globKey, gtag);
    const p = this.client.pipeline();
    p.smembers(setKey);
    p.getBuffer(this.keys.resource(globKey, gtag)); // the glob's absent marker, if any
    const head = await this.exec('getGlobMembers', p, this.readTimeoutMs);
    if (head === FAILED || head[0] instanceof Error || head[1] instanceof Error) return undefined;
    const names = head[0] as string[];
    if (names.length === 0) return head[1] instanceof Buffer && isAbsentRecord(head[1]) ? 'absent' : undefined;

    // Members normally share the glob's tag: one MGET. Group anyway, so a
    // member stored under another parent still reads correctly in a cluster.
    const groups = new Map<string, string[]>();
    for (const name of names) {
      const t = tagOf(name);
      const g = groups.get(t);
      if (g) g.push(name);
      else groups.set(t, [name]);
    }
    const parts = await Promise.all(
      [...groups].map(async ([t, members]) => {
        const r = await this.guard('getGlobMembers', this.client.mgetBuffer(members.map((m) => this.keys.resource(m, t))), this.readTimeoutMs);
        return r === FAILED ? FAILED : { t, members, r };
      }),
    );
    const out: StoredResource[] = [];
    const gone: string[] = [];
    const strings = new StringTable(16); // members share their type URL and glob
    for (const part of parts) {
      // a partial member list must not pass for the whole
      if (part === FAILED) return undefined;
      part.members.forEach((m, i) => {
        const v = part.r[i];
        const r = v ? this.decode(m, v, true, strings) : undefined;
        if (r) out.push(r);
        else if (part.t === gtag) gone.push(m);
      });
    }
    if (gone.length > 0) this.pruneMembers(setKey, gtag, gone);
    // Every listed member expired or vanished: we don't know the glob's state.
    return out.length > 0 ? out : undefined;
  }

  /**
   * Warm start: streams every live resource under this prefix, in pages of
   * about `count` (SCAN MATCH `<prefix>r:{…}:*` COUNT `count` on every master,
   * one MGET per page). Pipelined: the SCAN runs ahead on a second connection,
   * as a task of its own, while up to WARM_FETCHES_IN_FLIGHT MGETs queue on the
   * main one, so Redis reads the next pages while this process decodes one. Waits up to `waitMs`
   * for the first connection. Best effort: on an error or timeout it logs,
   * counts `onError('warmLoad')` and ends early — whatever was yielded is
   * valid, the rest is simply fetched on demand later. Expired resources are
   * skipped. Absent markers (scanned too: they live in `r:` keys) are skipped;
   * they are consulted on demand.
   * Resources keep their `glob`, so the caller can rebuild glob membership.
   */
  async *warmLoad(opts: { count?: number; waitMs?: number } = {}): AsyncGenerator<StoredResource[], void, undefined> {
    const count = opts.count ?? 1000;
    if (!(await this.waitUntilHealthy(opts.waitMs ?? 2000))) {
      if (!this.closed) {
        this.countError('warmLoad');
        this.log?.warn('redis warm load skipped: redis not available');
      }
      return;
    }
    const nodes: Redis[] = this.isCluster ? (this.client as Cluster).nodes('master') : [this.client as Redis];
    const pattern = this.keys.resourcePattern();
    const strings = new StringTable();
    let total = 0;
    for (const node of nodes) {
      const scanner = await this.scanConnection(node);
      // The SCAN runs ahead as its own task, each page's MGET sent as soon as
      // its keys are known, up to WARM_FETCHES_IN_FLIGHT pages ahead of the
      // decoding here: the scan's round trips (which queue behind the MGETs in
      // Redis) no longer stall this process between pages.
      const queue: WarmFetch[] = [];
      let scanFailed = false;
      let scanFinished = false;
      let stop = false;
      let consumerWaiting: (() => void) | undefined;
      let scannerWaiting: (() => void) | undefined;
      const wakeConsumer = (): void => {
        const w = consumerWaiting;
        consumerWaiting = undefined;
        w?.();
      };
      const wakeScanner = (): void => {
        const w = scannerWaiting;
        scannerWaiting = undefined;
        w?.();
      };
      const scanning = (async (): Promise<void> => {
        try {
          let cursor = '0';
          do {
            while (queue.length >= WARM_FETCHES_IN_FLIGHT && !stop) await new Promise<void>((resolve) => (scannerWaiting = resolve));
            if (stop || this.closed) return;
            const page = await this.guard('warmLoad', scanner.scan(cursor, 'MATCH', pattern, 'COUNT', count), this.warmTimeoutMs);
            if (page === FAILED) {
              scanFailed = true;
              return;
            }
            cursor = page[0];
            const names: string[] = [];
            const redisKeys: string[] = [];
            for (const redisKey of page[1]) {
              const key = this.keys.keyOfResource(redisKey);
              if (key === undefined) continue;
              names.push(key);
              redisKeys.push(redisKey);
            }
            if (names.length > 0 && !stop) {
              queue.push({ names, values: this.fetchRecords(node, redisKeys) });
              wakeConsumer();
            }
          } while (cursor !== '0');
        } finally {
          scanFinished = true;
          wakeConsumer();
        }
      })();
      try {
        for (;;) {
          const f = queue.shift();
          if (f === undefined) {
            if (scanFinished) break;
            await new Promise<void>((resolve) => (consumerWaiting = resolve));
            continue;
          }
          wakeScanner();
          const values = await f.values;
          if (values === FAILED) return this.warmAborted(total);
          const batch: StoredResource[] = [];
          f.names.forEach((key, i) => {
            const v = values[i];
            // A warm page keeps nearly every byte of the socket chunks it came in: no copy.
            const r = v ? this.decode(key, v, false, strings) : undefined;
            if (r) batch.push(r);
          });
          if (batch.length > 0) {
            total += batch.length;
            yield batch;
          }
          if (this.closed) return;
        }
        if (scanFailed) return this.warmAborted(total);
      } finally {
        // Stopped early (or done): let a SCAN still under way settle before its connection goes.
        stop = true;
        wakeScanner();
        await scanning;
        if (scanner !== node) scanner.disconnect();
      }
    }
    this.log?.info({ resources: total }, 'redis warm load done');
  }

  /**
   * A second connection to `node` for the warm start's SCAN, so its small
   * replies never wait behind the large MGET replies of the main connection.
   * Falls back to `node` itself when it can't connect quickly.
   */
  private async scanConnection(node: Redis): Promise<Redis> {
    const dup = node.duplicate();
    dup.on('error', () => undefined);
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), Math.min(this.warmTimeoutMs, 2000));
      dup.once('ready', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (ready && !this.closed) return dup;
    dup.disconnect();
    return node;
  }

  /** Values of `redisKeys` on one node: one MGET, or in a cluster one MGET per slot (hash tag), pipelined. */
  private async fetchRecords(node: Redis, redisKeys: string[]): Promise<Array<Buffer | null> | typeof FAILED> {
    if (!this.isCluster) return this.guard('warmLoad', node.mgetBuffer(redisKeys), this.warmTimeoutMs);
    const byTag = new Map<string, number[]>();
    redisKeys.forEach((k, i) => {
      const tag = k.slice(k.indexOf('{') + 1, k.indexOf('}'));
      const g = byTag.get(tag);
      if (g) g.push(i);
      else byTag.set(tag, [i]);
    });
    const p = node.pipeline();
    for (const idx of byTag.values()) p.mgetBuffer(idx.map((i) => redisKeys[i]!));
    const res = await this.exec('warmLoad', p, this.warmTimeoutMs);
    if (res === FAILED) return FAILED;
    const out: Array<Buffer | null> = new Array(redisKeys.length).fill(null);
    let g = 0;
    for (const idx of byTag.values()) {
      const values = res[g++];
      if (values instanceof Error) continue; // counted by exec; those keys are fetched on demand later
      idx.forEach((i, j) => (out[i] = (values as Array<Buffer | null>)[j] ?? null));
    }
    return out;
  }

  private warmAborted(total: number): void {
    this.log?.warn({ resources: total }, 'redis warm load aborted early');
  }

  // ---------------------------------------------------------------- writes

  /**
   * Queues the batch (removes, then absent markers, then puts; later ops on a
   * key replace earlier pending ones) and writes it. Resolves when the attempt
   * is over — at once while Redis is unavailable, and never later than
   * `writeTimeoutMs`. Never rejects. Callers don't need to await it.
   */
  write(batch: StoreBatch): Promise<void> {
    if (this.closed) return Promise.resolve();
    const now = Date.now();
    for (const r of batch.remove) this.enqueue({ kind: 'remove', key: r.key, ...(r.glob !== undefined ? { glob: r.glob } : {}) });
    for (const key of batch.absent) this.enqueue({ kind: 'absent', key });
    for (const res of batch.put) {
      if (res.expiresAt !== undefined && res.expiresAt <= now) {
        this.enqueue({ kind: 'remove', key: res.key, ...(res.glob !== undefined ? { glob: res.glob } : {}) });
      } else {
        this.enqueue({ kind: 'put', key: res.key, res });
      }
    }
    this.enforceBound();
    if (!this.healthy) return Promise.resolve();
    const flushed = new Promise<void>((resolve) => {
      this.flushWaiters.push(resolve);
      if (!this.flushing) void this.flushLoop();
    });
    // Normally resolves when this batch is written; never later than the write
    // deadline (e.g. behind a long backlog replay — the batch stays queued).
    return this.guardSilent(flushed, this.writeTimeoutMs).then(() => undefined);
  }

  private enqueue(e: Entry): void {
    // The map stays in write order: a key already pending moves to the end
    // (delete + set). A new key, the usual case, costs one lookup, not two.
    const size = this.pending.size;
    this.pending.set(e.key, e);
    if (this.pending.size === size) {
      this.pending.delete(e.key);
      this.pending.set(e.key, e);
    }
  }

  private enforceBound(): void {
    let drop = this.pending.size - this.maxPending;
    if (drop <= 0) return;
    this.countError('write-dropped');
    if (!this.droppedThisOutage) {
      this.droppedThisOutage = true;
      this.log?.warn({ maxPendingWrites: this.maxPending }, 'redis write backlog full: dropping oldest pending writes; shared cache may hold stale entries');
    }
    for (const k of this.pending.keys()) {
      if (drop-- <= 0) break;
      this.pending.delete(k);
    }
  }

  private async flushLoop(): Promise<void> {
    this.flushing = true;
    try {
      while (this.pending.size > 0 && this.healthy) {
        const waiters = this.flushWaiters;
        this.flushWaiters = [];
        const entries = [...this.pending.values()];
        this.pending = new Map();
        const failed = await this.flushEntries(entries);
        for (const w of waiters) w();
        if (failed.length > 0) {
          // Kept for replay; markUp (reconnect / probe) or the next write restarts the loop.
          this.requeue(failed);
          break;
        }
      }
      if (this.pending.size === 0) this.droppedThisOutage = false;
    } catch (err) {
      // Not expected (flushEntries never throws); keep the loop restartable.
      this.log?.error({ err }, 'redis flush loop failed');
    } finally {
      this.flushing = false;
      const waiters = this.flushWaiters;
      this.flushWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Puts failed entries back in front of newer ones, unless a newer op for the key exists. */
  private requeue(failed: Entry[]): void {
    const merged = new Map<string, Entry>();
    for (const e of failed) if (!this.pending.has(e.key)) merged.set(e.key, e);
    for (const [k, e] of this.pending) merged.set(k, e);
    this.pending = merged;
    this.enforceBound();
  }

  /**
   * Writes entries in chunks (≤ 1000 entries / 8 MiB each, one round trip
   * each), up to WRITE_CHUNKS_IN_FLIGHT at a time so the next chunk is being
   * encoded while Redis applies the previous one; on one connection Redis
   * applies them in the order sent. Returns the entries to retry later: those
   * of a failed chunk and those not yet tried.
   */
  private async flushEntries(entries: Entry[]): Promise<Entry[]> {
    const chunks: Array<{ entries: Entry[]; bytes: number }> = [];
    for (let i = 0; i < entries.length; ) {
      let bytes = 0;
      let j = i;
      while (j < entries.length && j - i < WRITE_CHUNK_ENTRIES && bytes < WRITE_CHUNK_BYTES) {
        const e = entries[j++]!;
        if (e.kind === 'put') bytes += e.res.resource.length;
      }
      chunks.push({ entries: entries.slice(i, j), bytes });
      i = j;
    }
    const failed: Entry[] = [];
    let next = 0;
    let stop = false;
    const worker = async (): Promise<void> => {
      while (!stop && next < chunks.length) {
        const f = await this.writeChunk(chunks[next++]!);
        if (f.length > 0 || !this.healthy) {
          // Stop here; failures and everything not yet tried wait for recovery.
          failed.push(...f);
          stop = true;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(WRITE_CHUNKS_IN_FLIGHT, chunks.length) }, worker));
    for (const c of chunks.slice(next)) failed.push(...c.entries);
    return failed;
  }

  /** One chunk as a few multi-key commands (redis-write-batch.ts), sent back to back; in a cluster, per slot. */
  private async writeChunk(chunk: { entries: Entry[]; bytes: number }): Promise<Entry[]> {
    const batch = new WriteBatch(this.keys, this.isCluster, this.buffers, chunk.bytes + chunk.entries.length * 256, chunk.entries.length);
    for (const e of chunk.entries) batch.add(e);
    const failed = new Set<Entry>();
    await Promise.all(
      [...batch.groups.values()].map(async (g) => {
        const { commands, release } = WriteBatch.finish(g);
        if (await this.sendAll('write', commands, this.writeTimeoutMs)) release();
        // else: the bytes may still be queued on the socket; their buffers are left to the GC.
        else for (const e of g.entries) failed.add(e);
      }),
    );
    return failed.size === 0 ? [] : chunk.entries.filter((e) => failed.has(e));
  }

  /**
   * Sends commands back to back and waits for every reply (one round trip).
   * False when the server could not serve them (timeout, connection,
   * transient reply error: the store is marked down); a command failing for
   * its own reasons (e.g. WRONGTYPE on foreign data) is counted and ignored.
   */
  private async sendAll(op: string, commands: RawCommand[], timeoutMs: number): Promise<boolean> {
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

  // ---------------------------------------------------------------- internals

  /** Drops members whose hash is gone (expired), atomically re-checked in Redis. */
  private pruneMembers(setKey: string, tag: string, members: string[]): void {
    const keys = [setKey, ...members.map((m) => this.keys.resource(m, tag))];
    const script =
      "local n = 0 for i = 2, #KEYS do if redis.call('EXISTS', KEYS[i]) == 0 then n = n + redis.call('SREM', KEYS[1], ARGV[i - 1]) end end return n";
    void this.guard('getGlobMembers', this.client.eval(script, keys.length, ...keys, ...members), this.writeTimeoutMs);
  }

  /**
   * A stored record as a resource; `undefined` for an absent marker, an
   * expired or undecodable record (the latter counted). `copy`: copy the
   * bytes out of a large parser buffer, so one kept resource doesn't pin it.
   */
  private decode(key: string, record: Buffer, copy = true, strings?: StringTable): StoredResource | undefined {
    if (isAbsentRecord(record)) return undefined;
    const out = decodeRecord(key, record, strings);
    if (!out) {
      this.countError('decode');
      return undefined;
    }
    // Redis expiry is lazy; never serve an expired one.
    if (out.expiresAt !== undefined && !(out.expiresAt > Date.now())) return undefined;
    if (copy) out.resource = detach(out.resource);
    return out;
  }

  /**
   * Runs a pipeline under a deadline. `FAILED` = the server could not serve it
   * (timeout, connection, transient reply error; the store is marked down).
   * A command that failed for its own reasons (e.g. WRONGTYPE) is counted and
   * left in the result as its `Error`.
   */
  private async exec(op: string, p: ChainableCommander, timeoutMs: number): Promise<unknown[] | typeof FAILED> {
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
  private guard<T>(op: string, promise: Promise<T>, timeoutMs: number): Promise<T | typeof FAILED> {
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

  private failure(op: string, err: unknown): void {
    if (this.closed) return;
    this.countError(op);
    const e = err instanceof Error ? err : new Error(String(err));
    if (isPermanent(e)) {
      this.log?.debug({ op, err: e.message }, 'redis command error');
      return; // a bad command or data; the server itself is fine
    }
    this.markDown(e.message);
  }

  private connectionError(err: Error): void {
    if (this.closed) return;
    this.countError('connection');
    this.markDown(err.message);
  }

  private countError(op: string): void {
    try {
      this.onErrorCb?.(op);
    } catch {
      // a metrics callback must not break the store
    }
  }

  private markUp(reason: string): void {
    if (this.closed) return;
    this.probeFailures = 0;
    this.stopProbe();
    if (this.state !== 'up') {
      this.log?.info({ reason, previous: this.state }, 'redis available: shared cache in use');
      this.state = 'up';
    }
    for (const w of [...this.upWaiters]) w();
    if (this.pending.size > 0 && !this.flushing) void this.flushLoop();
  }

  private markDown(reason: string): void {
    if (this.closed) return;
    if (this.state !== 'down') {
      this.log?.warn({ reason, previous: this.state }, 'redis unavailable: bypassing shared cache until it recovers');
      this.state = 'down';
    }
    this.startProbe();
  }

  private startProbe(): void {
    if (this.probeTimer || this.closed) return;
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
    if (this.closed || this.state === 'up' || this.probing || this.client.status !== 'ready') return;
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
      if (++this.probeFailures >= PROBE_FAILURES_BEFORE_RECONNECT && !this.closed) {
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

  /** Like guard, without counting or changing health. */
  private guardSilent<T>(promise: Promise<T>, timeoutMs: number): Promise<T | typeof FAILED> {
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

  async close(): Promise<void> {
    if (this.closed) return;
    // Last chance for pending writes, bounded by the write deadline.
    if (this.healthy && (this.pending.size > 0 || this.flushing)) {
      await this.guardSilent(
        new Promise<void>((resolve) => {
          this.flushWaiters.push(resolve);
          if (!this.flushing) void this.flushLoop();
        }),
        this.writeTimeoutMs,
      );
    }
    this.closed = true;
    this.stopProbe();
    for (const w of [...this.upWaiters]) w();
    for (const w of this.flushWaiters.splice(0)) w();
    if (this.pending.size > 0) {
      this.log?.warn({ pending: this.pending.size }, 'redis store closed with unwritten pending writes');
      this.pending.clear();
    }
    await this.guardSilent(this.client.quit(), 1000);
    this.client.disconnect();
  }
}

/**
 * Builds a RedisStore from one connection string. Accepted forms:
 *
 *   redis://[[user]:password@]host[:port][/db]            standalone
 *   rediss://…                                            standalone over TLS
 *   redis+sentinel://[[user:]password@]host:port[,host:port…]/mastername[/db]
 *   rediss+sentinel://…                                   sentinel, TLS to sentinels and master
 *   redis+cluster://[[user:]password@]host:port[,host:port…]
 *   rediss+cluster://…                                    cluster over TLS
 *   host:port[,host:port…]                                cluster seed nodes (bare list)
 *
 * In the sentinel and cluster forms a userinfo without `:` is a password
 * (not a user name); it authenticates to the data nodes. Sentinels needing
 * their own password get it via `opts.sentinelPassword`. Ports default to 26379
 * for sentinels and 6379 otherwise; IPv6 hosts go in brackets (`[::1]:6379`).
 * Userinfo parts are percent-decoded. A string[] is a cluster node list.
 * (test/redis-sentinel.test.ts runs the sentinel form against real
 * redis-sentinel processes through a failover; a `requirepass` master was
 * checked by hand.)
 */
export function createRedisStore(spec: string | string[], opts: Omit<RedisStoreOptions, 'url' | 'cluster' | 'sentinel'> = {}): RedisStore {
  return new RedisStore({ ...opts, ...parseRedisSpec(spec) });
}

export type ParsedRedisSpec = Pick<RedisStoreOptions, 'url' | 'cluster' | 'sentinel' | 'username' | 'password' | 'tls'>;

export function parseRedisSpec(spec: string | string[]): ParsedRedisSpec {
  if (Array.isArray(spec)) return { cluster: spec.map((s) => s.trim()).filter(Boolean) };
  const s = spec.trim();
  if (/^rediss?:\/\//i.test(s)) return { url: s };
  const m = /^(rediss?)\+(sentinel|cluster):\/\/(.*)$/i.exec(s);
  if (!m) {
    if (/^[^/]+:\d+(,[^/]+:\d+)*$/.test(s)) return { cluster: s.split(',').map((h) => h.trim()) };
    throw new Error(`unsupported redis address ${JSON.stringify(spec)} (expected redis://, rediss://, redis+sentinel://, redis+cluster:// or host:port,…)`);
  }
  const tls = m[1]!.toLowerCase() === 'rediss';
  const kind = m[2]!.toLowerCase();
  let rest = m[3]!;
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  rest = slash < 0 ? '' : rest.slice(slash + 1);
  const at = authority.lastIndexOf('@');
  const hosts = (at < 0 ? authority : authority.slice(at + 1)).split(',').map((h) => h.trim()).filter(Boolean);
  if (hosts.length === 0) throw new Error(`redis address without hosts: ${JSON.stringify(spec)}`);
  const auth: Pick<RedisStoreOptions, 'username' | 'password'> = {};
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(':');
    if (colon < 0) auth.password = decodeURIComponent(userinfo);
    else {
      if (colon > 0) auth.username = decodeURIComponent(userinfo.slice(0, colon));
      auth.password = decodeURIComponent(userinfo.slice(colon + 1));
    }
  }
  const base: ParsedRedisSpec = { ...auth, ...(tls ? { tls: true } : {}) };
  if (kind === 'cluster') {
    if (rest.replace(/\/+$/, '') !== '') throw new Error(`redis+cluster address takes no path: ${JSON.stringify(spec)}`);
    return { ...base, cluster: hosts };
  }
  const [name, db, ...extra] = rest.split('/').filter((x, i) => x !== '' || i === 0);
  if (!name) throw new Error(`redis+sentinel address needs /mastername: ${JSON.stringify(spec)}`);
  if (extra.length > 0 || (db !== undefined && !/^\d+$/.test(db))) {
    throw new Error(`redis+sentinel path must be /mastername[/db]: ${JSON.stringify(spec)}`);
  }
  return {
    ...base,
    sentinel: {
      sentinels: hosts.map(parseHostPort(26379)),
      name: decodeURIComponent(name),
      ...(db !== undefined ? { db: Number(db) } : {}),
    },
  };
}

function parseHostPort(defaultPort: number): (s: string) => { host: string; port: number } {
  return (s) => {
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(s) ?? /^([^:]+)(?::(\d+))?$/.exec(s);
    if (!m) throw new Error(`bad redis node address ${JSON.stringify(s)} (host:port, [v6]:port)`);
    return { host: m[1]!, port: m[2] ? Number(m[2]) : defaultPort };
  };
}

/** A reply error about the command or data, not about the server's ability to serve. */
function isPermanent(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError' && !TRANSIENT_REPLY.test(err.message);
}

/** Copies a small slice out of a large socket/parser buffer so the cache doesn't pin the big one. */
function detach(b: Buffer): Buffer {
  return b.buffer.byteLength > 4096 && b.buffer.byteLength > 2 * b.length ? Buffer.from(b) : b;
}
