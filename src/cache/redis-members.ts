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
import type { ChainableCommander } from 'ioredis';
import { FAILED, type RedisConnection } from './redis-connection';
import type { MemberRecord, MemberRecords } from './types';

/**
 * On the store's connection and under its deadlines: a failure is counted in
 * `xdstp_relay_redis_errors_total{op="fleet"}` and a server that does not
 * answer is marked down, as for the store's own commands.
 */
export class RedisMemberRecords implements MemberRecords {
  private readonly ids: string;
  private readonly head: string;

  constructor(
    private readonly conn: RedisConnection,
    prefix: string,
    private readonly timeoutMs: number,
  ) {
    this.ids = `${prefix}f:{fleet}:ids`;
    this.head = `${prefix}f:{fleet}:m:`;
  }

  async put(id: string, value: string, ttlMs: number): Promise<void> {
    const p = this.conn.client.pipeline();
    p.set(this.head + id, value, 'PX', ttlMs);
    p.sadd(this.ids, id);
    await this.run('put', p);
  }

  async remove(id: string): Promise<void> {
    const p = this.conn.client.pipeline();
    p.del(this.head + id);
    p.srem(this.ids, id);
    await this.run('remove', p);
  }

  async list(): Promise<MemberRecord[]> {
    const [ids] = await this.run('list', this.conn.client.pipeline().smembers(this.ids));
    if (!Array.isArray(ids) || ids.length === 0) return [];
    const p = this.conn.client.pipeline();
    for (const id of ids) {
      p.get(this.head + String(id));
      p.pttl(this.head + String(id));
    }
    const replies = await this.run('list', p);
    const out: MemberRecord[] = [];
    const gone: string[] = [];
    ids.forEach((raw, i) => {
      const id = String(raw);
      const value = replies[2 * i];
      const ttl = replies[2 * i + 1];
      if (typeof value === 'string' && typeof ttl === 'number' && ttl > 0) out.push({ id, value, ttlLeftMs: ttl });
      else if (value === null) gone.push(id);
    });
    // Expired members leave the index; a member rewriting meanwhile re-adds itself with its next heartbeat.
    if (gone.length > 0) await this.run('list', this.conn.client.pipeline().srem(this.ids, ...gone)).catch(() => undefined);
    return out;
  }

  /** A pipeline's replies; rejects when the server could not serve it or a command failed. */
  private async run(op: string, p: ChainableCommander): Promise<unknown[]> {
    const replies = await this.conn.exec('fleet', p, this.timeoutMs);
    if (replies === FAILED) throw new Error(`redis fleet ${op}: the shared tier did not answer within ${this.timeoutMs} ms or is down`);
    const failed = replies.find((r): r is Error => r instanceof Error);
    if (failed) throw new Error(`redis fleet ${op}: ${failed.message}`);
    return replies;
  }
}
