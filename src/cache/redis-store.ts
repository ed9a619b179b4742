/**
 * `RedisStore`: the shared, persistent cache tier (docs/fleet.md, "Redis") on Redis
 * (standalone, Sentinel or Cluster) via ioredis. This file holds the store's
 * reads; the connection and its health are redis-connection.ts, the warm
 * start redis-warm-load.ts, the write backlog redis-write-queue.ts, the
 * connection string redis-spec.ts.
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
 *    `decode`, `probe`, `fleet` (membership records). Calls skipped because the store is unhealthy are not
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
import type { Logger } from 'pino';
import type { MemberRecords, SharedStore, StoreBatch, StoredResource } from './types';
import { RedisMemberRecords } from './redis-members';
import { DEFAULT_PREFIX, RedisKeyLayout, tagOf } from './redis-keys';
import { StringTable, decodeRecord, isAbsentRecord } from './redis-record';
import { FAILED, RedisConnection, type RedisConnectionOptions } from './redis-connection';
import { parseRedisSpec } from './redis-spec';
import { warmLoad } from './redis-warm-load';
import { dropVanished } from './redis-index';
import { RedisWriteQueue } from './redis-write-queue';

export interface RedisStoreOptions extends RedisConnectionOptions {
  /** Prefix of every key; must not contain `{` or `}`. Default `xdstp-relay:`. */
  prefix?: string;
  /** Deadline of one write pipeline (≤ 1000 keys / 8 MiB). Default max(4 × commandTimeoutMs, 1000 ms). */
  writeTimeoutMs?: number;
  /** Deadline of one index read, SCAN page or MGET page during `warmLoad`. Default 5000 ms. */
  warmTimeoutMs?: number;
  /** Max keys with a pending (not yet written) operation. Default 100 000. */
  maxPendingWrites?: number;
  logger?: Logger;
}

export class RedisStore implements SharedStore {
  readonly keys: RedisKeyLayout;
  private readonly conn: RedisConnection;
  private readonly writes: RedisWriteQueue;
  private readonly writeTimeoutMs: number;
  private readonly warmTimeoutMs: number;

  constructor(opts: RedisStoreOptions = {}) {
    this.keys = new RedisKeyLayout(opts.prefix ?? DEFAULT_PREFIX);
    const log = opts.logger?.child({ component: 'redis-store' });
    const readTimeoutMs = opts.commandTimeoutMs ?? 250;
    this.writeTimeoutMs = opts.writeTimeoutMs ?? Math.max(4 * readTimeoutMs, 1000);
    this.warmTimeoutMs = opts.warmTimeoutMs ?? 5000;
    // Replays the write backlog each time the store turns healthy.
    this.conn = new RedisConnection(opts, log, () => this.writes.replay());
    this.writes = new RedisWriteQueue(this.conn, this.keys, this.writeTimeoutMs, opts.maxPendingWrites ?? 100_000);
  }

  get healthy(): boolean {
    return this.conn.healthy;
  }

  private members: RedisMemberRecords | undefined;

  /** Fleet membership records (redis-members.ts) on this store's connection. */
  memberRecords(): MemberRecords {
    return (this.members ??= new RedisMemberRecords(this.conn, this.keys.prefix, this.writeTimeoutMs));
  }

  /** Resolves `true` once healthy, `false` after `timeoutMs` or on close. */
  waitUntilHealthy(timeoutMs: number): Promise<boolean> {
    return this.conn.waitUntilHealthy(timeoutMs);
  }

  // ---------------------------------------------------------------- reads

  async getResource(key: string): Promise<StoredResource | 'absent' | undefined> {
    if (!this.conn.healthy) return undefined;
    // One GET: the key holds the record or the absent marker.
    const record = await this.conn.guard('getResource', this.conn.client.getBuffer(this.keys.resource(key)), this.conn.readTimeoutMs);
    if (record === FAILED || !record) return undefined;
    if (isAbsentRecord(record)) return 'absent';
    return this.decode(key, record);
  }

