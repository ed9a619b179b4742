/**
 * Turns one chunk of coalesced store operations (redis-store.ts) into a few
 * multi-key Redis commands, so a chunk of a thousand resources costs about
 * four commands in one round trip instead of several per resource:
 *
 *   MSET  records of stored resources without TTL, absent markers; either
 *         overwrites whatever the key held (a record or an absent marker)
 *   DEL   records of removed keys, absent markers of the globs that gain
 *         members, member sets of globs now absent
 *   SET … PXAT  one per resource with a TTL (it needs its own expiry)
 *   SADD / SREM  one per glob whose membership changed
 *   EVAL  the warm-start index (redis-keys.ts): adds an entry per glob that
 *         gains members and per loose record stored, removes the entries of
 *         globs and loose records marked absent or removed (one script, for
 *         any number of index shards)
 *   SADD  `i:slots`: the slots of the shards entries were added to
 *
 * MSET, like SET, clears any expiry a key had, so a resource that lost its
 * TTL also loses its Redis expiry. The commands are serialized in place
 * (resp.ts): each record is written once, straight into the MSET.
 *
 * Order: operations arrive latest-per-key, so within a chunk no two of them
 * are about the same resource; the commands above then commute — except for
 * a glob marked absent and a member operation on that same glob, whose order
 * decides the result. Such a pair starts a new segment: segments are sent
 * in order, each as its own set of commands.
 *
 * In cluster mode every multi-key command must stay on one slot: a batch
 * then keeps one group of commands per hash tag (all keys of a tag share a
 * slot), each sent to its node.
 */
import { ABSENT_RECORD, recordSize, writeRecord } from './redis-record';
import { KeyWriter, isDirectMember, isGlobKey, membersEntry, parentGlobOf, recordEntry, tagOf, tagOfSource, tagSourceOf, type RedisKeyLayout } from './redis-keys';
import { slotOfTag } from './redis-slots';
import { RespCommand, type BufferPool, type RawCommand } from './resp';
import type { StoredResource } from './types';

/** One coalesced pending operation, keyed by the URN / glob key it is about. */
export type Entry =
  | { kind: 'put'; key: string; res: StoredResource }
  | { kind: 'remove'; key: string; glob?: string }
  | { kind: 'absent'; key: string };

/**
 * Index upkeep of one segment: KEYS are the shards, one per operation, the
 * first ARGV[1] operations add their entry (ARGV[i + 1]) and the rest remove
 * theirs. In a cluster every shard of a batch group is on the group's slot.
 */
const INDEX_SCRIPT =
  "local adds = tonumber(ARGV[1]) for i = 1, #KEYS do if i <= adds then redis.call('SADD', KEYS[i], ARGV[i + 1]) else redis.call('SREM', KEYS[i], ARGV[i + 1]) end end return #KEYS";

/** Index entries a segment adds and removes, with the shard each lives in. */
class IndexOps {
  readonly addShards: string[] = [];
  readonly adds: string[] = [];
  readonly removeShards: string[] = [];
  readonly removes: string[] = [];

  command(pool: BufferPool, route: boolean): RespCommand {
    const shards = this.addShards.concat(this.removeShards);
    const cmd = new RespCommand('eval', pool, 1024 + (this.adds.length + this.removes.length) * 160);
    if (route) cmd.routing = ['', '1', shards[0]!];
    cmd.string(INDEX_SCRIPT);
    cmd.string(String(shards.length));
    for (const k of shards) cmd.string(k);
    cmd.string(String(this.adds.length));
    for (const e of this.adds) cmd.string(e);
    for (const e of this.removes) cmd.string(e);
    return cmd;
  }
}

class Segment {
  del: RespCommand | undefined;
  mset: RespCommand | undefined;
  readonly withExpiry: RespCommand[] = [];
  /** Glob key → its SADD / SREM. */
  readonly sadd = new Map<string, RespCommand>();
  readonly srem = new Map<string, RespCommand>();
  /** Globs with member operations in this segment. */
  readonly memberOps = new Set<string>();
  /** Globs whose absent marker (their `r:` key) this segment already deletes. */
  readonly absentCleared = new Set<string>();
  /** Globs marked absent in this segment. */
  readonly absentGlobs = new Set<string>();
  index: IndexOps | undefined;
  /** SADD of `i:slots`. */
  slots: RespCommand | undefined;

