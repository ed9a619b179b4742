/**
 * Notices a request message cut off by the client's end of stream.
 *
 * grpc-js reassembles messages from DATA frames and, when the client
 * half-closes in the middle of one, drops the partial bytes and reports a
 * plain half-close: the stream would end with OK as if the request had never
 * been sent. gRPC's other servers fail such a call. So at the half-close the
 * relay asks grpc-js's own message decoder of the call whether it was in the
 * middle of a message: no state of its own per stream, no listener on every
 * HTTP/2 stream.
 *
 * grpc-js has no public way from a call to its decoder (see
 * grpc-call-internals.ts); without one, the check is skipped (and the
 * truncation tests fail) rather than the relay.
 */
import type * as grpc from '@grpc/grpc-js';
import { fieldBeneathCall } from './grpc-call-internals';

/** grpc-js's StreamDecoder states (stream-decoder.ts: NO_DATA, READING_SIZE, READING_MESSAGE). */
const READING_SIZE = 1;
const READING_MESSAGE = 2;

interface DecoderFields {
  readState: number;
  readSizeRemaining: number;
  readMessageRemaining: number;
}

function isDecoder(x: unknown): x is DecoderFields {
  if (typeof x !== 'object' || x === null) return false;
  const d = x as Record<string, unknown>;
  return typeof d.readState === 'number' && typeof d.readSizeRemaining === 'number' && typeof d.readMessageRemaining === 'number';
}

/** The message decoder under a grpc-js server call, if this grpc-js version lets us find it. */
function decoderOf(call: grpc.ServerDuplexStream<Buffer, Buffer>): DecoderFields | undefined {
  return fieldBeneathCall(call, 'decoder', isDecoder);
}

/**
 * Bytes the message being received still lacks when the client ends its
 * side of `call` (0: it ended between messages); undefined when the decoder
 * cannot be found. Asked at the half-close, when no byte can follow.
 */
export function unfinishedBytes(call: grpc.ServerDuplexStream<Buffer, Buffer>): number | undefined {
  const d = decoderOf(call);
  if (!d) return undefined;
  // The flag byte was read, the 4 length bytes are coming: those are missing.
  if (d.readState === READING_SIZE) return d.readSizeRemaining;
  if (d.readState === READING_MESSAGE) return d.readMessageRemaining;
  return 0;
}
