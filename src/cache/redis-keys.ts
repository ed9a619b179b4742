/**
 * Redis key layout of the shared cache tier (see redis-store.ts).
 *
 * With prefix P (default `xdstp-relay:`) and a hash tag T (below):
 *
 *   P r:{T}:<key>        STRING one resource record (redis-record.ts): version,
 *                              type URL, parent glob, expiry and the encoded envoy
 *                              Resource bytes, untouched. TTL'd resources carry a
 *                              Redis expiry (SET … PXAT expiresAt); others none.
 *                              Or, for a singleton URN or a glob key the upstream
 *                              reported as not existing, the one-byte known-absent
 *                              marker (redis-record.ts), in the same key.
 *   P m:{T}:<globKey>    SET   canonical keys of the glob collection's members.
 *
 * The warm-start index (so a warm start reads the relay's own data and never
 * walks the keyspace; redis-index.ts reads it, redis-write-batch.ts keeps it):
 *
 *   P i:{S}              SET   index shard of one cluster hash slot: an entry per
 *                              collection (`m:{T}:<globKey>`) and per loose record,
 *                              one not stored as a glob member (`r:{T}:<key>`),
 *                              whose tag T is in that slot. An entry is the Redis
 *                              key it stands for without the prefix. S is a short
 *                              tag of that very slot (redis-slots.ts), so a shard
 *                              shares the slot, the node and the write batch of
 *                              what it lists. Members are found through their
 *                              collection's member set, so a glob costs one entry.
 *   P i:slots            SET   slots whose shard may hold entries (never pruned:
 *                              at most 16384 small numbers).
 *   P i:complete         STRING present once every record under the prefix is in
 *                              the index: set by the first warm start that found
 *                              no index and built it by scanning (redis-warm-load.ts).
 *
 * Entries go stale when what they list vanishes by itself (a record's TTL, a
 * member set emptied by removals); the next reader drops them, after an atomic
 * re-check in Redis (same slot, so one script).
 *
 * (Absent markers were separate `P a:{T}:<key>` keys before; they are no
 * longer read or written, and old ones are left to whoever wrote them.)
 *
 * (The spaces above are only for readability: the real key is e.g.
 * `xdstp-relay:r:{3f2a9c0e11d4b7a5}:xdstp://auth/envoy.config.cluster.v3.Cluster/svc/a`.)
 *
 * Hash tag (Redis Cluster slot selection). Redis hashes only the text between
 * the FIRST `{` and the next `}` of a key. Canonical xdstp keys may contain both
 * `{` and `}` (the canonical form escapes neither, see XDSTP.md), and they can be
 * long, so the raw key can't be used as a tag. The tag is therefore the first 16
 * hex digits of SHA-1 of a "tag source" string: it contains no brace, has a fixed
 * length, and the prefix is forbidden to contain braces, so the tag is exactly
 * what we intend. Tag collisions only put two collections on the same slot; they
 * never mix data, because the full key follows the tag.
 *
 * Tag source: a collection's member set, its absent marker (`r:` of the glob key) and all of its
 * members share one tag, so reading a glob (SMEMBERS, then MGET of every
 * member) and writing it stay on one slot and can be pipelined in cluster mode.
 * The source is derived from the key ALONE, so `getResource(key)` finds a
 * resource without knowing whether it was stored as a glob member:
 *   - a glob key (`xdstp://A/T/p/*?ctx`): itself;
 *   - any other xdstp key: its parent glob (last id segment replaced by `*`,
 *     context parameters kept), which is by definition (XDSTP.md) the glob it
 *     is a direct member of;
 *   - anything else (`legacy:<typeUrl>:<name>`, malformed names): the key itself.
 */
import { createHash } from 'node:crypto';
import { slotOfTag, tagOfSlot } from './redis-slots';
import { bytesAt, writeAscii, type RespCommand } from './resp';

export const DEFAULT_PREFIX = 'xdstp-relay:';
export const TAG_LENGTH = 16;

/** Throws unless the prefix can be used in front of our hash tags. */
export function validatePrefix(prefix: string): void {
  if (prefix.includes('{') || prefix.includes('}')) {
    throw new Error(`redis key prefix must not contain '{' or '}' (it would break cluster hash tags): ${JSON.stringify(prefix)}`);
  }
}

/**
 * Parent glob of an xdstp key: its last id segment replaced by `*` (an id
 * without `/`, or an empty id, becomes `*`), query (context parameters) kept
 * verbatim. `undefined` when the key is not an `xdstp://` URN with a type.
 * Operates on the canonical string; no decoding is needed because `/` and `?`
 * inside components are percent-encoded in canonical form.
 */
export function parentGlobOf(key: string): string | undefined {
  if (!key.startsWith('xdstp://')) return undefined;
  const q = key.indexOf('?');
  const path = q < 0 ? key : key.slice(0, q);
  const query = q < 0 ? '' : key.slice(q);
  const authorityEnd = path.indexOf('/', 8);
  if (authorityEnd < 0 || authorityEnd === path.length - 1) return undefined; // no resource type
  const typeEnd = path.indexOf('/', authorityEnd + 1);
  if (typeEnd < 0) return `${path}/*${query}`; // empty id
  return `${path.slice(0, path.lastIndexOf('/') + 1)}*${query}`;
}

