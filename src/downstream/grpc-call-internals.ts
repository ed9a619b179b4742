/**
 * What the relay reads (or lets go of) beneath a grpc-js server call, where
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
  let c: unknown = (call as unknown as { call?: unknown }).call;
  for (let hops = 0; hops < 16 && typeof c === 'object' && c !== null; hops++) {
    const value = (c as Record<string, unknown>)[name];
    if (is(value)) return value;
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
