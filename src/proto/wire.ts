/**
 * Just enough of the protobuf wire format to pass resources through without
 * decoding their payloads: scan a message's top-level fields as byte slices,
 * and write length-delimited fields. Keeping the upstream's bytes as slices is
 * what lets the relay forward an `Any` untouched and share response bytes.
 */
import { isUtf8 } from 'node:buffer';

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_I32 = 5;

export class WireError extends Error {}

export interface WireField {
  field: number;
  wireType: number;
  /** Start of the whole field (tag included) in the scanned buffer. */
  start: number;
  /** End of the whole field (exclusive). */
  end: number;
  /** For length-delimited fields: the payload range; for varints: the value. */
  valueStart: number;
  valueEnd: number;
  varint: number;
}

/**
 * Reads a message's top-level fields one at a time: `next()` moves to the
 * next field and fills in this object's WireField properties. One object per
 * message read, where a visitor also costs a closure and its context: the
 * relay reads a client's requests so, one per response it ACKs. Throws
 * WireError on a malformed message.
 */
export class FieldReader implements WireField {
  field = 0;
  wireType = 0;
  start = 0;
  end = 0;
  valueStart = 0;
  valueEnd = 0;
  varint = 0;
  private pos = 0;

  constructor(private readonly buf: Uint8Array) {}

  /** Moves to the next field; false at the end of the message. */
  next(): boolean {
    const buf = this.buf;
    if (this.pos >= buf.length) return false;
    const start = this.pos;
    const tag = this.readVarint();
    const wireType = tag % 8;
    const fieldNo = Math.floor(tag / 8);
    if (fieldNo === 0) throw new WireError('field number 0');
    let valueStart = this.pos;
    let valueEnd = this.pos;
    let varint = 0;
    switch (wireType) {
      case WIRE_VARINT:
        varint = this.readVarint();
        valueEnd = this.pos;
        break;
      case WIRE_I64:
        this.pos += 8;
        valueEnd = this.pos;
        break;
      case WIRE_I32:
        this.pos += 4;
        valueEnd = this.pos;
        break;
      case WIRE_LEN: {
        const len = this.readVarint();
        valueStart = this.pos;
        valueEnd = valueStart + len;
        this.pos = valueEnd;
        break;
      }
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > buf.length) throw new WireError('truncated field');
    this.field = fieldNo;
    this.wireType = wireType;
    this.start = start;
    this.end = this.pos;
    this.valueStart = valueStart;
    this.valueEnd = valueEnd;
    this.varint = varint;
    return true;
  }

  private readVarint(): number {
    const buf = this.buf;
    let pos = this.pos;
    let result = 0;
    let shift = 0;
    for (;;) {
      if (pos >= buf.length) throw new WireError('truncated varint');
      const b = buf[pos++];
      // Values above 2^53 lose precision, which only matters for ints we never read.
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) break;
      shift += 7;
      if (shift > 63) throw new WireError('varint too long');
    }
    this.pos = pos;
    return result;
  }
}

/** Calls `visit` for each top-level field of a message; throws WireError on malformed input. */
export function scanFields(buf: Uint8Array, visit: (f: WireField) => void): void {
  const fields = new FieldReader(buf);
  while (fields.next()) visit(fields);
}

export function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

export function writeVarint(target: Uint8Array, pos: number, n: number): number {
  while (n >= 0x80) {
    target[pos++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  target[pos++] = n;
  return pos;
}

/** Encodes one length-delimited field (tag + length + bytes). */
export function lenField(fieldNo: number, payload: Uint8Array): Buffer {
  const tag = fieldNo * 8 + WIRE_LEN;
  const out = Buffer.allocUnsafe(varintSize(tag) + varintSize(payload.length) + payload.length);
  let pos = writeVarint(out, 0, tag);
  pos = writeVarint(out, pos, payload.length);
  out.set(payload, pos);
  return out;
}

export function stringField(fieldNo: number, value: string): Buffer {
  return lenField(fieldNo, Buffer.from(value, 'utf8'));
}

export function decodeUtf8(buf: Uint8Array, start: number, end: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('utf8');
}

/** Size of one length-delimited field of `len` payload bytes, tag included. */
export function lenFieldSize(fieldNo: number, len: number): number {
  return varintSize(fieldNo * 8 + WIRE_LEN) + varintSize(len) + len;
}

/** Writes the tag and length of a length-delimited field; returns where its payload goes. */
export function putLen(out: Buffer, pos: number, fieldNo: number, len: number): number {
  pos = writeVarint(out, pos, fieldNo * 8 + WIRE_LEN);
  return writeVarint(out, pos, len);
}

/** A varint field (tag + value). */
export function varintField(fieldNo: number, value: number): Buffer {
  const tag = fieldNo * 8 + WIRE_VARINT;
  const out = Buffer.allocUnsafe(varintSize(tag) + varintSize(value));
  writeVarint(out, writeVarint(out, 0, tag), value);
  return out;
}

function isAscii(buf: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (buf[i] > 0x7f) return false;
  return true;
}

/**
 * The last few distinct strings decoded from the wire, by their bytes: a
 * string that every message repeats (a type URL) is then matched, not
 * decoded, and every message shares one copy of it.
 */
export class RecentStrings {
  private readonly recent: Array<{ bytes: Uint8Array; value: string }> = [];

  constructor(private readonly capacity: number) {}

  /** The string at buf[start, end), strictly UTF-8 (see decodeUtf8Strict; `what` names it in the error). */
  decode(buf: Uint8Array, start: number, end: number, what: string): string {
    const len = end - start;
    next: for (const r of this.recent) {
      if (r.bytes.length !== len) continue;
      for (let i = 0; i < len; i++) if (r.bytes[i] !== buf[start + i]) continue next;
      return r.value;
    }
    const value = decodeUtf8Strict(buf, start, end, what);
    if (this.recent.length >= this.capacity) this.recent.shift();
    // A copy: a view would keep the whole message alive.
    this.recent.push({ bytes: new Uint8Array(buf.subarray(start, end)), value });
    return value;
  }
}

/**
 * Like decodeUtf8, but a proto3 `string` that is not valid UTF-8 is a
 * WireError (as the Go and C++ parsers treat it) instead of being silently
 * replaced by U+FFFD, which could make two different names one.
 */
export function decodeUtf8Strict(buf: Uint8Array, start: number, end: number, what: string): string {
  // Names and type URLs are nearly always ASCII, which is valid UTF-8 and reads the same as Latin-1:
  // a byte loop then replaces a Buffer view and a validation call per string (a request can carry
  // hundreds of thousands of names).
  if (Buffer.isBuffer(buf) && isAscii(buf, start, end)) return buf.toString('latin1', start, end);
  const slice = Buffer.from(buf.buffer, buf.byteOffset + start, end - start);
  if (!isUtf8(slice)) throw new WireError(`${what} is not valid UTF-8`);
  return slice.toString('utf8');
}