/** True for a glob collection key (`xdstp://A/T/…/*?ctx`). */
export function isGlobKey(key: string): boolean {
  return parentGlobOf(key) === key;
}

/** A glob split for isDirectMember: members come in runs of one glob, so the last one is kept. */
interface GlobShape {
  glob: string;
  /** The glob's path without its `*`, and its query (from the `?`). */
  head: string;
  query: string;
  /** The same as UTF-8 bytes, made when first asked for. */
  bytes?: { head: Buffer; query: Buffer };
  valid: boolean;
}
let memberOf: GlobShape | undefined;

function shapeOf(glob: string): GlobShape {
  if (memberOf?.glob !== glob) {
    const q = glob.indexOf('?');
    const pathEnd = q < 0 ? glob.length : q;
    const head = glob.slice(0, pathEnd - 1);
    const query = glob.slice(pathEnd);
    memberOf = { glob, head, query, valid: isGlobKey(glob) };
  }
  return memberOf;
}

/**
 * True when `glob` is the parent glob of `key` (`parentGlobOf(key) === glob`),
 * without building the parent: a member is the glob's path without its `*`,
 * then an id holding no `/` and no `?`, then the glob's query.
 */
export function isDirectMember(key: string, glob: string): boolean {
  const { head, query, valid } = shapeOf(glob);
  const idEnd = key.length - query.length;
  // Compared as slices, not with startsWith/endsWith: V8 compares two flat strings ~3x as fast on
  // ~60-character keys, and this runs for every resource written.
  if (valid && idEnd > head.length && key.slice(0, head.length) === head && (query.length === 0 || key.slice(idEnd) === query)) {
    const slash = key.indexOf('/', head.length);
    const q = key.indexOf('?', head.length);
    if ((slash < 0 || slash >= idEnd) && (q < 0 || q >= idEnd)) return true;
  }
  return parentGlobOf(key) === glob; // '/' or '?' in the id, or not under the glob's path: the slow, exact way
}

/**
 * isDirectMember of a key given as its UTF-8 bytes (a member set read as
 * buffers), decided on the bytes in the usual case: a warm start checks every
 * member it reads, and decoding each to compare it as a string cost more than
 * the record's own decoding. Anything unusual is decided on the string.
 */
export function isDirectMemberBytes(key: Buffer, glob: string): boolean {
  const shape = shapeOf(glob);
  shape.bytes ??= { head: Buffer.from(shape.head, 'utf8'), query: Buffer.from(shape.query, 'utf8') };
  const { head: headBytes, query: queryBytes } = shape.bytes;
  const valid = shape.valid;
  const idEnd = key.length - queryBytes.length;
  if (valid && idEnd > headBytes.length && bytesAt(key, 0, headBytes) && bytesAt(key, idEnd, queryBytes)) {
    // UTF-8 continuation bytes are ≥ 0x80, so a '/' or '?' byte is that character.
    for (let i = headBytes.length; i < idEnd; i++) if (key[i] === 0x2f || key[i] === 0x3f) return isDirectMember(key.toString('utf8'), glob);
    return true;
  }
  return isDirectMember(key.toString('utf8'), glob);
}

/** The string whose hash is the cluster hash tag of `key` (see the file comment). */
export function tagSourceOf(key: string): string {
  return parentGlobOf(key) ?? key;
}

export function hashTag(source: string): string {
  return createHash('sha1').update(source).digest('hex').slice(0, TAG_LENGTH);
}

/** Recently computed tags by tag source: a glob's members all share one, so a batch hashes each glob once. */
const tagMemo = new Map<string, string>();
const TAG_MEMO_MAX = 16_384;

/** Hash tag for any key: glob keys, resources and legacy keys alike. */
export function tagOf(key: string): string {
  return tagOfSource(tagSourceOf(key));
}

/** The last source asked for: writes come in runs of one glob's members (no hashing of the string then). */
let lastSource = '';
let lastTag = '';

/** Hash tag of a tag source (tagSourceOf), memoized. */
export function tagOfSource(source: string): string {
  if (source === lastSource) return lastTag;
  let tag = tagMemo.get(source);
  if (tag === undefined) {
    if (tagMemo.size >= TAG_MEMO_MAX) tagMemo.clear();
    tag = hashTag(source);
    tagMemo.set(source, tag);
  }
  lastSource = source;
  lastTag = tag;
  return tag;
}

export class RedisKeyLayout {
  readonly prefix: string;
  private readonly resourceHead: string;

  constructor(prefix: string = DEFAULT_PREFIX) {
    validatePrefix(prefix);
    this.prefix = prefix;
    this.resourceHead = `${prefix}r:{`;
  }

  /** STRING: the record of one resource, or the absent marker of a resource or glob (redis-record.ts). */
  resource(key: string, tag: string = tagOf(key)): string {
    return `${this.prefix}r:{${tag}}:${key}`;
  }

