/**
 * Warm start of a RedisStore: every live resource under the prefix, read
 * page by page through the index (redis-keys.ts, redis-index.ts), so the cost
 * follows the relay's own data, not the size of a shared keyspace. A Redis
 * written without the index is scanned once instead, and indexed on the way.
 */
import type Redis from 'ioredis';
import type { Cluster } from 'ioredis';
import type { StoredResource } from './types';
import { KeyWriter, isDirectMemberBytes, parseEntry, recordEntry, tagOf, type RedisKeyLayout } from './redis-keys';
import { BufferPool, RespCommand } from './resp';
import { StringTable } from './redis-record';
import { FAILED, type RedisConnection } from './redis-connection';
import { IndexBuilder, dropVanished, readIndexHead, readShards, slotsByNode } from './redis-index';

/**
 * One warm-start page: canonical keys and the hash tags of their records
 * (together their Redis keys), and the MGET of the records. `from`: the glob
 * each was listed under ('' = a loose record): a record is taken only from
 * the list its own glob field names, so one listed twice (stored loose, later
 * as a member) loads once. `sets`: the set that lists a key (an index shard
 * for a loose record, else its glob's member set), to drop it from there when
 * its record is gone ('' = not dropped).
 */
interface WarmPage {
  /** Canonical keys: strings, or UTF-8 bytes as a member set was read (made a string once its record is loaded). */
  names: Array<string | Buffer>;
  tags: string[];
  from?: string[];
  sets?: string[];
}
type WarmFetch = WarmPage & { values: Promise<Array<Buffer | null> | typeof FAILED> };

/** MGET pages of a warm load in flight at once. */
export const WARM_FETCHES_IN_FLIGHT = 4;
/** Records per MGET page of a warm load at most, and the COUNT of its SCAN of an unindexed Redis, unless told otherwise. */
export const WARM_PAGE_RECORDS = 1000;
/**
 * Records in a warm load's first MGET pages, cut before it has read any
 * record to size them by (up to WARM_FETCHES_IN_FLIGHT + 2 of them): few,
 * as the records may be large.
 */
export const WARM_FIRST_PAGE_RECORDS = 16;
/**
 * The reply a warm load's MGET page aims at. Redis spends far more CPU per
 * record on large replies than on small ones: with four pages in flight,
 * MGETs of 1,000 records of 1 KiB cost it ~3 µs per record and MGETs of 100
 * ~1.6 µs; of 4 KiB records, MGETs of 1,000 ~24 µs per record and of 50
 * ~2.9 µs. So a page holds as many records as fit in about this.
 */
const WARM_PAGE_BYTES = 128 * 1024;

/** Records per MGET page for records of `recordBytes` on average: about WARM_PAGE_BYTES of reply, 1 to WARM_PAGE_RECORDS. */
export function warmPageRecords(recordBytes: number): number {
  return Math.max(1, Math.min(WARM_PAGE_RECORDS, Math.floor(WARM_PAGE_BYTES / Math.max(1, recordBytes))));
}

/**
 * The size of a warm load's next pages: fixed when the caller chose one, else
 * by the records read so far (warmPageRecords). Exported for the bench's own
 * pass, which pages as the warm load does.
 */
export class WarmPageSize {
  records: number;
  private bytes = 0;
  private read = 0;

  constructor(private readonly fixed: number | undefined) {
    this.records = fixed ?? WARM_FIRST_PAGE_RECORDS;
  }

  /** A page's reply has come: `read` records of `bytes` in all. */
  observe(read: number, bytes: number): void {
    if (this.fixed !== undefined || read === 0) return;
    this.read += read;
    this.bytes += bytes;
    this.records = warmPageRecords(this.bytes / this.read);
  }
}

/** Member sets read per round trip (the next round is read while this one's pages are fetched). */
const GLOBS_PER_READ = 16;

/** What a warm load reads through. */
export interface WarmSource {
  readonly conn: RedisConnection;
  readonly keys: RedisKeyLayout;
  /** Deadline of one index read, SCAN page or MGET page. */
  readonly timeoutMs: number;
  /** A stored record as a resource, without copying its bytes; undefined for one not to load. */
  decode(key: string, record: Buffer, strings: StringTable): StoredResource | undefined;
}

