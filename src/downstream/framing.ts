/**
 * Notices a request message cut off by the client's end of stream.
 *
 * grpc-js reassembles messages from DATA frames and, when the client
 * half-closes in the middle of one, drops the partial bytes and reports a
 * plain half-close: the stream would end with OK as if the request had never
 * been sent. gRPC's other servers fail such a call. So the relay follows the
 * length-prefixed framing of the same bytes (passively: a 'data' listener on a
 * paused stream does not resume it, and sees every chunk grpc-js sees) and,
 * at the HTTP/2 end of stream, tells whether a message was left unfinished.
 *
 * grpc-js has no public way from a call to its HTTP/2 stream; `http2StreamOf`
 * follows its private fields, checked at run time. When they change, the
 * check is skipped (and the truncation tests fail) rather than the relay.
 */
import type * as http2 from 'node:http2';
import type * as grpc from '@grpc/grpc-js';

/** Bytes of the gRPC message prefix: compressed flag, 4-byte big-endian length. */
const PREFIX = 5;

/** The HTTP/2 stream under a grpc-js server call, if this grpc-js version lets us find it. */
export function http2StreamOf(call: grpc.ServerDuplexStream<Buffer, Buffer>): http2.ServerHttp2Stream | undefined {
  // ServerDuplexStreamImpl.call -> (interceptors' ServerInterceptingCall.nextCall)* -> BaseServerInterceptingCall.stream
  let c: unknown = (call as unknown as { call?: unknown }).call;
  for (let hops = 0; hops < 16 && typeof c === 'object' && c !== null; hops++) {
    const stream = (c as { stream?: unknown }).stream;
    if (isHttp2Stream(stream)) return stream;
    c = (c as { nextCall?: unknown }).nextCall;
  }
  return undefined;
}

function isHttp2Stream(x: unknown): x is http2.ServerHttp2Stream {
  return typeof x === 'object' && x !== null && 'session' in x && typeof (x as { on?: unknown }).on === 'function' && typeof (x as { respond?: unknown }).respond === 'function';
}

/**
 * The framing of one HTTP/2 stream's request bytes: what the message being
 * received still owes — its prefix (the length read big-endian as it arrives,
 * after the flag byte), then its body.
 */
class FrameTracker<Owner> {
  private prefixLeft = 0;
  private length = 0;
  private bodyLeft = 0;

  constructor(
    private readonly owner: Owner,
    private readonly onTruncated: (owner: Owner, missing: number) => void,
  ) {}

  follow(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.bodyLeft > 0) {
        const n = Math.min(this.bodyLeft, chunk.length - pos);
        this.bodyLeft -= n;
        pos += n;
        continue;
      }
      if (this.prefixLeft === 0) {
        this.prefixLeft = PREFIX;
        this.length = 0;
      }
      if (this.prefixLeft < PREFIX) this.length = this.length * 256 + chunk[pos]!;
      this.prefixLeft--;
      pos++;
      if (this.prefixLeft === 0) this.bodyLeft = this.length;
    }
  }

  ended(): void {
    if (this.prefixLeft > 0) this.onTruncated(this.owner, this.prefixLeft);
    else if (this.bodyLeft > 0) this.onTruncated(this.owner, this.bodyLeft);
  }
}

/** Each watched HTTP/2 stream's tracker, for the two listeners every stream shares (a stream per client: no closures each). */
const trackerOf = new WeakMap<http2.ServerHttp2Stream, FrameTracker<unknown>>();

function onStreamData(this: http2.ServerHttp2Stream, chunk: Buffer): void {
  trackerOf.get(this)?.follow(chunk);
}

// 'end' comes once: a plain listener, without the wrapper once() would make per stream.
function onStreamEnd(this: http2.ServerHttp2Stream): void {
  trackerOf.get(this)?.ended();
}

/**
 * Calls `onTruncated(owner, missing)` when the client ends its side of `call`
 * in the middle of a message. Returns false when the HTTP/2 stream could not
 * be found.
 */
export function watchTruncation<Owner>(
  call: grpc.ServerDuplexStream<Buffer, Buffer>,
  owner: Owner,
  onTruncated: (owner: Owner, missing: number) => void,
): boolean {
  const stream = http2StreamOf(call);
  if (!stream) return false;
  trackerOf.set(stream, new FrameTracker(owner, onTruncated) as FrameTracker<unknown>);
  stream.on('data', onStreamData);
  stream.on('end', onStreamEnd);
  return true;
}
