/**
 * A minimal HTTP/2 client for gRPC load: raw frames over a net.Socket, no
 * HPACK decoding (response headers are skipped, only END_STREAM matters), no
 * per-message objects beyond the message slice itself. It keeps HTTP/2 honest
 * where it matters for measurement: SETTINGS/PING ACKs, both directions of
 * flow control (a stalled client really stops granting window), gRPC
 * message framing across DATA frames.
 *
 * One data event from the socket = one pass over its frames and at most one
 * socket write (ACKs, WINDOW_UPDATEs and SETTINGS ACKs batched together).
 */
import * as net from 'node:net';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

const T_DATA = 0x0;
const T_HEADERS = 0x1;
const T_RST_STREAM = 0x3;
const T_SETTINGS = 0x4;
const T_PING = 0x6;
const T_GOAWAY = 0x7;
const T_WINDOW_UPDATE = 0x8;

const F_END_STREAM = 0x1;
const F_ACK = 0x1;
const F_END_HEADERS = 0x4;
const F_PADDED = 0x8;

const S_ENABLE_PUSH = 0x2;
const S_INITIAL_WINDOW_SIZE = 0x4;
const S_MAX_FRAME_SIZE = 0x5;

const DEFAULT_WINDOW = 65535;

function frame(type: number, flags: number, streamId: number, payload: Buffer | null, payloadLen = payload ? payload.length : 0): Buffer {
  const out = Buffer.allocUnsafe(9 + payloadLen);
  out[0] = (payloadLen >>> 16) & 0xff;
  out[1] = (payloadLen >>> 8) & 0xff;
  out[2] = payloadLen & 0xff;
  out[3] = type;
  out[4] = flags;
  out.writeUInt32BE(streamId & 0x7fffffff, 5);
  if (payload) payload.copy(out, 9);
  return out;
}

function windowUpdate(streamId: number, increment: number): Buffer {
  const out = Buffer.allocUnsafe(13);
  out[0] = 0;
  out[1] = 0;
  out[2] = 4;
  out[3] = T_WINDOW_UPDATE;
  out[4] = 0;
  out.writeUInt32BE(streamId, 5);
  out.writeUInt32BE(increment & 0x7fffffff, 9);
  return out;
}

/** HPACK integer with an N-bit prefix (RFC 7541 §5.1). */
function hpackInt(first: number, prefixBits: number, value: number, out: number[]): void {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out.push(first | value);
    return;
  }
  out.push(first | max);
  value -= max;
  while (value >= 128) {
    out.push((value & 0x7f) | 0x80);
    value >>>= 7;
  }
  out.push(value);
}

function hpackString(s: string, out: number[]): void {
  const b = Buffer.from(s, 'latin1');
  hpackInt(0, 7, b.length, out);
  for (const x of b) out.push(x);
}

/**
 * The request header block: only "literal without indexing" representations,
 * so our side never touches an HPACK dynamic table.
 */
export function grpcRequestHeaders(authority: string, path: string): Buffer {
  const out: number[] = [];
  out.push(0x83); // :method POST (static 3)
  out.push(0x86); // :scheme http (static 6)
  hpackInt(0x00, 4, 4, out); // :path, name = static 4
  hpackString(path, out);
  hpackInt(0x00, 4, 1, out); // :authority, name = static 1
  hpackString(authority, out);
  for (const [name, value] of [
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
    ['user-agent', 'xdstp-bench-loadgen'],
  ] as const) {
    out.push(0x00);
    hpackString(name, out);
    hpackString(value, out);
  }
  return Buffer.from(out);
}

export interface H2Handler<T> {
  /** One complete gRPC message (a slice: copy it to keep it). `nowUs` is the arrival time of its socket read. */
  onMessage(stream: H2Stream<T>, msg: Buffer, nowUs: number): void;
  onStreamEnd(stream: H2Stream<T>, why: string): void;
}

export class H2Stream<T> {
  sendWindow: number;
  recvUnacked = 0;
  /** Already listed for a WINDOW_UPDATE at the end of this read. */
  updateQueued = false;
  closed = false;
  private hdr: Buffer | undefined;
  private hdrFill = 0;
  private msgBuf: Buffer | null = null;
  private msgFill = 0;