/**
 * Warm start: streams every live resource under this prefix, in pages of
 * `count` records if given, else of about WARM_PAGE_BYTES each (sized by the
 * records read so far), one MGET per page, up to WARM_FETCHES_IN_FLIGHT pages
 * ahead of the decoding here, so Redis reads the next pages while this
 * process decodes one. Where the list of keys comes from:
 *  - the index, once it is complete (`i:complete`): the shards of the slots in
 *    `i:slots`, then each listed glob's member set (on a second connection,
 *    standalone). Entries whose records or member sets are gone are dropped
 *    from the index on the way;
 *  - otherwise (a Redis written by a relay without the index, or never written):
 *    SCAN MATCH `<prefix>r:{…}:*` on every master, on a second connection
 *    running ahead of the MGETs; each record read is indexed, and once the
 *    scan is through the index is marked complete, so later starts read it.
 * Waits up to `waitMs` for the first connection. Best effort: on an error or
 * timeout it logs, counts `onError('warmLoad')` and ends early — whatever was
 * yielded is valid, the rest is simply fetched on demand later. Expired
 * resources and absent markers are skipped (markers are consulted on demand).
 * Resources keep their `glob`, so the caller can rebuild glob membership.
 */
export async function* warmLoad(src: WarmSource, opts: { count?: number; waitMs?: number } = {}): AsyncGenerator<StoredResource[], void, undefined> {
  const { conn } = src;
  const size = new WarmPageSize(opts.count);
  if (!(await conn.waitUntilHealthy(opts.waitMs ?? 2000))) {
    if (!conn.closed) {
      conn.countError('warmLoad');
      conn.log?.warn('redis warm load skipped: redis not available');
    }
    return;
  }
  const head = await readIndexHead(conn, src.keys, src.timeoutMs);
  if (head === FAILED) return warmAborted(src, 0);
  const progress = { total: 0 };
  const fetcher = new RecordFetcher(src);
  if (head.complete) {
    // Standalone: the index is listed on a second connection, so its replies and the MGET
    // pages on the main one don't queue behind each other, nor a client's read-through.
    // (A cluster client routes the listing per slot; it stays on the main one.)
    const lister = conn.isCluster ? conn.client : await secondConnection(src, conn.client as Redis);
    try {
      for (const slots of slotsByNode(conn, head.slots)) {
        const ok = yield* decoded(src, fetcher, (send) => listIndexed(src, lister, slots, size, send), progress, size);
        if (!ok) return warmAborted(src, progress.total);
      }
    } finally {
      if (lister !== conn.client) (lister as Redis).disconnect();
    }
  } else {
    conn.log?.info('redis warm load: no complete index under this prefix; scanning for its records once, and indexing them');
    const builder = new IndexBuilder(conn, src.keys, src.timeoutMs);
    const nodes: Redis[] = conn.isCluster ? (conn.client as Cluster).nodes('master') : [conn.client as Redis];
    for (const node of nodes) {
      const ok = yield* decoded(src, fetcher, (send) => listScanned(src, node, opts.count ?? WARM_PAGE_RECORDS, size, send), progress, size, builder);
      if (!ok) return warmAborted(src, progress.total);
    }
    if (!(await builder.finish())) conn.log?.warn('redis warm load: the index could not be completed; the next start scans again');
  }
  conn.log?.info({ resources: progress.total }, 'redis warm load done');
}

/** Sends a page's MGET; resolves false when the load stopped (no more pages wanted). */
type Send = (page: WarmPage) => Promise<boolean>;
/** Lists pages through `send`; resolves false when listing failed. */
type Lister = (send: Send) => Promise<boolean>;

/**
 * Runs `list` as a task of its own, each page's MGET sent as soon as its keys
 * are known, and yields the pages' live resources in order; tells `size` what
 * each page read. Returns false when a page or the listing failed.
 */