  /** SET of a glob's member keys. */
  members(globKey: string, tag: string = tagOf(globKey)): string {
    return `${this.prefix}m:{${tag}}:${globKey}`;
  }

  /** SET: the warm-start index shard of one hash slot. */
  indexShard(slot: number): string {
    return `${this.prefix}i:{${tagOfSlot(slot)}}`;
  }

  /** The index shard listing entries of tag `tag`. */
  indexShardOfTag(tag: string): string {
    return this.indexShard(slotOfTag(tag));
  }

  /** SET: slots whose index shard may hold entries. */
  get indexSlots(): string {
    return `${this.prefix}i:slots`;
  }

  /** STRING: present once every record under the prefix is in the index. */
  get indexComplete(): string {
    return `${this.prefix}i:complete`;
  }

  /** The Redis key an index entry stands for. */
  keyOfEntry(entry: string): string {
    return this.prefix + entry;
  }

  /** SCAN MATCH pattern of every resource record (and absent marker) under this prefix, and nothing else. */
  resourcePattern(): string {
    return `${escapeGlob(this.resourceHead)}${'?'.repeat(TAG_LENGTH)}}:*`;
  }

  /** Inverse of `resource()`: the canonical key, or `undefined` for a foreign Redis key. */
  keyOfResource(redisKey: string): string | undefined {
    const head = this.resourceHead.length;
    if (!redisKey.startsWith(this.resourceHead)) return undefined;
    if (redisKey[head + TAG_LENGTH] !== '}' || redisKey[head + TAG_LENGTH + 1] !== ':') return undefined;
    return redisKey.slice(head + TAG_LENGTH + 2);
  }
}

/** Index entry of a glob's member set. */
export function membersEntry(globKey: string, tag: string): string {
  return `m:{${tag}}:${globKey}`;
}

/** Index entry of a loose record (one not stored as a glob member). */
export function recordEntry(key: string, tag: string): string {
  return `r:{${tag}}:${key}`;
}

/** An index entry read back: what it lists, or undefined for one not of this layout. */
export function parseEntry(entry: string): { kind: 'm' | 'r'; tag: string; key: string } | undefined {
  const kind = entry[0];
  if ((kind !== 'm' && kind !== 'r') || entry[1] !== ':' || entry[2] !== '{') return undefined;
  if (entry[3 + TAG_LENGTH] !== '}' || entry[4 + TAG_LENGTH] !== ':') return undefined;
  return { kind, tag: entry.slice(3, 3 + TAG_LENGTH), key: entry.slice(5 + TAG_LENGTH) };
}

/** Writes the Redis keys of the layout (`<prefix><kind>:{<tag>}:<key>`) straight into commands. */
export class KeyWriter {
  private readonly prefix: Buffer;
  /**
   * `<prefix><kind>:{<tag>}:`, rewritten in place when the kind or the tag
   * changes: keys come in runs of one tag (a glob's members).
   */
  private readonly head: Buffer;
  private headKind = '';
  private headTag = '';

  constructor(
    private readonly layout: RedisKeyLayout,
    /** Cluster: commands need their first key as a string to be routed. */
    private readonly route: boolean,
  ) {
    this.prefix = Buffer.from(layout.prefix, 'utf8');
    this.head = Buffer.allocUnsafeSlow(this.prefix.length + 5 + TAG_LENGTH);
    this.prefix.copy(this.head, 0);
  }

  /** `key`: the canonical key, or its UTF-8 bytes (copied as they are). */
  write(cmd: RespCommand, kind: 'r' | 'm', key: string | Buffer, tag: string, keyLen = typeof key === 'string' ? Buffer.byteLength(key) : key.length): void {
    if (this.route && cmd.firstKey === undefined) {
      const k = typeof key === 'string' ? key : key.toString('utf8');
      cmd.firstKey = kind === 'r' ? this.layout.resource(k, tag) : this.layout.members(k, tag);
    }
    const head = this.headOf(kind, tag);
    let at = cmd.beginArg(head.length + keyLen);
    const b = cmd.target;
    b.set(head, at);
    at += head.length;
    if (typeof key === 'string') at += b.write(key, at, 'utf8');
    else {
      b.set(key, at);
      at += key.length;
    }
    cmd.endArg(at);
  }

  private headOf(kind: 'r' | 'm', tag: string): Buffer {
    const b = this.head;
    if (kind === this.headKind && tag === this.headTag) return b;
    let at = this.prefix.length;
    b[at++] = kind.charCodeAt(0);
    b[at++] = 0x3a; // ':'
    b[at++] = 0x7b; // '{'
    at = writeAscii(b, at, tag);
    b[at++] = 0x7d; // '}'
    b[at++] = 0x3a; // ':'
    if (at !== b.length) throw new Error(`hash tag of ${tag.length} characters, not ${TAG_LENGTH}`);
    this.headKind = kind;
    this.headTag = tag;
    return b;
  }
}

/** Escapes the characters special in Redis glob patterns (`* ? [ ] \`). */
export function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
