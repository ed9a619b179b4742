/**
 * What the relay reads, lets go of or takes over beneath a grpc-js server call, where
 * grpc-js has no public way: the call's innermost handler object (BaseServerInterceptingCall)
 * holds the HTTP/2 stream and the message decoder. Found by following
 * grpc-js's private fields, each checked at run time; undefined when a
 * grpc-js version changes them, and the callers fall back (their tests fail).
 */
import type * as http2 from 'node:http2';
import type * as grpc from '@grpc/grpc-js';

/**
 * The field `name` of the first object down the call's chain that has one
 * `is` accepts: ServerDuplexStreamImpl.call, then (with interceptors)
 * ServerInterceptingCall.nextCall… down to BaseServerInterceptingCall.
 */
export function fieldBeneathCall<T>(call: grpc.ServerDuplexStream<Buffer, Buffer>, name: string, is: (x: unknown) => x is T): T | undefined {
  return callBeneath(call, (c): c is Record<string, T> => is((c as Record<string, unknown>)[name]))?.[name];
}

/** The first object down the call's chain (see fieldBeneathCall) that `accepts` takes, typed as it checked. */
function callBeneath<C>(call: grpc.ServerDuplexStream<Buffer, Buffer>, accepts: (c: object) => c is C & object): C | undefined {
  let c: unknown = (call as unknown as { call?: unknown }).call;
  for (let hops = 0; hops < 16 && typeof c === 'object' && c !== null; hops++) {
    if (accepts(c)) return c;
    c = (c as { nextCall?: unknown }).nextCall;
  }
  return undefined;
}

function isHttp2Stream(x: unknown): x is http2.ServerHttp2Stream {
  return typeof x === 'object' && x !== null && 'session' in x && typeof (x as { write?: unknown }).write === 'function' && typeof (x as { respond?: unknown }).respond === 'function';
}

/** The HTTP/2 stream under a grpc-js server call, if this grpc-js version lets us find it. */
export function http2StreamOf(call: grpc.ServerDuplexStream<Buffer, Buffer>): http2.ServerHttp2Stream | undefined {
  return fieldBeneathCall(call, 'stream', isHttp2Stream);
}

/**
 * Lets go of the metadata grpc-js keeps per call that the relay never reads:
 * the request's headers (the relay identifies clients by their connection and
 * node) and the empty trailer set made for the call's end (grpc-js copies the
 * trailers it is given when it sends the status, so one shared empty set
 * serves every call). Two Metadata objects and their maps: ~0.55 KB per
 * idle stream in heap snapshots. A grpc-js without these fields is left as it is.
 */
export function releaseCallMetadata(call: grpc.ServerDuplexStream<Buffer, Buffer>, empty: grpc.Metadata): void {
  const fields = call as unknown as { metadata?: unknown; trailingMetadata?: unknown };
  if (isMetadata(fields.metadata)) fields.metadata = empty;
  if (isMetadata(fields.trailingMetadata)) fields.trailingMetadata = empty;
}

function isMetadata(x: unknown): boolean {
  return typeof x === 'object' && x !== null && typeof (x as { clone?: unknown }).clone === 'function' && typeof (x as { getMap?: unknown }).getMap === 'function';
}

/** The fields of grpc-js's innermost server call (BaseServerInterceptingCall) that reading its requests touches. */
interface BaseCallFields {
  stream: http2.ServerHttp2Stream;
  decoder: DecoderFields;
  readQueue: unknown[];
  incomingEncoding: string;
  maxReceiveMessageSize: number;
}

function isBaseCall(x: unknown): x is BaseCallFields {
  if (typeof x !== 'object' || x === null) return false;
  const c = x as Record<string, unknown>;
  return (
    isHttp2Stream(c.stream) &&
    Array.isArray(c.readQueue) &&
    typeof c.incomingEncoding === 'string' &&
    typeof c.maxReceiveMessageSize === 'number' &&
    isGrpcDecoder(c.decoder)
  );
}

/**
 * Takes the reading of `call`'s requests from grpc-js: removes its listener
 * from the HTTP/2 stream's DATA, so that the caller reads the stream itself
 * (downstream/framing.ts), and returns that stream with the largest message
 * grpc-js was told to accept. Done only while grpc-js has read nothing of the
 * call (it holds the stream paused until the call is first read) and the
 * client sends uncompressed messages (grpc-js's gzip and deflate stay its
 * own); undefined otherwise, and the call is read through grpc-js as before.
 * grpc-js still sees the stream's end, and so still delivers the half-close.
 */
export function detachRequestReader(call: grpc.ServerDuplexStream<Buffer, Buffer>): { h2: http2.ServerHttp2Stream; maxBytes: number } | undefined {
  const c = callBeneath(call, isBaseCall);
  if (!c) return undefined;
  const h2 = c.stream;
  const listeners = h2.listeners('data');
  if (c.incomingEncoding !== 'identity' || c.readQueue.length > 0 || c.decoder.readState !== NO_DATA || listeners.length !== 1 || h2.readableFlowing === true) return undefined;
  h2.removeListener('data', listeners[0] as (chunk: Buffer) => void);
  return { h2, maxBytes: c.maxReceiveMessageSize };
}

/** grpc-js's StreamDecoder states (stream-decoder.ts: NO_DATA, READING_SIZE, READING_MESSAGE). */
const NO_DATA = 0;
const READING_SIZE = 1;
const READING_MESSAGE = 2;

interface DecoderFields {
  readState: number;
  readSizeRemaining: number;
  readMessageRemaining: number;
}

function isGrpcDecoder(x: unknown): x is DecoderFields {
  if (typeof x !== 'object' || x === null) return false;
  const d = x as Record<string, unknown>;
  return typeof d.readState === 'number' && typeof d.readSizeRemaining === 'number' && typeof d.readMessageRemaining === 'number';
}

/** The message decoder under a grpc-js server call, if this grpc-js version lets us find it. */
function decoderOf(call: grpc.ServerDuplexStream<Buffer, Buffer>): DecoderFields | undefined {
  return fieldBeneathCall(call, 'decoder', isGrpcDecoder);
}

/**
 * grpc-js, when a client half-closes in the middle of a message, drops the
 * partial bytes and reports a plain half-close: the stream would end with OK
 * as if the request had never been sent. gRPC's other servers fail such a
 * call, and so does the relay, asking grpc-js's decoder at the half-close.
 *
 * Bytes the message grpc-js is receiving still lacks when the client ends
 * its side of `call` (0: it ended between messages); undefined when the
 * decoder cannot be found. Asked at the half-close, when no byte can follow.
 */
export function unfinishedBytes(call: grpc.ServerDuplexStream<Buffer, Buffer>): number | undefined {
  const d = decoderOf(call);
  if (!d) return undefined;
  // The flag byte was read, the 4 length bytes are coming: those are missing.
  if (d.readState === READING_SIZE) return d.readSizeRemaining;
  if (d.readState === READING_MESSAGE) return d.readMessageRemaining;
  return 0;
}