async function* decoded(
  src: WarmSource,
  fetcher: RecordFetcher,
  list: Lister,
  progress: { total: number },
  size: WarmPageSize,
  builder?: IndexBuilder,
): AsyncGenerator<StoredResource[], boolean, undefined> {
  const queue: WarmFetch[] = [];
  let listFailed = false;
  let listFinished = false;
  let stop = false;
  let consumerWaiting: (() => void) | undefined;
  let listerWaiting: (() => void) | undefined;
  const wakeConsumer = (): void => {
    const w = consumerWaiting;
    consumerWaiting = undefined;
    w?.();
  };
  const wakeLister = (): void => {
    const w = listerWaiting;
    listerWaiting = undefined;
    w?.();
  };
  const send: Send = async (page) => {
    while (queue.length >= WARM_FETCHES_IN_FLIGHT && !stop) await new Promise<void>((resolve) => (listerWaiting = resolve));
    if (stop || src.conn.closed) return false;
    queue.push({ ...page, values: fetcher.fetch(page) });
    wakeConsumer();
    return true;
  };
  const listing = (async (): Promise<void> => {
    try {
      if (!(await list(send))) listFailed = true;
    } catch {
      listFailed = true; // not expected: commands go through guard/exec, which never throw
    } finally {
      listFinished = true;
      wakeConsumer();
    }
  })();
  const strings = new StringTable();
  let expected: string | undefined;
  try {
    for (;;) {
      const f = queue.shift();
      if (f === undefined) {
        if (listFinished) break;
        await new Promise<void>((resolve) => (consumerWaiting = resolve));
        continue;
      }
      wakeLister();
      const values = await f.values;
      if (values === FAILED) return false;
      const batch: StoredResource[] = [];
      const vanished = new Map<string, { members: string[]; checks: string[] }>();
      let read = 0;
      let bytes = 0;
      for (let i = 0; i < f.names.length; i++) {
        const v = values[i];
        if (v) {
          read++;
          bytes += v.length;
        } else {
          const set = f.sets?.[i];
          if (set) {
            const gone = vanished.get(set) ?? { members: [], checks: [] };
            vanished.set(set, gone);
            const name = nameOf(f.names[i]!);
            const tag = f.tags[i]!;
            gone.members.push(f.from![i] === '' ? recordEntry(name, tag) : name);
            gone.checks.push(src.keys.resource(name, tag));
          }
          continue;
        }
        const from = f.from?.[i];
        if (from && from !== expected) {
          strings.expect(from); // the record's glob field then decodes to this very string, compared below by identity
          expected = from;
        }
        const r = src.decode(nameOf(f.names[i]!), v, strings);
        if (!r) continue;
        if (from !== undefined && (r.glob ?? '') !== from) continue;
        batch.push(r);
        builder?.note(r, f.tags[i]!);
      }
      size.observe(read, bytes);
      for (const [set, gone] of vanished) dropVanished(src.conn, 'warmLoad', set, gone.members, gone.checks, src.timeoutMs);
      builder?.flush();
      if (batch.length > 0) {
        progress.total += batch.length;
        yield batch;
      }
      if (src.conn.closed) return false;
    }
    return !listFailed;
  } finally {
    // Stopped early (or done): let the listing settle before returning.
    stop = true;
    wakeLister();
    await listing;
  }
}

/** A page being filled. */
class PageBuilder {
  page: Required<WarmPage> = PageBuilder.empty();

  static empty(): Required<WarmPage> {
    return { names: [], tags: [], from: [], sets: [] };
  }

  add(name: string | Buffer, tag: string, from: string, set: string): number {
    const p = this.page;
    p.names.push(name);
    p.tags.push(tag);
    p.from.push(from);
    p.sets.push(set);
    return p.names.length;
  }

  take(): Required<WarmPage> {
    const p = this.page;
    this.page = PageBuilder.empty();
    return p;
  }
}

/**
 * Pages of what the index shards of `slots` (one node's) list: their loose
 * records, then the members of their globs.
 */
async function listIndexed(src: WarmSource, lister: Redis | Cluster, slots: number[], size: WarmPageSize, send: Send): Promise<boolean> {
  const { conn, keys } = src;
  const shards = await readShards(conn, lister, keys, slots, src.timeoutMs);
  if (shards === FAILED) return false;
  const pages = new PageBuilder();
  const flush = async (): Promise<boolean> => pages.page.names.length === 0 || send(pages.take());
  const globs: Array<{ shard: string; entry: string; tag: string; key: string }> = [];
  for (const { shard, entries } of shards) {
    for (const entry of entries) {
      const e = parseEntry(entry);
      if (e === undefined) continue;
      if (e.kind === 'm') {
        globs.push({ shard, entry, tag: e.tag, key: e.key });
        continue;
      }
      if (pages.add(e.key, e.tag, '', shard) >= size.records && !(await flush())) return true;
    }
  }
  const readMembers = (part: typeof globs): Promise<unknown[] | typeof FAILED> => {
    if (part.length === 0) return Promise.resolve([]);
    const p = lister.pipeline();
    for (const g of part) p.smembersBuffer(keys.keyOfEntry(g.entry)); // bytes: checked and written into MGETs as they are
    return conn.exec('warmLoad', p, src.timeoutMs);
  };
  let next = readMembers(globs.slice(0, GLOBS_PER_READ));
  for (let i = 0; i < globs.length; i += GLOBS_PER_READ) {
    const part = globs.slice(i, i + GLOBS_PER_READ);
    const sets = await next;
    if (sets === FAILED) return false;
    next = readMembers(globs.slice(i + GLOBS_PER_READ, i + 2 * GLOBS_PER_READ));
    for (let j = 0; j < part.length; j++) {
      const g = part[j]!;
      const members = sets[j];
      if (!Array.isArray(members)) continue; // not a set (counted by exec)
      const setKey = keys.keyOfEntry(g.entry);
      // An empty member set no longer exists: its entry goes (unless a member came back meanwhile).
      if (members.length === 0) dropVanished(conn, 'warmLoad', g.shard, [g.entry], [setKey], src.timeoutMs);
      for (const m of members as Buffer[]) {
        // Members normally share their glob's tag. One stored under another parent is read but never dropped
        // from here; in a cluster it is left to be read on demand (its slot may be on another node).
        const own = isDirectMemberBytes(m, g.key);
        if (!own && conn.isCluster) continue;
        if (pages.add(m, own ? g.tag : tagOf(m.toString('utf8')), g.key, own ? setKey : '') >= size.records && !(await flush())) return true;
      }
    }
  }
  await next; // settled before the lister ends
  return flush().then(() => true);
}

