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

function readVarint(buf: Uint8Array, pos: number, out: { value: number; pos: number }): void {
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
  out.value = result;
  out.pos = pos;
}

/** Calls `visit` for each top-level field of a message; throws WireError on malformed input. */
export function scanFields(buf: Uint8Array, visit: (f: WireField) => void): void {
  const cursor = { value: 0, pos: 0 };
  const field: WireField = { field: 0, wireType: 0, start: 0, end: 0, valueStart: 0, valueEnd: 0, varint: 0 };
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    readVarint(buf, pos, cursor);
    const tag = cursor.value;
    pos = cursor.pos;
    const wireType = tag % 8;
    const fieldNo = Math.floor(tag / 8);
    if (fieldNo === 0) throw new WireError('field number 0');
    let valueStart = pos;
    let valueEnd = pos;
    let varint = 0;
    switch (wireType) {
      case WIRE_VARINT:
        readVarint(buf, pos, cursor);
        varint = cursor.value;
        pos = cursor.pos;
        valueEnd = pos;
        break;
      case WIRE_I64:
        pos += 8;
        valueEnd = pos;
        break;
      case WIRE_I32:
        pos += 4;
        valueEnd = pos;
        break;
      case WIRE_LEN:
        readVarint(buf, pos, cursor);
        valueStart = cursor.pos;
        valueEnd = valueStart + cursor.value;
        pos = valueEnd;
        break;
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
    if (pos > buf.length) throw new WireError('truncated field');
    field.field = fieldNo;
    field.wireType = wireType;
    field.start = start;
    field.end = pos;
    field.valueStart = valueStart;
    field.valueEnd = valueEnd;
    field.varint = varint;
    visit(field);
  }
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
