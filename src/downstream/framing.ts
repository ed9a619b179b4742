/**
 * Request messages as the relay reads them off an HTTP/2 stream: whole gRPC
 * messages out of DATA frames, and a message cut off by the client's end of
 * stream noticed.
 *
 * The relay reads its streams' requests itself (see detachRequestReader in
 * grpc-call-internals.ts): per message grpc-js copies it out of its frame,
 * pauses the HTTP/2 stream, decodes it in a promise and passes it through an
 * object-mode stream, where an ADS client's ACK needs none of that. Here a
 * message that lies whole inside one DATA frame (an ACK, far smaller than a
 * frame, as Envoy and grpc-js write it) is a view of that frame; only one
 * split across frames is copied, once.
 *
 * A client that half-closes in the middle of a message has sent a malformed
 * request: at the half-close the relay asks the stream's PartialRequest (or,
 * for a stream grpc-js reads, grpc-js's decoder: unfinishedBytes in
 * grpc-call-internals.ts) what is missing.
 */
/** The gRPC message prefix: a compressed flag and a 4-byte big-endian length. */
const PREFIX = 5;

/** A message whose bytes span DATA frames, as far as it has arrived. */
export class PartialRequest {
  /** The prefix, while it is itself incomplete (undefined once the length is known). */
  private prefix: Buffer | undefined;
  private prefixBytes = 0;
  private readonly parts: Buffer[] = [];
  /** The message's length (valid once the prefix is whole). */
  private length = 0;
  private received = 0;

  /** Starts from the tail of a frame: `bytes` holds the start of a message, prefix included, and not all of it. */
  constructor(bytes: Buffer) {
    if (bytes.length < PREFIX) {
      this.prefix = Buffer.alloc(PREFIX);
      bytes.copy(this.prefix);
      this.prefixBytes = bytes.length;
      return;
    }
    this.length = bytes.readUInt32BE(1);
    this.parts.push(bytes.subarray(PREFIX));
    this.received = bytes.length - PREFIX;
  }

  /** The message's length once its prefix is whole; undefined before. */
  get declaredLength(): number | undefined {
    return this.prefix === undefined ? this.length : undefined;
  }

  /** Bytes still missing: the rest of the prefix, else the rest of the message. */
  get missing(): number {
    return this.prefix !== undefined ? PREFIX - this.prefixBytes : this.length - this.received;
  }

  /**
   * Takes what it lacks from the start of `chunk`; returns how many bytes it
   * took. It is whole when `missing` is 0 after the prefix was read.
   */
  take(chunk: Buffer): number {
    let took = 0;
    if (this.prefix !== undefined) {
      took = Math.min(PREFIX - this.prefixBytes, chunk.length);
      chunk.copy(this.prefix, this.prefixBytes, 0, took);
      this.prefixBytes += took;
      if (this.prefixBytes < PREFIX) return took;
      this.length = this.prefix.readUInt32BE(1);
      this.prefix = undefined;
    }
    const n = Math.min(this.length - this.received, chunk.length - took);
    if (n > 0) {
      this.parts.push(chunk.subarray(took, took + n));
      this.received += n;
    }
    return took + n;
  }

  /** The whole message, once `missing` is 0: its parts copied into one buffer. */
  message(): Buffer {
    return this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.length);
  }
}

/** Where readRequestFrames hands what it finds. */
export interface RequestFrameSink {
  /** One whole request message (without its prefix). */
  onRequest(bytes: Buffer): void;
  /** A message declares more than `max` bytes: nothing more is read from the stream. */
  onOversized(length: number, max: number): void;
  /** False once the stream is over: the frame's remaining messages are dropped. */
  readonly open: boolean;
}

/**
 * Reads the messages in one DATA frame, continuing `partial` (the message the
 * frame before left unfinished); returns the message this frame leaves
 * unfinished, or undefined when it ends between messages (or the stream is
 * over). `max` is the largest message the stream accepts (-1: any).
 */
export function readRequestFrames(chunk: Buffer, partial: PartialRequest | undefined, max: number, sink: RequestFrameSink): PartialRequest | undefined {
  let at = 0;
  if (partial) {
    at = partial.take(chunk);
    const length = partial.declaredLength;
    if (length !== undefined && tooLarge(length, max)) {
      sink.onOversized(length, max);
      return undefined;
    }
    if (partial.missing > 0) return partial;
    sink.onRequest(partial.message());
  }
  while (at < chunk.length && sink.open) {
    if (chunk.length - at < PREFIX) return new PartialRequest(chunk.subarray(at));
    const length = chunk.readUInt32BE(at + 1);
    if (tooLarge(length, max)) {
      sink.onOversized(length, max);
      return undefined;
    }
    const end = at + PREFIX + length;
    if (end > chunk.length) return new PartialRequest(chunk.subarray(at));
    sink.onRequest(chunk.subarray(at + PREFIX, end));
    at = end;
  }
  return undefined;
}

/** Whether a message of `length` bytes is over `max` (-1: no limit), as grpc-js judges it. */
function tooLarge(length: number, max: number): boolean {
  return max !== -1 && length > max;
}
