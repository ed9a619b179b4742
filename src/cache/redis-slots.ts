/**
 * Redis Cluster hash slots, computed here so the warm-start index
 * (redis-keys.ts) can keep one shard per slot: a shard then sits on the same
 * slot as the records it lists, and is written in the same per-slot batch.
 *
 * Redis hashes a key's tag with CRC16 (the XMODEM variant: polynomial 0x1021,
 * initial value 0) and keeps the low 14 bits: 16384 slots. Our tags are
 * ASCII (hex digits, or the short names below).
 */

export const SLOTS = 16384;

const CRC_TABLE = ((): Uint16Array => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** CRC16 (XMODEM) of an ASCII string. */
export function crc16(s: string): number {
  let crc = 0;
  for (let i = 0; i < s.length; i++) crc = ((crc << 8) & 0xffff) ^ CRC_TABLE[((crc >> 8) ^ s.charCodeAt(i)) & 0xff]!;
  return crc;
}

/** The slot of a key whose hash tag is `tag` (ASCII). */
export function slotOfTag(tag: string): number {
  return crc16(tag) & (SLOTS - 1);
}

let tagBySlot: string[] | undefined;

/**
 * A short tag that hashes to `slot`: the first base-36 number, counting from
 * 0, whose CRC16 lands there. Deterministic, so every relay names a slot's
 * shard alike. The table is built on first use (a few hundred thousand CRCs
 * of 3–4 characters).
 */
export function tagOfSlot(slot: number): string {
  if (tagBySlot === undefined) {
    const table: string[] = new Array<string>(SLOTS);
    let left = SLOTS;
    for (let n = 0; left > 0; n++) {
      const tag = n.toString(36);
      const s = slotOfTag(tag);
      if (table[s] === undefined) {
        table[s] = tag;
        left--;
      }
    }
    tagBySlot = table;
  }
  return tagBySlot[slot]!;
}
