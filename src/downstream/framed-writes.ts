/**
 * Responses written to the HTTP/2 stream under a grpc-js call already framed.
 *
 * grpc-js frames every message it writes (a 5-byte prefix: compressed flag,
 * big-endian length) into a new buffer of its own, per stream: a response
 * the relay encoded once for 10,000 clients is copied 10,000 times, and
 * above 4 KB each copy is an allocation of its own that the garbage
 * collector then pays for. The relay frames each distinct response once and
 * writes those same bytes to every stream that gets it. The call's headers
 * and its status trailers stay grpc-js's: the headers are sent through the
 * call before the first message, the status through it at the end, and the
 * HTTP/2 stream keeps the order of what is written to it.
 *
 * grpc-js has no public way from a call to its HTTP/2 stream (see
 * grpc-call-internals.ts); without one, the call's own write is used (and
 * the framed-write tests fail).
 */

/** Bytes of the gRPC message prefix: compressed flag, 4-byte big-endian length. */
const PREFIX = 5;

/** Each encoded response's framed bytes, made by the first stream that writes it; dropped with the response. */
const framedOf = new WeakMap<Buffer, Buffer>();

/** `message` with its gRPC prefix (uncompressed), made once per message. */
export function framed(message: Buffer): Buffer {
  let bytes = framedOf.get(message);
  if (bytes === undefined) {
    // Not from the shared pool: a kept slice would keep its whole 8 KB slab alive.
    bytes = Buffer.allocUnsafeSlow(message.length + PREFIX);
    bytes[0] = 0;
    bytes.writeUInt32BE(message.length, 1);
    message.copy(bytes, PREFIX);
    framedOf.set(message, bytes);
  }
  return bytes;
}
