/**
 * Requests as the relay reads them off an HTTP/2 stream's DATA frames: whole
 * gRPC messages, however the frames cut them, a message that fits in its
 * frame read without a copy, an oversized one refused before its bytes are
 * held, and what a message cut off by the end of the stream lacks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readRequestFrames, type PartialRequest, type RequestFrameSink } from '../src/downstream/framing';

function framed(body: Buffer): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

class Collect implements RequestFrameSink {
  readonly requests: Buffer[] = [];
  readonly oversized: Array<[number, number]> = [];
  open = true;
  onRequest(bytes: Buffer): void {
    this.requests.push(bytes);
  }
  onOversized(length: number, max: number): void {
    this.oversized.push([length, max]);
  }
}

/** Feeds `frames` in order; returns what is left unfinished after the last. */
function feed(frames: Buffer[], sink: Collect, max = -1): PartialRequest | undefined {
  let partial: PartialRequest | undefined;
  for (const f of frames) partial = readRequestFrames(f, partial, max, sink);
  return partial;
}

const bodies = [Buffer.from('first request'), Buffer.alloc(0), Buffer.from('x'.repeat(300)), Buffer.from('last')];
const stream = Buffer.concat(bodies.map(framed));

test('a frame holding several whole messages gives each, as a view of the frame', () => {
  const sink = new Collect();
  const left = feed([stream], sink);
  assert.equal(left, undefined);
  assert.deepEqual(sink.requests.map(String), bodies.map(String));
  for (const r of sink.requests) assert.equal(r.buffer, stream.buffer, 'a message inside one frame is not copied');
});

test('messages cut by frames at every byte reassemble exactly', () => {
  for (let cut = 1; cut < stream.length; cut++) {
    const sink = new Collect();
    const left = feed([stream.subarray(0, cut), stream.subarray(cut)], sink);
    assert.equal(left, undefined, `cut at ${cut}`);
    assert.deepEqual(sink.requests.map(String), bodies.map(String), `cut at ${cut}`);
  }
});

test('a message arriving a byte per frame reassembles exactly', () => {
  const sink = new Collect();
  const frames: Buffer[] = [];
  for (let i = 0; i < stream.length; i++) frames.push(stream.subarray(i, i + 1));
  assert.equal(feed(frames, sink), undefined);
  assert.deepEqual(sink.requests.map(String), bodies.map(String));
});

test('a message cut off tells what it lacks: the rest of its prefix, then the rest of its body', () => {
  const one = framed(Buffer.from('0123456789'));
  for (let got = 1; got < one.length; got++) {
    const left = feed([one.subarray(0, got)], new Collect());
    assert.ok(left, `after ${got} bytes`);
    assert.equal(left.missing, got < 5 ? 5 - got : one.length - got, `after ${got} bytes`);
  }
});

test('a message declaring more than the limit is refused at its prefix, and nothing after it is read', () => {
  const big = framed(Buffer.alloc(101));
  const small = framed(Buffer.from('ok'));
  const sink = new Collect();
  assert.equal(feed([Buffer.concat([small, big.subarray(0, 3)]), big.subarray(3, 40)], sink, 100), undefined);
  assert.deepEqual(sink.requests.map(String), ['ok']);
  assert.deepEqual(sink.oversized, [[101, 100]]);
  // A message of exactly the limit is accepted.
  const at = new Collect();
  feed([framed(Buffer.alloc(100))], at, 100);
  assert.equal(at.requests.length, 1);
  assert.deepEqual(at.oversized, []);
});

test('a stream that ends while a frame is read gets none of the frame’s later messages', () => {
  const sink = new Collect();
  sink.onRequest = function (this: Collect, bytes: Buffer): void {
    this.requests.push(bytes);
    this.open = false;
  };
  feed([stream], sink);
  assert.deepEqual(sink.requests.map(String), ['first request']);
});
