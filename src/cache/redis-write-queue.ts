/**
 * The write side of a RedisStore: a coalescing backlog (latest operation per
 * key, in write order, at most `maxPendingWrites` keys) written in chunks of
 * a few multi-key commands, replayed when Redis is back after an outage.
 */
import type { StoreBatch } from './types';
import type { RedisKeyLayout } from './redis-keys';
import type { RedisConnection } from './redis-connection';
import { WriteBatch, type Entry } from './redis-write-batch';
import { BufferPool } from './resp';

const WRITE_CHUNK_ENTRIES = 1000;
const WRITE_CHUNK_BYTES = 8 << 20;
const WRITE_CHUNKS_IN_FLIGHT = 3;

export class RedisWriteQueue {
  private pending = new Map<string, Entry>();
  private flushing = false;
  private flushWaiters: Array<() => void> = [];
  private droppedThisOutage = false;
  /** Reused buffers of the write commands (resp.ts). */
  private readonly buffers = new BufferPool();

  constructor(
    private readonly conn: RedisConnection,
    private readonly keys: RedisKeyLayout,
    /** Deadline of one write pipeline; a write() resolves no later. */
    private readonly writeTimeoutMs: number,
    private readonly maxPending: number,
  ) {}

  /**
   * Queues the batch (removes, then absent markers, then puts; later ops on a
   * key replace earlier pending ones) and writes it. Resolves when the attempt
   * is over — at once while Redis is unavailable, and never later than
   * `writeTimeoutMs`. Never rejects. Callers don't need to await it.
   */
  write(batch: StoreBatch): Promise<void> {
    if (this.conn.closed) return Promise.resolve();
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
    if (!this.conn.healthy) return Promise.resolve();
    const flushed = new Promise<void>((resolve) => {
      this.flushWaiters.push(resolve);
      if (!this.flushing) void this.flushLoop();
    });
    // Normally resolves when this batch is written; never later than the write
    // deadline (e.g. behind a long backlog replay — the batch stays queued).
    return this.conn.guardSilent(flushed, this.writeTimeoutMs).then(() => undefined);
  }

  /** Writes the backlog kept through an outage (the store just turned healthy). */
  replay(): void {
    if (this.pending.size > 0 && !this.flushing) void this.flushLoop();
  }

  /** Last chance for pending writes before closing, bounded by the write deadline. */
  async drain(): Promise<void> {
    if (this.conn.healthy && (this.pending.size > 0 || this.flushing)) {
      await this.conn.guardSilent(
        new Promise<void>((resolve) => {
          this.flushWaiters.push(resolve);
          if (!this.flushing) void this.flushLoop();
        }),
        this.writeTimeoutMs,
      );
    }
  }

  /** The store is closed: waiters wake, what is still pending is dropped (logged). */
  close(): void {
    for (const w of this.flushWaiters.splice(0)) w();
    if (this.pending.size > 0) {
      this.conn.log?.warn({ pending: this.pending.size }, 'redis store closed with unwritten pending writes');
      this.pending.clear();
    }
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
    this.conn.countError('write-dropped');
    if (!this.droppedThisOutage) {
      this.droppedThisOutage = true;
      this.conn.log?.warn({ maxPendingWrites: this.maxPending }, 'redis write backlog full: dropping oldest pending writes; shared cache may hold stale entries');
    }
    for (const k of this.pending.keys()) {
      if (drop-- <= 0) break;
      this.pending.delete(k);
    }
  }

  private async flushLoop(): Promise<void> {
    this.flushing = true;
    try {
      while (this.pending.size > 0 && this.conn.healthy) {
        const waiters = this.flushWaiters;
        this.flushWaiters = [];
        const entries = [...this.pending.values()];
        this.pending = new Map();
        const failed = await this.flushEntries(entries);
        for (const w of waiters) w();
        if (failed.length > 0) {
          // Kept for replay; replay() (reconnect / probe) or the next write restarts the loop.
          this.requeue(failed);
          break;
        }
      }
      if (this.pending.size === 0) this.droppedThisOutage = false;
    } catch (err) {
      // Not expected (flushEntries never throws); keep the loop restartable.
      this.conn.log?.error({ err }, 'redis flush loop failed');
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
        if (f.length > 0 || !this.conn.healthy) {
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
    const batch = new WriteBatch(this.keys, this.conn.isCluster, this.buffers, chunk.bytes + chunk.entries.length * 256, chunk.entries.length);
    for (const e of chunk.entries) batch.add(e);
    const failed = new Set<Entry>();
    await Promise.all(
      [...batch.groups.values()].map(async (g) => {
        const { commands, release } = batch.finish(g);
        if (await this.conn.sendAll('write', commands, this.writeTimeoutMs)) release();
        // else: the bytes may still be queued on the socket; their buffers are left to the GC.
        else for (const e of g.entries) failed.add(e);
      }),
    );
    return failed.size === 0 ? [] : chunk.entries.filter((e) => failed.has(e));
  }
}