/**
 * Pages of every record under the prefix on `node`, listed by SCAN MATCH
 * (COUNT `scanCount`) on a second connection (as the index is listed), cut
 * to `size`.
 */
async function listScanned(src: WarmSource, node: Redis, scanCount: number, size: WarmPageSize, send: Send): Promise<boolean> {
  const { conn, keys } = src;
  const scanner = await secondConnection(src, node);
  const pattern = keys.resourcePattern();
  let names: string[] = [];
  let tags: string[] = [];
  const flush = (): Promise<boolean> => {
    const page = { names, tags };
    names = [];
    tags = [];
    return send(page);
  };
  try {
    let cursor = '0';
    do {
      if (conn.closed) return true;
      const page = await conn.guard('warmLoad', scanner.scan(cursor, 'MATCH', pattern, 'COUNT', scanCount), src.timeoutMs);
      if (page === FAILED) return false;
      cursor = page[0];
      for (const redisKey of page[1]) {
        const key = keys.keyOfResource(redisKey);
        if (key === undefined) continue;
        names.push(key);
        tags.push(redisKey.slice(redisKey.indexOf('{') + 1, redisKey.indexOf('}')));
        if (names.length >= size.records && !(await flush())) return true;
      }
    } while (cursor !== '0');
    if (names.length > 0) await flush(); // a stopped load (false) is no failure either
    return true;
  } finally {
    if (scanner !== node) scanner.disconnect();
  }
}

/** A second connection to `node` for listing keys; falls back to `node` itself when it can't connect quickly. */
async function secondConnection(src: WarmSource, node: Redis): Promise<Redis> {
  const dup = node.duplicate();
  dup.on('error', () => undefined);
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.min(src.timeoutMs, 2000));
    dup.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (ready && !src.conn.closed) return dup;
  dup.disconnect();
  return node;
}

/**
 * The MGETs of warm-start pages, written in place (resp.ts): the Redis key of
 * each record is written straight into the command from its canonical key and
 * tag, never built as a string. One MGET per page, or in a cluster one per
 * hash tag (slot), each routed to its node.
 */
class RecordFetcher {
  private readonly pool = new BufferPool();
  private readonly keyWriter: KeyWriter;

  constructor(private readonly src: WarmSource) {
    this.keyWriter = new KeyWriter(src.keys, src.conn.isCluster);
  }

  async fetch(page: WarmPage): Promise<Array<Buffer | null> | typeof FAILED> {
    const { names, tags } = page;
    if (!this.src.conn.isCluster) return this.mget(names.map((_, i) => i), names, tags);
    const byTag = new Map<string, number[]>();
    tags.forEach((tag, i) => {
      const g = byTag.get(tag);
      if (g) g.push(i);
      else byTag.set(tag, [i]);
    });
    const parts = await Promise.all(
      [...byTag.values()].map(async (idx): Promise<{ idx: number[]; values: Array<Buffer | null> | typeof FAILED }> => ({ idx, values: await this.mget(idx, names, tags) })),
    );
    const out: Array<Buffer | null> = new Array(names.length).fill(null);
    for (const { idx, values } of parts) {
      if (values === FAILED) return FAILED;
      for (let j = 0; j < idx.length; j++) out[idx[j]!] = values[j] ?? null;
    }
    return out;
  }

  /** One MGET of the records at `idx`. */
  private async mget(idx: number[], names: Array<string | Buffer>, tags: string[]): Promise<Array<Buffer | null> | typeof FAILED> {
    const { conn } = this.src;
    const cmd = new RespCommand('mget', this.pool, idx.length * (this.src.keys.prefix.length + 32 + (names[idx[0]!]?.length ?? 0) * 2));
    for (const i of idx) this.keyWriter.write(cmd, 'r', names[i]!, tags[i]!);
    const raw = cmd.finish();
    void conn.client.sendCommand(raw);
    const values = await conn.guard('warmLoad', raw.promise as Promise<Array<Buffer | null>>, this.src.timeoutMs);
    if (values !== FAILED) cmd.release(); // else the bytes may still be queued on the socket: left to the GC
    return values;
  }
}

/** A page's key as a string. */
function nameOf(name: string | Buffer): string {
  return typeof name === 'string' ? name : name.toString('utf8');
}

function warmAborted(src: WarmSource, total: number): void {
  src.conn.log?.warn({ resources: total }, 'redis warm load aborted early');
}
