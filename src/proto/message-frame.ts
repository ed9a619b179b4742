/**
 * Responses encoded with their gRPC message prefix in front of them.
 *
 * Every message on a gRPC stream is preceded by a 5-byte prefix: a
 * compressed flag and the message's big-endian length. grpc-js frames each
 * message it writes into a new buffer of its own, per stream: a response the
 * relay encoded once for 10,000 clients would be copied 10,000 times, and a
 * response encoded for one client copied once more than it needs. So the
 * relay's encoders allocate each response with room for its prefix and write
 * the prefix there (allocPrefixed); the response's framed bytes are a view of
 * that same allocation (withPrefix), written to the HTTP/2 stream under the
 * call as they are, to every stream that gets the response. The call's
 * headers and its status trailers stay grpc-js's: the headers are sent
 * through the call before the first message, the status through it at the
 * end, and the HTTP/2 stream keeps the order of what is written to it.
 *
 * grpc-js has no public way from a call to its HTTP/2 stream (see
 * downstream/grpc-call-internals.ts); without one, the call's own write is
 * used (and the framed-write tests fail).
 */

/** Bytes of the gRPC message prefix. */
export const MESSAGE_PREFIX = 5;

/**
 * A buffer for an encoded message of exactly `size` bytes, its uncompressed
 * gRPC prefix already written in front of it in the same allocation. The
 * caller writes the message into the returned buffer.
 */
export function allocPrefixed(size: number): Buffer {
  const whole = Buffer.allocUnsafe(MESSAGE_PREFIX + size);
  whole[0] = 0;
  whole.writeUInt32BE(size, 1);
  return whole.subarray(MESSAGE_PREFIX);
}

/**
 * The framed bytes (prefix and message) of a message from allocPrefixed: a
 * view, no copy. Throws for any other buffer (a programming error: the bytes
 * in front of it are not this message's).
 */
export function withPrefix(message: Buffer): Buffer {
  const at = message.byteOffset - MESSAGE_PREFIX;
  const whole = at < 0 ? undefined : Buffer.from(message.buffer, at, MESSAGE_PREFIX + message.length);
  if (whole === undefined || whole[0] !== 0 || whole.readUInt32BE(1) !== message.length) {
    throw new Error('withPrefix: the message was not allocated with its gRPC prefix');
  }
  return whole;
}
