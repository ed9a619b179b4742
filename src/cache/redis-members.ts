/**
 * Fleet membership records in Redis, on the shared tier's connection.
 *
 * With prefix P:
 *
 *   P f:{fleet}:ids        SET    ids of members that wrote a record
 *   P f:{fleet}:m:<id>     STRING one member's record, expiring (PX) unless rewritten
 *
 * Every key carries the one hash tag `{fleet}`, so a Redis Cluster keeps them
 * on one slot and each read or write is one pipeline. An id whose record has
 * expired is dropped from the set by the next reader. The warm start never
 * lists these keys: its index and its fallback SCAN pattern (`P r:{…16 hex…}:*`)
 * hold only resource records and member sets.
 */
import type { Cluster, Redis } from 'ioredis';
import type { MemberRecord, MemberRecords } from './types';

export class RedisMemberRecords implements MemberRecords {
  private readonly ids: string;
  private readonly head: string;

  constructor(
    private readonly client: Redis | Cluster,
    prefix: string,
    private readonly timeoutMs: number,
  ) {
    this.ids = `${prefix}f:{fleet}:ids`;
    this.head = `${prefix}f:{fleet}:m:`;
  }

  async put(id: string, value: string, ttlMs: number): Promise<void> {
    const p = this.client.pipeline();
    p.set(this.head + id, value, 'PX', ttlMs);
    p.sadd(this.ids, id);
    await this.run('put', p.exec());
  }

  async remove(id: string): Promise<void> {
    const p = this.client.pipeline();
    p.del(this.head + id);
    p.srem(this.ids, id);
    await this.run('remove', p.exec());
  }

  async list(): Promise<MemberRecord[]> {
    const ids = await this.within('list', this.client.smembers(this.ids));
    if (ids.length === 0) return [];
    const p = this.client.pipeline();
    for (const id of ids) {
      p.get(this.head + id);
      p.pttl(this.head + id);
    }
    const replies = await this.run('list', p.exec());
    const out: MemberRecord[] = [];
    const gone: string[] = [];
    ids.forEach((id, i) => {
      const value = replies[2 * i];
      const ttl = replies[2 * i + 1];
      if (typeof value === 'string' && typeof ttl === 'number' && ttl > 0) out.push({ id, value, ttlLeftMs: ttl });
      else if (value === null) gone.push(id);
    });
    // Expired members leave the index; a member rewriting meanwhile re-adds itself with its next heartbeat.
    if (gone.length > 0) await this.within('list', this.client.srem(this.ids, ...gone)).catch(() => undefined);
    return out;
  }

  /** A pipeline's replies; rejects on its first error. */
  private async run(op: string, exec: Promise<Array<[Error | null, unknown]> | null>): Promise<unknown[]> {
    const results = await this.within(op, exec);
    if (results === null) throw new Error(`redis fleet ${op}: pipeline aborted`);
    return results.map(([err, v]) => {
      if (err) throw err;
      return v;
    });
  }

  private within<T>(op: string, promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis fleet ${op} timed out after ${this.timeoutMs} ms`)), this.timeoutMs);
      promise.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }
}
