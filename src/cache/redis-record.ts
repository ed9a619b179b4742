/**
 * The value stored under a resource's Redis key (see redis-keys.ts): one
 * STRING, either a record or a known-absent marker. The first byte says which.
 *
 * Known absent: the single byte ABSENT_FORMAT (2). It sits under the same key
 * a record would, so storing a resource is a plain overwrite (no separate
 * marker key to delete), reading one is a single GET, and marking a key absent
 * is a single SET. (Markers were separate `a:` keys before; a relay of that
 * version reads this byte as "not a record", i.e. not stored, and ignores it,
 * while this version never reads the old `a:` keys: a mixed fleet only loses
 * shared absent hits, never serves wrong data.)
 *
 * Record:
 *   byte 0          format, RECORD_FORMAT (1)
 *   u32 BE + bytes  version (UTF-8)
 *   u32 BE + bytes  type URL (UTF-8)
 *   u32 BE + bytes  canonical glob key the resource is a direct member of ('' = none)
 *   f64 BE          expiresAt, ms since the epoch (0 = no TTL)
 *   rest            the encoded envoy `Resource`, untouched
 *
 * Why a STRING and not a HASH of fields: one record is then one `SET`/`MGET`
 * operand, so a batch of writes is a single `MSET` and a warm start is an
 * `MGET` per page of keys. A hash with a 1 KB field is stored as a real hash table, and `HSET`
 * of such records runs at about a fifth of `SET` on the same server
 * (redis-benchmark, 1 KB values), which caps the tier far below Redis speed.
 */
import type { StoredResource } from './types';
import { bytesAt } from './resp';

export const RECORD_FORMAT = 1;
export const ABSENT_FORMAT = 2;
/** The value of a known-absent marker. */
export const ABSENT_RECORD: Buffer = Buffer.from([ABSENT_FORMAT]);

/** True for a known-absent marker (and nothing else). */
export function isAbsentRecord(b: Buffer): boolean {
  return b.length === 1 && b[0] === ABSENT_FORMAT;
}
const HEADER_FIXED = 1 + 4 + 4 + 4 + 8;

/**
 * UTF-8 bytes of the strings every record repeats (type URLs, glob keys): a
 * batch of a thousand members of one glob encodes them once, and copying
 * cached bytes is cheaper than encoding a string per record.
 */
const encoded = new Map<string, Buffer>();
const ENCODED_MAX = 4096;

function bytesOf(s: string): Buffer {
  let b = encoded.get(s);
  if (b === undefined) {
    if (encoded.size >= ENCODED_MAX) encoded.clear();
    b = Buffer.from(s, 'utf8');
    encoded.set(s, b);
  }
  return b;
}

/** Byte length of the record of `r`. */
export function recordSize(r: StoredResource): number {
  return HEADER_FIXED + Buffer.byteLength(r.version) + bytesOf(r.typeUrl).length + (r.glob === undefined ? 0 : bytesOf(r.glob).length) + r.resource.length;
}

function writeBytes(out: Buffer, pos: number, b: Buffer): number {
  out.writeUInt32BE(b.length, pos);
  out.set(b, pos + 4);
  return pos + 4 + b.length;
}

/** Writes the record of `r` at `pos` (room for recordSize(r) bytes must be there); returns the end. */
export function writeRecord(out: Buffer, pos: number, r: StoredResource): number {
  out[pos++] = RECORD_FORMAT;
  const vlen = r.version.length === 0 ? 0 : out.write(r.version, pos + 4, 'utf8');
  out.writeUInt32BE(vlen, pos);
  pos += 4 + vlen;
  pos = writeBytes(out, pos, bytesOf(r.typeUrl));
  if (r.glob === undefined) {
    out.writeUInt32BE(0, pos);
    pos += 4;
  } else pos = writeBytes(out, pos, bytesOf(r.glob));
  out.writeDoubleBE(r.expiresAt ?? 0, pos);
  pos += 8;
  out.set(r.resource, pos); // a plain typed-array copy: no intermediate view per record
  return pos + r.resource.length;
}

/** The record of `r` in a buffer of its own. */
export function encodeRecord(r: StoredResource): Buffer {
  const out = Buffer.allocUnsafe(recordSize(r));
  writeRecord(out, 0, r);
  return out;
}

/**
 * Strings decoded from records, shared between records. A warm start decodes
 * every stored record, and their type URLs and glob keys repeat (a handful of
 * types, a glob per thousand members): decoding each into its own string cost
 * CPU and kept two copies per resource alive in the cache. Looked up by a hash
 * of the bytes, confirmed byte for byte; bounded (cleared when full).
 */