  constructor(
    readonly conn: H2Conn<T>,
    readonly id: number,
    readonly owner: T,
  ) {
    this.sendWindow = conn.peerInitialWindow;
  }

  /** Sends one gRPC message (5-byte prefix + bytes), respecting flow control. */
  send(msg: Buffer): void {
    this.conn.sendMessage(this, msg);
  }

  /** Reassembles gRPC messages out of DATA payload bytes [s, e). */
  feed(buf: Buffer, s: number, e: number, nowUs: number, handler: H2Handler<T>): void {
    while (s < e) {
      if (this.msgBuf === null) {
        if (this.hdrFill === 0 && e - s >= 5) {
          const len = buf.readUInt32BE(s + 1);
          if (e - s - 5 >= len) {
            handler.onMessage(this, buf.subarray(s + 5, s + 5 + len), nowUs);
            s += 5 + len;
            continue;
          }
          this.msgBuf = Buffer.allocUnsafe(len);
          this.msgFill = 0;
          s += 5;
          continue;
        }
        this.hdr ??= Buffer.allocUnsafe(5);
        while (this.hdrFill < 5 && s < e) this.hdr[this.hdrFill++] = buf[s++]!;
        if (this.hdrFill === 5) {
          this.hdrFill = 0;
          const len = this.hdr.readUInt32BE(1);
          if (len === 0) handler.onMessage(this, Buffer.alloc(0), nowUs);
          else {
            this.msgBuf = Buffer.allocUnsafe(len);
            this.msgFill = 0;
          }
        }
      } else {
        const n = Math.min(e - s, this.msgBuf.length - this.msgFill);
        buf.copy(this.msgBuf, this.msgFill, s, s + n);
        this.msgFill += n;
        s += n;
        if (this.msgFill === this.msgBuf.length) {
          const m = this.msgBuf;
          this.msgBuf = null;
          handler.onMessage(this, m, nowUs);
        }
      }
    }
  }
}

export interface H2ConnOptions<T> {
  port: number;
  host?: string;
  /** gRPC method path. */
  path: string;
  /** SETTINGS_INITIAL_WINDOW_SIZE we advertise (per stream receive window). */
  streamWindow: number;
  /** Connection receive window (we send one WINDOW_UPDATE at start to reach it). */
  connWindow: number;
  handler: H2Handler<T>;
  connectTimeoutMs?: number;
}

interface Blocked<T> {
  stream: H2Stream<T>;
  bytes: Buffer;
  size: number;
}

/** One client HTTP/2 connection carrying any number of gRPC streams. */
export class H2Conn<T> {
  readonly streams = new Map<number, H2Stream<T>>();
  peerInitialWindow = DEFAULT_WINDOW;
  peerMaxFrame = 16384;
  sendConnWindow = DEFAULT_WINDOW;
  closed = false;
  goaway = false;
  /** While stalled the socket is not read and no window is granted. */
  stalled = false;
  private socket: net.Socket | undefined;
  private nextStreamId = 1;
  private pending: Buffer | null = null;
  private out: Buffer[] | null = null;
  private recvConnUnacked = 0;
  private readonly needUpdate: Array<H2Stream<T>> = [];
  private readonly blocked: Array<Blocked<T>> = [];
  private readonly headerBlock: Buffer;
  onClose: ((why: string) => void) | undefined;

  constructor(private readonly opts: H2ConnOptions<T>) {
    const host = opts.host ?? '127.0.0.1';
    this.headerBlock = grpcRequestHeaders(`${host}:${opts.port}`, opts.path);
  }