  all(pool: BufferPool, route: boolean): RespCommand[] {
    const out: RespCommand[] = [];
    if (this.del) out.push(this.del);
    if (this.mset) out.push(this.mset);
    out.push(...this.withExpiry, ...this.sadd.values(), ...this.srem.values());
    if (this.index) out.push(this.index.command(pool, route));
    if (this.slots) out.push(this.slots);
    return out;
  }
}

/** One slot's (cluster) or the whole chunk's (standalone) share of a batch. */
export class WriteGroup {
  readonly segments: Segment[] = [new Segment()];
  /** Entries with at least one command in this group (requeued if it fails). */
  readonly entries = new Set<Entry>();

  get current(): Segment {
    return this.segments[this.segments.length - 1]!;
  }

  /** The segment a member operation on `glob` may join. */
  forMemberOp(glob: string): Segment {
    if (this.current.absentGlobs.has(glob)) this.segments.push(new Segment());
    this.current.memberOps.add(glob);
    return this.current;
  }

  /** The segment marking `glob` absent may join. */
  forAbsentGlob(glob: string): Segment {
    if (this.current.memberOps.has(glob) || this.current.absentGlobs.has(glob)) this.segments.push(new Segment());
    this.current.absentGlobs.add(glob);
    return this.current;
  }

  /** Every command, in the order they must be sent. */
  commands(pool: BufferPool, route: boolean): RespCommand[] {
    return this.segments.flatMap((s) => s.all(pool, route));
  }
}

/**
 * The operations of one chunk as multi-key commands. `perSlot` (cluster):
 * one group per hash tag, since a multi-key command must stay on one slot;
 * otherwise one group for everything.
 */
export class WriteBatch {
  readonly groups = new Map<string, WriteGroup>();
  private readonly keyWriter: KeyWriter;
  /**
   * Where the previous put's member went. Puts come in runs of one glob's
   * members; a run then skips the per-glob set and map lookups. Valid while
   * its segment is current: marking that glob absent always starts a new one.
   */
  private lastMember: { glob: string; group: WriteGroup; segment: Segment; sadd: RespCommand } | undefined;
  /** Slots of the shards this batch adds index entries to (each listed once in `i:slots`). */
  private readonly slotsListed = new Set<number>();
  private readonly layout: RedisKeyLayout;

  constructor(
    keys: RedisKeyLayout,
    private readonly perSlot: boolean,
    private readonly pool: BufferPool,
    /** Expected size of the records (sizes the MSET buffer once). */
    private readonly bytesHint = 0,
    /** Expected number of operations (sizes the DEL buffer once). */
    private readonly entriesHint = 0,
  ) {
    this.keyWriter = new KeyWriter(keys, perSlot);
    this.layout = keys;
  }

  /** Adds the index entry of what `tag` names to `seg`'s upkeep, and its slot to `i:slots`. */
  private indexAdd(seg: Segment, entry: string, tag: string, e: Entry): void {
    const slot = slotOfTag(tag);
    const ops = (seg.index ??= new IndexOps());
    ops.addShards.push(this.layout.indexShard(slot));
    ops.adds.push(entry);
    if (this.slotsListed.has(slot)) return;
    this.slotsListed.add(slot);
    // In a cluster `i:slots` has a slot (and a group) of its own.
    const dir = this.perSlot ? this.group('i:slots', e).current : seg;
    if (!dir.slots) {
      dir.slots = new RespCommand('sadd', this.pool, 4096);
      if (this.perSlot) dir.slots.firstKey = this.layout.indexSlots;
      dir.slots.string(this.layout.indexSlots);
    }
    dir.slots.string(String(slot));
  }

  /** Removes the index entry of what `tag` names, in `seg`. */
  private indexRemove(seg: Segment, entry: string, tag: string): void {
    const ops = (seg.index ??= new IndexOps());
    ops.removeShards.push(this.layout.indexShardOfTag(tag));
    ops.removes.push(entry);
  }

  private group(tag: string, e: Entry): WriteGroup {
    const id = this.perSlot ? tag : '';
    let g = this.groups.get(id);
    if (!g) this.groups.set(id, (g = new WriteGroup()));
    g.entries.add(e);
    return g;
  }

  private del(seg: Segment): RespCommand {
    return (seg.del ??= new RespCommand('del', this.pool, this.perSlot ? 4096 : 64 * 1024 + this.entriesHint * 200));
  }

  private mset(seg: Segment): RespCommand {
    return (seg.mset ??= new RespCommand('mset', this.pool, this.perSlot ? 4096 : this.bytesHint + 64 * 1024));
  }

