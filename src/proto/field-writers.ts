import { lenFieldSize, putLen } from './wire';

/**
 * Writers for the fields both response encoders (delta-response.ts,
 * sotw-response.ts) put into their one preallocated buffer: repeated
 * already-encoded messages and strings. Each returns the position after
 * what it wrote.
 */

/** The bytes `messages` take as repeated length-delimited field `fieldNo`. */
export function repeatedBytesSize(fieldNo: number, messages: readonly Buffer[]): number {
  let size = 0;
  for (const m of messages) size += lenFieldSize(fieldNo, m.length);
  return size;
}

/** Writes `messages` as repeated field `fieldNo` at `pos`. */
export function putRepeatedBytes(out: Buffer, pos: number, fieldNo: number, messages: readonly Buffer[]): number {
  for (const m of messages) {
    pos = putLen(out, pos, fieldNo, m.length);
    pos += m.copy(out, pos);
  }
  return pos;
}

/** Writes `value`, `len` bytes in UTF-8, as field `fieldNo` at `pos`. */
export function putString(out: Buffer, pos: number, fieldNo: number, value: string, len: number): number {
  pos = putLen(out, pos, fieldNo, len);
  return pos + out.write(value, pos, 'utf8');
}
