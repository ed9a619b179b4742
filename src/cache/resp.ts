/**
 * Redis commands serialized by us, straight into one buffer, for the write
 * path of the shared tier (redis-write-batch.ts) and the warm start's MGETs
 * (redis-warm-load.ts).
 *
 * Why: a chunk of writes is a few commands with thousands of arguments (MSET
 * of 1,000 records of 1 KB). Handed to ioredis as arguments, every record is
 * first encoded into its own buffer, then copied into the command's buffer,
 * then copied again when the pipeline concatenates its commands — and each
 * megabyte-sized buffer is fresh memory. Here each record is written once,
 * in place, into a buffer that is reused for the next chunk, and the command
 * goes to ioredis as a `Command` whose wire form is that buffer
 * (`toWritable`), so ioredis still does the queueing, reply matching,
 * cluster routing (by the first key) and error handling.
 */
import { Command } from 'ioredis';

/** Buffers of at least POOLED_MIN bytes are kept for reuse; smaller ones come from Node's own pool. */
const POOLED_MIN = 64 * 1024;
const POOL_MAX_BUFFERS = 16;
/** Room before the arguments for `*<n>\r\n$<len>\r\n<NAME>\r\n`, written last. */
const HEAD_ROOM = 48;

/** Writes a non-negative integer in decimal at `pos`; returns the end. (Called several times per record: no string.) */
export function writeDecimal(b: Buffer, pos: number, n: number): number {
  if (n < 10) {
    b[pos] = 0x30 + n;
    return pos + 1;
  }
  let digits = 1;
  for (let x = n; x >= 10; x = Math.floor(x / 10)) digits++;
  for (let i = pos + digits - 1; i >= pos; i--) {
    b[i] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  return pos + digits;
}

/** Writes an ASCII string (a hash tag, a fixed word) at `pos`; returns the end. */
export function writeAscii(b: Buffer, pos: number, s: string): number {
  for (let i = 0; i < s.length; i++) b[pos + i] = s.charCodeAt(i);
  return pos + s.length;
}

/** True when `b` holds `part`'s bytes at `at` (compared from the end: keys of one glob differ late). */
export function bytesAt(b: Uint8Array, at: number, part: Uint8Array): boolean {
  for (let i = part.length - 1; i >= 0; i--) if (b[at + i] !== part[i]) return false;
  return true;
}

/** A few large buffers kept between chunks (allocating fresh megabytes costs page faults each time). */
export class BufferPool {
  private readonly free: Buffer[] = [];

  acquire(min: number): Buffer {
    if (min < POOLED_MIN) return Buffer.allocUnsafe(min);
    for (let i = 0; i < this.free.length; i++) {
      if (this.free[i]!.length >= min) return this.free.splice(i, 1)[0]!;
    }
    return Buffer.allocUnsafeSlow(Math.max(min, POOLED_MIN));
  }

  /** Gives a buffer back. Only once nothing will read it any more (its command got its reply). */
  release(b: Buffer): void {
    if (b.length < POOLED_MIN) return;
    if (this.free.length >= POOL_MAX_BUFFERS) this.free.shift();
    this.free.push(b);
  }
}

/** One command being written: `NAME arg arg …` as a RESP array of bulk strings. */
export class RespCommand {
  private buf: Buffer;
  private pos = HEAD_ROOM;
  private argc = 0;
  /** First key argument, as a string, for cluster slot routing. */
  firstKey: string | undefined;
  /**
   * For commands whose first key is not their first argument (EVAL): the
   * arguments ioredis reads to find it, e.g. `['', '1', key]`. Never sent.
   */
  routing: string[] | undefined;

  constructor(
    readonly name: string,
    private readonly pool: BufferPool,
    sizeHint = 256,
  ) {
    this.buf = pool.acquire(HEAD_ROOM + sizeHint);
  }

  get args(): number {
    return this.argc;
  }

  /** Makes room for `n` more bytes. */
  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const bigger = this.pool.acquire(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.pool.release(this.buf); // not sent yet: nothing reads it
    this.buf = bigger;
  }

  /** Starts an argument of `len` bytes and returns where its bytes go; `room` for them is made. */
  beginArg(len: number): number {
    this.room(len + 16);
    this.buf[this.pos++] = 0x24; // '$'
    this.pos = writeDecimal(this.buf, this.pos, len);
    this.buf[this.pos++] = 0x0d;
    this.buf[this.pos++] = 0x0a;
    this.argc++;
    return this.pos;
  }

  /** Ends the argument begun at `start`, whose bytes were written up to `end`. */
  endArg(end: number): void {
    this.pos = end;
    this.buf[this.pos++] = 0x0d;
    this.buf[this.pos++] = 0x0a;
  }

  /** The buffer arguments are written into (valid until the next beginArg). */
  get target(): Buffer {
    return this.buf;
  }

  string(s: string): void {
    const len = Buffer.byteLength(s);
    const at = this.beginArg(len);
    this.endArg(at + this.buf.write(s, at, 'utf8'));
  }

  /** Finishes the command and returns it as an ioredis command. */
  finish(): RawCommand {
    const head = `*${this.argc + 1}\r\n$${Buffer.byteLength(this.name)}\r\n${this.name}\r\n`;
    const headLen = Buffer.byteLength(head);
    if (headLen > HEAD_ROOM) throw new Error('RESP command header too long');
    this.buf.write(head, HEAD_ROOM - headLen, 'latin1');
    const routing = this.routing ?? (this.firstKey === undefined ? [] : [this.firstKey]);
    return new RawCommand(this.name, routing, this.buf, this.buf.subarray(HEAD_ROOM - headLen, this.pos));
  }

  /** Returns the buffer to the pool; only after the command's reply arrived. */
  release(): void {
    this.pool.release(this.buf);
  }
}

/** An ioredis command whose wire bytes were written by RespCommand. */
export class RawCommand extends Command {
  constructor(
    name: string,
    /** Arguments ioredis derives the cluster slot from (RespCommand.routing); the bytes sent are `wire`. */
    routing: string[],
    /** The whole buffer (to release), of which `wire` is the command. */
    readonly buffer: Buffer,
    private readonly wire: Buffer,
  ) {
    super(name, routing);
  }

  override toWritable(_socket: object): Buffer {
    return this.wire;
  }
}