  private members(map: Map<string, RespCommand>, name: string, glob: string, gtag: string): RespCommand {
    let cmd = map.get(glob);
    if (!cmd) {
      map.set(glob, (cmd = new RespCommand(name, this.pool, 4096)));
      this.keyWriter.write(cmd, 'm', glob, gtag);
    }
    return cmd;
  }

  add(e: Entry): void {
    const kw = this.keyWriter;
    switch (e.kind) {
      case 'put': {
        const r = e.res;
        // A member's tag source is normally its glob (checked without building the parent glob).
        const source = r.glob !== undefined && isDirectMember(r.key, r.glob) ? r.glob : tagSourceOf(r.key);
        const tag = tagOfSource(source);
        const keyLen = Buffer.byteLength(r.key);
        if (r.glob !== undefined) {
          const gtag = r.glob === source ? tag : tagOf(r.glob);
          const g = this.group(gtag, e);
          const last = this.lastMember;
          let sadd: RespCommand;
          if (last !== undefined && last.glob === r.glob && last.group === g && last.segment === g.current) {
            // Same glob as the previous put, same segment: its SADD, and its glob's marker DEL, are already there.
            sadd = last.sadd;
          } else {
            const seg = g.forMemberOp(r.glob);
            sadd = this.members(seg.sadd, 'sadd', r.glob, gtag);
            if (!seg.absentCleared.has(r.glob)) {
              seg.absentCleared.add(r.glob);
              kw.write(this.del(seg), 'r', r.glob, gtag);
              this.indexAdd(seg, membersEntry(r.glob, gtag), gtag, e);
            }
            this.lastMember = { glob: r.glob, group: g, segment: seg, sadd };
          }
          const at = sadd.beginArg(keyLen);
          sadd.endArg(at + sadd.target.write(r.key, at, 'utf8'));
        }
        const seg = this.group(tag, e).current;
        const size = recordSize(r);
        let cmd: RespCommand;
        if (r.expiresAt === undefined) cmd = this.mset(seg);
        else seg.withExpiry.push((cmd = new RespCommand('set', this.pool, size + keyLen + 128)));
        if (r.glob === undefined) this.indexAdd(seg, recordEntry(r.key, tag), tag, e);
        kw.write(cmd, 'r', r.key, tag, keyLen);
        const at = cmd.beginArg(size);
        cmd.endArg(writeRecord(cmd.target, at, r));
        if (r.expiresAt !== undefined) {
          cmd.string('PXAT');
          cmd.string(String(Math.floor(r.expiresAt)));
        }
        // No DEL of an absent marker: it lived in this same key, now overwritten.
        return;
      }
      case 'remove': {
        const glob = e.glob ?? parentGlobOf(e.key);
        if (glob !== undefined && glob !== e.key) {
          const gtag = tagOf(glob);
          this.members(this.group(gtag, e).forMemberOp(glob).srem, 'srem', glob, gtag).string(e.key);
        }
        const tag = tagOf(e.key);
        const seg = this.group(tag, e).current;
        kw.write(this.del(seg), 'r', e.key, tag);
        // It may have been stored loose (by this or another relay): its index entry goes too.
        this.indexRemove(seg, recordEntry(e.key, tag), tag);
        return;
      }
      case 'absent': {
        const tag = tagOf(e.key);
        let seg: Segment;
        if (isGlobKey(e.key)) {
          seg = this.group(tag, e).forAbsentGlob(e.key);
          kw.write(this.del(seg), 'm', e.key, tag);
          this.indexRemove(seg, membersEntry(e.key, tag), tag);
        } else {
          const parent = parentGlobOf(e.key);
          if (parent !== undefined) {
            const ptag = tagOf(parent);
            this.members(this.group(ptag, e).forMemberOp(parent).srem, 'srem', parent, ptag).string(e.key);
          }
          seg = this.group(tag, e).current;
          this.indexRemove(seg, recordEntry(e.key, tag), tag);
        }
        // The marker replaces the record (MSET overwrites it and drops its expiry).
        const mset = this.mset(seg);
        kw.write(mset, 'r', e.key, tag);
        const at = mset.beginArg(ABSENT_RECORD.length);
        mset.target.set(ABSENT_RECORD, at);
        mset.endArg(at + ABSENT_RECORD.length);
        return;
      }
    }
  }

  /** The commands of one group, finished, in order. */
  finish(g: WriteGroup): { commands: RawCommand[]; release: () => void } {
    const built = g.commands(this.pool, this.perSlot);
    return { commands: built.map((c) => c.finish()), release: () => built.forEach((c) => c.release()) };
  }
}
