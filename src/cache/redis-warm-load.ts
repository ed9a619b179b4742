/**
 * Warm start of a RedisStore: every live resource under the prefix, read
 * page by page (SCAN on a second connection running ahead of the MGETs).
 */
import type Redis from 'ioredis';
import type { Cluster } from 'ioredis';
import type { StoredResource } from './types';
import type { RedisKeyLayout } from './redis-keys';
import { StringTable } from './redis-record';
import { FAILED, type RedisConnection } from './redis-connection';

/** One warm-start page: its canonical keys and the MGET of their records. */
type WarmFetch = { names: string[]; values: Promise<Array<Buffer | null> | typeof FAILED> };

const WARM_FETCHES_IN_FLIGHT = 4;

/** What a warm load reads through. */
export interface WarmSource {
  readonly conn: RedisConnection;
  readonly keys: RedisKeyLayout;
  /** Deadline of one SCAN page or MGET page. */
  readonly timeoutMs: number;
  /** A stored record as a resource, without copying its bytes; undefined for one not to load. */
  decode(key: string, record: Buffer, strings: StringTable): StoredResource | undefined;
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
export async function* warmLoad(src: WarmSource, opts: { count?: number; waitMs?: number } = {}): AsyncGenerator<StoredResource[], void, undefined> {
  const { conn, keys } = src;
  const count = opts.count ?? 1000;
  if (!(await conn.waitUntilHealthy(opts.waitMs ?? 2000))) {
    if (!conn.closed) {
      conn.countError('warmLoad');
      conn.log?.warn('redis warm load skipped: redis not available');
    }
    return;
  }
  const nodes: Redis[] = conn.isCluster ? (conn.client as Cluster).nodes('master') : [conn.client as Redis];
  const pattern = keys.resourcePattern();
  const strings = new StringTable();
  let total = 0;
  for (const node of nodes) {
    const scanner = await scanConnection(src, node);
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
          if (stop || conn.closed) return;
          const page = await conn.guard('warmLoad', scanner.scan(cursor, 'MATCH', pattern, 'COUNT', count), src.timeoutMs);
          if (page === FAILED) {
            scanFailed = true;
            return;
          }
          cursor = page[0];
          const names: string[] = [];
          const redisKeys: string[] = [];
          for (const redisKey of page[1]) {
            const key = keys.keyOfResource(redisKey);
            if (key === undefined) continue;
            names.push(key);
            redisKeys.push(redisKey);
          }
          if (names.length > 0 && !stop) {
            queue.push({ names, values: fetchRecords(src, node, redisKeys) });
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
        if (values === FAILED) return warmAborted(src, total);
        const batch: StoredResource[] = [];
        f.names.forEach((key, i) => {
          const v = values[i];
          const r = v ? src.decode(key, v, strings) : undefined;
          if (r) batch.push(r);
        });
        if (batch.length > 0) {
          total += batch.length;
          yield batch;
        }
        if (conn.closed) return;
      }
      if (scanFailed) return warmAborted(src, total);
    } finally {
      // Stopped early (or done): let a SCAN still under way settle before its connection goes.
      stop = true;
      wakeScanner();
      await scanning;
      if (scanner !== node) scanner.disconnect();
    }
  }
  conn.log?.info({ resources: total }, 'redis warm load done');
}

/**
 * A second connection to `node` for the warm start's SCAN, so its small
 * replies never wait behind the large MGET replies of the main connection.
 * Falls back to `node` itself when it can't connect quickly.
 */
async function scanConnection(src: WarmSource, node: Redis): Promise<Redis> {
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

/** Values of `redisKeys` on one node: one MGET, or in a cluster one MGET per slot (hash tag), pipelined. */
async function fetchRecords(src: WarmSource, node: Redis, redisKeys: string[]): Promise<Array<Buffer | null> | typeof FAILED> {
  if (!src.conn.isCluster) return src.conn.guard('warmLoad', node.mgetBuffer(redisKeys), src.timeoutMs);
  const byTag = new Map<string, number[]>();
  redisKeys.forEach((k, i) => {
    const tag = k.slice(k.indexOf('{') + 1, k.indexOf('}'));
    const g = byTag.get(tag);
    if (g) g.push(i);
    else byTag.set(tag, [i]);
  });
  const p = node.pipeline();
  for (const idx of byTag.values()) p.mgetBuffer(idx.map((i) => redisKeys[i]!));
  const res = await src.conn.exec('warmLoad', p, src.timeoutMs);
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

function warmAborted(src: WarmSource, total: number): void {
  src.conn.log?.warn({ resources: total }, 'redis warm load aborted early');
}