export class StringTable {
  private readonly byHash = new Map<number, { bytes: Buffer; s: string }>();
  /** The two strings returned last: consecutive records repeat their type URL and glob (compared, not hashed). */
  private recent: { bytes: Buffer; s: string } | undefined;
  private older: { bytes: Buffer; s: string } | undefined;

  /** Where the last `sameAsLast` string was read from (a record still held by the caller), and the string. */
  private last: { b: Buffer; start: number; end: number; s: string } = { b: Buffer.alloc(0), start: 0, end: 0, s: '' };

  constructor(private readonly max = 4096) {}

  /**
   * Makes `s` the string returned for its bytes from now on (until they
   * leave the table): a caller comparing what it gets with `s` then compares
   * one string with itself.
   */
  expect(s: string): void {
    this.older = this.recent;
    this.recent = { bytes: Buffer.from(s, 'utf8'), s };
  }

  /**
   * The UTF-8 string of b[start, end), the previous call's string when the
   * bytes are the same: versions repeat from record to record when a control
   * plane versions everything at once, and are unique when it doesn't, so
   * only the last is remembered (where it was read, not a copy).
   */
  sameAsLast(b: Buffer, start: number, end: number): string {
    const l = this.last;
    const len = end - start;
    if (l.end - l.start === len) {
      let i = len - 1;
      while (i >= 0 && l.b[l.start + i] === b[start + i]) i--;
      if (i < 0) return l.s;
    }
    const s = b.toString('utf8', start, end);
    this.last = { b, start, end, s };
    return s;
  }

  /** The UTF-8 string of b[start, end). */
  get(b: Buffer, start: number, end: number): string {
    const len = end - start;
    const r = this.recent;
    if (r !== undefined && r.bytes.length === len && bytesAt(b, start, r.bytes)) return r.s;
    const o = this.older;
    if (o !== undefined && o.bytes.length === len && bytesAt(b, start, o.bytes)) {
      this.older = r;
      this.recent = o;
      return o.s;
    }
    const found = this.lookup(b, start, end);
    this.older = r;
    this.recent = found;
    return found.s;
  }

  private lookup(b: Buffer, start: number, end: number): { bytes: Buffer; s: string } {
    const len = end - start;
    let h = 0x811c9dc5 ^ len; // FNV-1a
    for (let i = start; i < end; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
    const hit = this.byHash.get(h);
    if (hit !== undefined && hit.bytes.length === len && bytesAt(b, start, hit.bytes)) return hit;
    const entry = { bytes: Buffer.from(b.subarray(start, end)), s: b.toString('utf8', start, end) }; // a copy: don't pin a reply buffer
    if (this.byHash.size >= this.max) this.byHash.clear();
    this.byHash.set(h, entry);
    return entry;
  }
}

/**
 * Decodes a record read back for `key`. `undefined` when the bytes are not a
 * record of this format (foreign or corrupt data, an absent marker). The
 * returned `resource` is a view into `b`; the caller decides whether to copy
 * it. `strings`: shares the type URL and glob strings with other records.
 */
export function decodeRecord(key: string, b: Buffer, strings?: StringTable): StoredResource | undefined {
  if (b.length < HEADER_FIXED || b[0] !== RECORD_FORMAT) return undefined;
  // Three length-prefixed fields: version, type URL, glob (no closure per record: this runs per warm-loaded resource).
  const v = 1 + 4;
  const vEnd = v + b.readUInt32BE(1);
  if (vEnd + 4 > b.length) return undefined;
  const t = vEnd + 4;
  const tEnd = t + b.readUInt32BE(vEnd);
  if (tEnd + 4 > b.length) return undefined;
  const g = tEnd + 4;
  const gEnd = g + b.readUInt32BE(tEnd);
  if (gEnd + 8 > b.length) return undefined;
  const version = strings ? strings.sameAsLast(b, v, vEnd) : b.toString('utf8', v, vEnd);
  const typeUrl = strings ? strings.get(b, t, tEnd) : b.toString('utf8', t, tEnd);
  const expiresAt = b.readDoubleBE(gEnd);
  const out: StoredResource = { key, typeUrl, version, resource: b.subarray(gEnd + 8) };
  if (expiresAt !== 0) out.expiresAt = expiresAt;
  if (gEnd > g) out.glob = strings ? strings.get(b, g, gEnd) : b.toString('utf8', g, gEnd);
  return out;
}
