/**
 * A raw HTTP/2 connection for abuse tests: frames written by hand over a
 * net.Socket (no node:http2 client, which would refuse to misbehave), and the
 * server's frames parsed as they arrive. It speaks just enough to open gRPC
 * streams (literal, never-indexed HPACK) and then do what a hostile client
 * does: flood PINGs or SETTINGS, reset streams in a loop, announce huge
 * messages, ignore SETTINGS_MAX_CONCURRENT_STREAMS.
 */
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import { waitUntil } from './wait';

export const FRAME = { DATA: 0x0, HEADERS: 0x1, RST_STREAM: 0x3, SETTINGS: 0x4, PING: 0x6, GOAWAY: 0x7, WINDOW_UPDATE: 0x8 } as const;
const FLAG_END_STREAM = 0x1;
const FLAG_ACK = 0x1;
const FLAG_END_HEADERS = 0x4;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

function hpackInt(first: number, prefixBits: number, value: number, out: number[]): void {
  const max = (1 << prefixBits) - 1;
  if (value < max) return void out.push(first | value);
  out.push(first | max);
  for (value -= max; value >= 128; value >>>= 7) out.push((value & 0x7f) | 0x80);
  out.push(value);
}

function hpackLiteral(name: string, value: string, out: number[]): void {
  out.push(0x10); // literal never indexed, new name
  for (const s of [name, value]) {
    const b = Buffer.from(s, 'latin1');
    hpackInt(0, 7, b.length, out);
    out.push(...b);
  }
}

/** HEADERS block of a gRPC request to `path`. */
export function grpcHeaders(path: string, authority = 'relay'): Buffer {
  const out: number[] = [];
  for (const [n, v] of [
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', path],
    [':authority', authority],
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
  ]) hpackLiteral(n!, v!, out);
  return Buffer.from(out);
}

export const DELTA_ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources';
export const SOTW_ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

/** A gRPC message: compressed flag, 4-byte length, bytes (`declaredLength` may lie). */
export function grpcMessage(body: Buffer, declaredLength = body.length): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(declaredLength >>> 0, 1);
  return Buffer.concat([head, body]);
}

export class RawH2 {
  readonly events = new EventEmitter();
  readonly frames: Frame[] = [];
  closed = false;
  private buf: Buffer = Buffer.alloc(0);
  private nextStream = 1;

  private constructor(readonly socket: net.Socket) {
    this.events.setMaxListeners(0);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', () => {
      /* the close event tells */
    });
    socket.on('close', () => {
      this.closed = true;
      this.events.emit('change');
    });
  }

  /** Connects and sends the preface and an empty SETTINGS frame; ACKs the server's SETTINGS. */
  static connect(port: number, host = '127.0.0.1'): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, host, () => {
        socket.off('error', reject);
        const c = new RawH2(socket);
        c.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
        resolve(c);
      });
      socket.once('error', reject);
    });
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) break;
      const f: Frame = { type: this.buf[3]!, flags: this.buf[4]!, streamId: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) };
      this.buf = this.buf.subarray(9 + len);
      // Keep the frames a test looks at; drop the (possibly many) ACKs.
      if (!((f.type === FRAME.PING || f.type === FRAME.SETTINGS) && f.flags & FLAG_ACK)) this.frames.push(f);
      if (f.type === FRAME.SETTINGS && !(f.flags & FLAG_ACK)) this.write(frame(FRAME.SETTINGS, FLAG_ACK, 0));
    }
    this.events.emit('change');
  }

  /** False once the socket is closed (writes are then dropped). */
  write(bytes: Buffer): boolean {
    if (this.closed || this.socket.destroyed) return false;
    this.socket.write(bytes);
    return true;
  }

  /** Opens a gRPC stream (HEADERS, END_HEADERS) and returns its id. */
  openStream(path = DELTA_ADS_PATH): number {
    const id = this.nextStream;
    this.nextStream += 2;
    this.write(frame(FRAME.HEADERS, FLAG_END_HEADERS, id, grpcHeaders(path)));
    return id;
  }

  sendData(streamId: number, bytes: Buffer, endStream = false): void {
    this.write(frame(FRAME.DATA, endStream ? FLAG_END_STREAM : 0, streamId, bytes));
  }

  reset(streamId: number, code = 0x8 /* CANCEL */): void {
    const p = Buffer.alloc(4);
    p.writeUInt32BE(code);
    this.write(frame(FRAME.RST_STREAM, 0, streamId, p));
  }

  ping(): void {
    this.write(frame(FRAME.PING, 0, 0, Buffer.alloc(8)));
  }

  settings(): void {
    this.write(frame(FRAME.SETTINGS, 0, 0));
  }

  /** The GOAWAY the server sent, if any: error code and debug text. */
  goaway(): { code: number; debug: string } | undefined {
    const f = this.frames.find((x) => x.type === FRAME.GOAWAY);
    return f ? { code: f.payload.readUInt32BE(4), debug: f.payload.subarray(8).toString('latin1') } : undefined;
  }

  /** RST_STREAM codes the server sent, by stream id. */
  resets(): Map<number, number> {
    const m = new Map<number, number>();
    for (const f of this.frames) if (f.type === FRAME.RST_STREAM) m.set(f.streamId, f.payload.readUInt32BE(0));
    return m;
  }

  /** Resolves with the first frame from the server matching `pred`. */
  waitUntilFrame(pred: (f: Frame) => boolean, what: string, timeoutMs = 5000): Promise<Frame> {
    return waitUntil(this.events, () => this.frames.find(pred), { timeoutMs, what, abort: () => (this.closed ? 'connection closed' : undefined) });
  }

  /** Resolves when the server has closed the connection. */
  waitClosed(timeoutMs = 5000, what = 'the relay to close the connection'): Promise<true> {
    return waitUntil(this.events, () => this.closed || undefined, { timeoutMs, what });
  }

  close(): void {
    this.socket.destroy();
  }
}