  async getGlobMembers(globKey: string): Promise<StoredResource[] | 'absent' | undefined> {
    if (!this.conn.healthy) return undefined;
    const gtag = tagOf(globKey);
    const setKey = this.keys.members(globKey, gtag);
    const p = this.conn.client.pipeline();
    p.smembers(setKey);
    p.getBuffer(this.keys.resource(globKey, gtag)); // the glob's absent marker, if any
    const head = await this.conn.exec('getGlobMembers', p, this.conn.readTimeoutMs);
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
        const r = await this.conn.guard('getGlobMembers', this.conn.client.mgetBuffer(members.map((m) => this.keys.resource(m, t))), this.conn.readTimeoutMs);
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
    // Members whose record is gone (expired) leave the set, re-checked in Redis.
    dropVanished(this.conn, 'getGlobMembers', setKey, gone, gone.map((m) => this.keys.resource(m, gtag)), this.writeTimeoutMs);
    // Every listed member expired or vanished: we don't know the glob's state.
    return out.length > 0 ? out : undefined;
  }

  /**
   * Warm start: streams every live resource under this prefix, in pages of
   * about `count`; see redis-warm-load.ts. Resources keep their `glob`, so
   * the caller can rebuild glob membership.
   */
  warmLoad(opts: { count?: number; waitMs?: number } = {}): AsyncGenerator<StoredResource[], void, undefined> {
    const src = {
      conn: this.conn,
      keys: this.keys,
      timeoutMs: this.warmTimeoutMs,
      // A warm page keeps nearly every byte of the socket chunks it came in: no copy.
      decode: (key: string, record: Buffer, strings: StringTable) => this.decode(key, record, false, strings),
    };
    return warmLoad(src, opts);
  }

  // ---------------------------------------------------------------- writes

  /**
   * Queues the batch (removes, then absent markers, then puts; later ops on a
   * key replace earlier pending ones) and writes it. Resolves when the attempt
   * is over — at once while Redis is unavailable, and never later than
   * `writeTimeoutMs`. Never rejects. Callers don't need to await it.
   */
  write(batch: StoreBatch): Promise<void> {
    return this.writes.write(batch);
  }

  // ---------------------------------------------------------------- internals

  /**
   * A stored record as a resource; `undefined` for an absent marker, an
   * expired or undecodable record (the latter counted). `copy`: copy the
   * bytes out of a large parser buffer, so one kept resource doesn't pin it.
   */
  private decode(key: string, record: Buffer, copy = true, strings?: StringTable): StoredResource | undefined {
    if (isAbsentRecord(record)) return undefined;
    const out = decodeRecord(key, record, strings);
    if (!out) {
      this.conn.countError('decode');
      return undefined;
    }
    // Redis expiry is lazy; never serve an expired one.
    if (out.expiresAt !== undefined && !(out.expiresAt > Date.now())) return undefined;
    if (copy) out.resource = detach(out.resource);
    return out;
  }

  async close(): Promise<void> {
    if (this.conn.closed) return;
    // Last chance for pending writes, bounded by the write deadline.
    await this.writes.drain();
    this.conn.markClosed();
    this.writes.close();
    await this.conn.disconnect();
  }
}

/** Builds a RedisStore from one connection string (its forms: parseRedisSpec in redis-spec.ts). */
export function createRedisStore(spec: string | string[], opts: Omit<RedisStoreOptions, 'url' | 'cluster' | 'sentinel'> = {}): RedisStore {
  return new RedisStore({ ...opts, ...parseRedisSpec(spec) });
}

/** Copies a small slice out of a large socket/parser buffer so the cache doesn't pin the big one. */
function detach(b: Buffer): Buffer {
  return b.buffer.byteLength > 4096 && b.buffer.byteLength > 2 * b.length ? Buffer.from(b) : b;
}