  connect(): Promise<void> {
    const { opts } = this;
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: opts.host ?? '127.0.0.1', port: opts.port, noDelay: true });
      this.socket = socket;
      const timer = setTimeout(() => {
        socket.destroy(new Error('connect timed out'));
      }, opts.connectTimeoutMs ?? 10_000);
      socket.once('connect', () => {
        clearTimeout(timer);
        const settings = Buffer.alloc(12);
        settings.writeUInt16BE(S_ENABLE_PUSH, 0);
        settings.writeUInt32BE(0, 2);
        settings.writeUInt16BE(S_INITIAL_WINDOW_SIZE, 6);
        settings.writeUInt32BE(opts.streamWindow, 8);
        const parts = [PREFACE, frame(T_SETTINGS, 0, 0, settings)];
        if (opts.connWindow > DEFAULT_WINDOW) parts.push(windowUpdate(0, opts.connWindow - DEFAULT_WINDOW));
        socket.write(Buffer.concat(parts));
        resolve();
      });
      socket.on('data', (chunk: Buffer) => this.onData(chunk));
      socket.on('error', (err) => {
        clearTimeout(timer);
        if (!this.closed) reject(err);
        this.teardown(`socket error: ${err.message}`);
      });
      socket.on('close', () => {
        clearTimeout(timer);
        reject(new Error('closed before connect'));
        this.teardown('socket closed');
      });
    });
  }

  /** Opens a gRPC stream (HEADERS only; the request body follows via send()). */
  openStream(owner: T): H2Stream<T> {
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    const st = new H2Stream<T>(this, id, owner);
    this.streams.set(id, st);
    this.write(frame(T_HEADERS, F_END_HEADERS, id, this.headerBlock));
    return st;
  }

  sendMessage(st: H2Stream<T>, msg: Buffer): void {
    if (this.closed || st.closed) return;
    const size = 5 + msg.length;
    let bytes: Buffer;
    if (size <= this.peerMaxFrame) {
      bytes = Buffer.allocUnsafe(9 + size);
      bytes[0] = (size >>> 16) & 0xff;
      bytes[1] = (size >>> 8) & 0xff;
      bytes[2] = size & 0xff;
      bytes[3] = T_DATA;
      bytes[4] = 0;
      bytes.writeUInt32BE(st.id, 5);
      bytes[9] = 0;
      bytes.writeUInt32BE(msg.length, 10);
      msg.copy(bytes, 14);
    } else {
      const body = Buffer.allocUnsafe(size);
      body[0] = 0;
      body.writeUInt32BE(msg.length, 1);
      msg.copy(body, 5);
      const frames: Buffer[] = [];
      for (let off = 0; off < size; off += this.peerMaxFrame) {
        frames.push(frame(T_DATA, 0, st.id, body.subarray(off, Math.min(size, off + this.peerMaxFrame))));
      }
      bytes = Buffer.concat(frames);
    }
    if (this.blocked.length === 0 && this.sendConnWindow >= size && st.sendWindow >= size) {
      this.sendConnWindow -= size;
      st.sendWindow -= size;
      this.write(bytes);
    } else {
      this.blocked.push({ stream: st, bytes, size });
    }
  }

  /** Stop reading (and therefore granting flow-control window). */
  stall(): void {
    if (this.stalled || this.closed) return;
    this.stalled = true;
    this.socket?.pause();
  }

  unstall(): void {
    if (!this.stalled || this.closed) return;
    this.stalled = false;
    this.socket?.resume();
  }

  close(): void {
    if (this.closed) return;
    this.socket?.destroy();
    this.teardown('closed by client');
  }

  private write(b: Buffer): void {
    if (this.out) this.out.push(b);
    else if (!this.closed) this.socket?.write(b);
  }

  private teardown(why: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const st of this.streams.values()) {
      if (!st.closed) {
        st.closed = true;
        this.opts.handler.onStreamEnd(st, why);
      }
    }
    this.streams.clear();
    this.blocked.length = 0;
    this.onClose?.(why);
  }

  private drainBlocked(): void {
    while (this.blocked.length > 0) {
      const b = this.blocked[0]!;
      if (b.stream.closed) {
        this.blocked.shift();
        continue;
      }
      if (this.sendConnWindow < b.size || b.stream.sendWindow < b.size) return;
      this.blocked.shift();
      this.sendConnWindow -= b.size;
      b.stream.sendWindow -= b.size;
      this.write(b.bytes);
    }
  }

  private onData(chunk: Buffer): void {
    let buf = chunk;
    if (this.pending) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = null;
    }
    const now = Number(process.hrtime.bigint() / 1000n);
    this.out = [];
    let off = 0;
    while (buf.length - off >= 9) {
      const len = (buf[off]! << 16) | (buf[off + 1]! << 8) | buf[off + 2]!;
      if (buf.length - off < 9 + len) break;
      const type = buf[off + 3]!;
      const flags = buf[off + 4]!;
      const sid = buf.readUInt32BE(off + 5) & 0x7fffffff;
      this.onFrame(type, flags, sid, buf, off + 9, off + 9 + len, now);
      off += 9 + len;
      if (this.closed) break;
    }
    if (off < buf.length && !this.closed) this.pending = Buffer.from(buf.subarray(off));
    if (!this.stalled) {
      if (this.recvConnUnacked >= this.opts.connWindow / 2) {
        this.out.push(windowUpdate(0, this.recvConnUnacked));
        this.recvConnUnacked = 0;
      }
      for (const st of this.needUpdate) {
        if (!st.closed && st.recvUnacked > 0) this.out.push(windowUpdate(st.id, st.recvUnacked));
        st.recvUnacked = 0;
        st.updateQueued = false;
      }
      this.needUpdate.length = 0;
    }
    const out = this.out;
    this.out = null;
    if (out.length > 0 && !this.closed) this.socket?.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  private onFrame(type: number, flags: number, sid: number, buf: Buffer, s: number, e: number, now: number): void {
    switch (type) {
      case T_DATA: {
        const len = e - s;
        this.recvConnUnacked += len;
        const st = this.streams.get(sid);
        if (!st) return;
        st.recvUnacked += len;
        if (!st.updateQueued && st.recvUnacked >= this.opts.streamWindow / 2) {
          st.updateQueued = true;
          this.needUpdate.push(st);
        }
        if (flags & F_PADDED) {
          const pad = buf[s]!;
          s += 1;
          e -= pad;
        }
        st.feed(buf, s, e, now, this.opts.handler);
        if (flags & F_END_STREAM) this.endStream(st, 'end of stream');
        return;
      }
      case T_HEADERS: {
        const st = this.streams.get(sid);
        if (st && flags & F_END_STREAM) this.endStream(st, 'trailers');
        return;
      }
      case T_RST_STREAM: {
        const st = this.streams.get(sid);
        if (st) this.endStream(st, `RST_STREAM ${e - s >= 4 ? buf.readUInt32BE(s) : '?'}`);
        return;
      }
      case T_SETTINGS: {
        if (flags & F_ACK) return;
        for (let p = s; p + 6 <= e; p += 6) {
          const id = buf.readUInt16BE(p);
          const value = buf.readUInt32BE(p + 2);
          if (id === S_INITIAL_WINDOW_SIZE) {
            const delta = value - this.peerInitialWindow;
            this.peerInitialWindow = value;
            for (const st of this.streams.values()) st.sendWindow += delta;
          } else if (id === S_MAX_FRAME_SIZE) {
            this.peerMaxFrame = value;
          }
        }
        this.write(frame(T_SETTINGS, F_ACK, 0, null));
        this.drainBlocked();
        return;
      }
      case T_PING: {
        if (flags & F_ACK) return;
        this.write(frame(T_PING, F_ACK, 0, buf.subarray(s, e)));
        return;
      }
      case T_GOAWAY:
        this.goaway = true;
        return;
      case T_WINDOW_UPDATE: {
        const inc = buf.readUInt32BE(s) & 0x7fffffff;
        if (sid === 0) this.sendConnWindow += inc;
        else {
          const st = this.streams.get(sid);
          if (st) st.sendWindow += inc;
        }
        this.drainBlocked();
        return;
      }
      default:
        // PRIORITY, PUSH_PROMISE (disabled), CONTINUATION of headers we skip anyway.
        return;
    }
  }

  private endStream(st: H2Stream<T>, why: string): void {
    if (st.closed) return;
    st.closed = true;
    this.streams.delete(st.id);
    this.opts.handler.onStreamEnd(st, why);
  }
}
