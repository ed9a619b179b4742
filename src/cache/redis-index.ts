/**
 * The warm-start index of a RedisStore (layout: redis-keys.ts): reading its
 * head and shards, dropping stale entries, and building it for a Redis that a
 * relay without the index wrote. Its upkeep on every write is in
 * redis-write-batch.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import { membersEntry, recordEntry, tagOf, type RedisKeyLayout } from './redis-keys';
import { FAILED, type RedisConnection } from './redis-connection';
import { SLOTS, slotOfTag } from './redis-slots';
import type { StoredResource } from './types';

/**
 * Drops each of ARGV from the set KEYS[1] whose key (KEYS[i + 1], same
 * position) no longer exists: a member whose record expired, an index entry
 * whose record or member set is gone. Re-checked in Redis, atomically, so an
 * entry written back meanwhile stays.
 */
const DROP_VANISHED_SCRIPT =
  "local n = 0 for i = 2, #KEYS do if redis.call('EXISTS', KEYS[i]) == 0 then n = n + redis.call('SREM', KEYS[1], ARGV[i - 1]) end end return n";

/**
 * Drops from `setKey` those of `members` whose key in `checks` (same
 * position) no longer exists. All keys on one slot. Fire and forget: a failure
 * only leaves the entries for the next reader.
 */
export function dropVanished(conn: RedisConnection, op: string, setKey: string, members: string[], checks: string[], timeoutMs: number): void {
  if (members.length === 0) return;
  void conn.guard(op, conn.client.eval(DROP_VANISHED_SCRIPT, checks.length + 1, setKey, ...checks, ...members), timeoutMs);
}

/** What a warm start learns first: whether the index covers every record, and which slots' shards to read. */
export interface IndexHead {
  complete: boolean;
  slots: number[];
}

export async function readIndexHead(conn: RedisConnection, keys: RedisKeyLayout, timeoutMs: number): Promise<IndexHead | typeof FAILED> {
  // Two commands, not a pipeline: in a cluster the two keys live on different slots.
  const [slots, complete] = await Promise.all([
    conn.guard('warmLoad', conn.client.smembers(keys.indexSlots), timeoutMs),
    conn.guard('warmLoad', conn.client.exists(keys.indexComplete), timeoutMs),
  ]);
  if (slots === FAILED || complete === FAILED) return FAILED;
  const valid = slots.map(Number).filter((s) => Number.isInteger(s) && s >= 0 && s < SLOTS);
  return { complete: complete === 1, slots: valid.sort((a, b) => a - b) };
}

/**
 * Slots grouped by the node that serves them, so each group can be read
 * with one pipeline (a cluster pipeline must stay on one node); one group
 * for a standalone Redis.
 */
export function slotsByNode(conn: RedisConnection, slots: number[]): number[][] {
  if (!conn.isCluster) return slots.length > 0 ? [slots] : [];
  const table = (conn.client as Cluster).slots;
  const groups = new Map<string, number[]>();
  for (const s of slots) {
    const owner = table[s]?.join(',') ?? '';
    const g = groups.get(owner);
    if (g) g.push(s);
    else groups.set(owner, [s]);
  }
  return [...groups.values()];
}

/** The entries of the shards of `slots` (all served by one node), one pipeline on `via` (the store's client, or a second connection). */
export async function readShards(
  conn: RedisConnection,
  via: Redis | Cluster,
  keys: RedisKeyLayout,
  slots: number[],
  timeoutMs: number,
): Promise<Array<{ shard: string; entries: string[] }> | typeof FAILED> {
  const p = via.pipeline();
  const shards = slots.map((s) => keys.indexShard(s));
  for (const shard of shards) p.smembers(shard);
  const res = await conn.exec('warmLoad', p, timeoutMs);
  if (res === FAILED) return FAILED;
  // A shard that is not a set (foreign data) was counted by exec; skip it.
  return shards.map((shard, i) => ({ shard, entries: Array.isArray(res[i]) ? (res[i] as string[]) : [] }));
}

/**
 * Builds the index while a warm start scans a Redis that has none: the entry
 * of each record read (its glob's, once per glob, or its own), added page by
 * page. `finish` marks the index complete when every page was indexed.
 */
export class IndexBuilder {
  private readonly globs = new Set<string>();
  private readonly slots = new Set<number>();
  private readonly sent: Array<Promise<unknown>> = [];
  private failed = false;
  private shards = new Map<string, string[]>();
  private newSlots: string[] = [];

  constructor(
    private readonly conn: RedisConnection,
    private readonly keys: RedisKeyLayout,
    private readonly timeoutMs: number,
  ) {}

  /** A record read under `tag` (its Redis key's). */
  note(r: StoredResource, tag: string): void {
    let entry: string;
    let entryTag: string;
    if (r.glob !== undefined) {
      if (this.globs.has(r.glob)) return;
      this.globs.add(r.glob);
      entryTag = tagOf(r.glob);
      entry = membersEntry(r.glob, entryTag);
    } else {
      entryTag = tag;
      entry = recordEntry(r.key, tag);
    }
    const slot = slotOfTag(entryTag);
    const shard = this.keys.indexShard(slot);
    const list = this.shards.get(shard);
    if (list) list.push(entry);
    else this.shards.set(shard, [entry]);
    if (!this.slots.has(slot)) {
      this.slots.add(slot);
      this.newSlots.push(String(slot));
    }
  }

  /** Sends what was noted since the last flush (one command per shard: in a cluster each is routed to its slot). */
  flush(): void {
    const c = this.conn.client;
    const track = (p: Promise<unknown>): void => {
      this.sent.push(this.conn.guard('warmLoad', p, this.timeoutMs).then((r) => (r === FAILED ? (this.failed = true) : undefined)));
    };
    for (const [shard, entries] of this.shards) track(c.sadd(shard, ...entries));
    if (this.newSlots.length > 0) track(c.sadd(this.keys.indexSlots, ...this.newSlots));
    this.shards = new Map();
    this.newSlots = [];
  }

  /** The scan read every record: once every page is indexed, the index is marked complete. */
  async finish(): Promise<boolean> {
    this.flush();
    await Promise.all(this.sent);
    if (this.failed) return false;
    return (await this.conn.guard('warmLoad', this.conn.client.set(this.keys.indexComplete, '1'), this.timeoutMs)) !== FAILED;
  }
}
