/**
 * What the relay reads and writes beneath a grpc-js server call
 * (src/downstream/grpc-call-internals.ts, src/proto/message-frame.ts, goaway.ts):
 * responses encoded with gRPC's prefix in front of them, written to the HTTP/2 stream
 * under the call and read by a real grpc-js client between the call's own
 * headers and status; requests read off that stream, not through grpc-js;
 * the call's HTTP/2 session for the per-connection GOAWAY. If a grpc-js
 * upgrade hides these, the relay falls back (the call's own writes and
 * reads, plain stream ends) and these tests fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { sessionOf } from '../src/downstream/goaway';
import { detachRequestReader, http2StreamOf, releaseCallMetadata } from '../src/downstream/grpc-call-internals';
import { DeltaAdsClient, deltaAdsServiceDefinition, openDeltaStream } from '../src/proto/ads-service';
import { encodeDeltaResponse } from '../src/proto/delta-response';
import { allocPrefixed, withPrefix } from '../src/proto/message-frame';
import { encodeSotwResponse } from '../src/proto/sotw-response';

type ServerCall = grpc.ServerDuplexStream<Buffer, Buffer>;

/**
 * A bare grpc-js server serving delta ADS with `handle`, and one client call
 * to it that sends one request: resolves with the messages the client read
 * and the status it ended with.
 */
async function oneCall(handle: (call: ServerCall) => void, endAfterHeaders = false): Promise<{ received: string[]; status: grpc.StatusObject }> {
  const server = new grpc.Server();
  server.addService(deltaAdsServiceDefinition, { DeltaAggregatedResources: handle });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const client = new DeltaAdsClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    const call = openDeltaStream(client);
    const received: string[] = [];
    call.on('data', (m: Buffer) => received.push(m.toString()));
    call.on('error', () => undefined);
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.write(Buffer.from([0x12, 0x00]));
    if (endAfterHeaders) call.once('metadata', () => call.end());
    return { received, status: await status };
  } finally {
    client.close();
    server.forceShutdown();
  }
}

/** A message allocated with its gRPC prefix, as the relay's encoders allocate responses. */
function prefixed(text: string): Buffer {
  const m = allocPrefixed(Buffer.byteLength(text));
  m.write(text);
  return m;
}

test('an encoded response carries its gRPC prefix (uncompressed, big-endian length) in front of it: framing it copies nothing', () => {
  for (const message of [
    encodeDeltaResponse('type.googleapis.com/T', [Buffer.from('resource')], ['gone'], '7'),
    encodeSotwResponse('type.googleapis.com/T', '3', [Buffer.from('payload')], '3', []),
    encodeDeltaResponse('type.googleapis.com/T', [Buffer.alloc(64 * 1024, 1)], [], '8'), // beyond the shared pool's size
  ]) {
    const bytes = withPrefix(message);
    assert.equal(bytes[0], 0);
    assert.equal(bytes.readUInt32BE(1), message.length);
    assert.deepEqual(bytes.subarray(5), message);
    assert.equal(bytes.buffer, message.buffer, 'the same allocation');
  }
  assert.throws(() => withPrefix(Buffer.alloc(16)), /gRPC prefix/, 'a buffer of its own has nothing in front of it');
});

test('a grpc-js client reads framed messages written under the call, then the status the call sends', async () => {
  let found = false;
  const { received, status } = await oneCall((call) => {
    const h2 = http2StreamOf(call);
    found = h2 !== undefined;
    call.once('data', () => {
      call.sendMetadata(new grpc.Metadata());
      h2?.write(withPrefix(prefixed('first')));
      h2?.write(withPrefix(prefixed('second')));
      call.end();
    });
  });
  assert.equal(found, true, 'the HTTP/2 stream under the call is found');
  assert.deepEqual(received, ['first', 'second']);
  assert.equal(status.code, grpc.status.OK);
});

test("a call's requests are read off its HTTP/2 stream, and grpc-js still tells the client's end and sends the status", async () => {
  // If an upgrade hides grpc-js's reader, the relay reads through grpc-js again: correct, and slower per ACK.
  let maxBytes: number | undefined;
  const frames: Buffer[] = [];
  let ended = false;
  const { status } = await oneCall((call) => {
    const reader = detachRequestReader(call);
    maxBytes = reader?.maxBytes;
    reader?.h2.on('data', (chunk: Buffer) => frames.push(chunk));
    call.on('data', () => assert.fail('grpc-js must not read a detached call'));
    call.on('end', () => {
      ended = true;
      call.end();
    });
    // The client ends its side once it has the response headers.
    call.sendMetadata(new grpc.Metadata());
  }, true);
  assert.equal(maxBytes, 4 * 1024 * 1024, "grpc-js's own limit for the call");
  assert.deepEqual([...Buffer.concat(frames)], [0, 0, 0, 0, 2, 0x12, 0x00], 'the request, prefix and all, as the client sent it');
  assert.equal(ended, true, "the client's end of stream reached the call");
  assert.equal(status.code, grpc.status.OK);
});

test('the per-connection GOAWAY reaches the HTTP/2 session grpc-js keeps on the call', async () => {
  // If an upgrade moves the session, draining would degrade to plain stream ends.
  let found: boolean | undefined;
  await oneCall((call) => {
    found = sessionOf(call) !== undefined;
    call.end();
  });
  assert.equal(found, true);
});

test('a call whose per-call metadata was let go of still ends with its status and details, and the shared empty set stays empty', async () => {
  // If an upgrade renames grpc-js's fields, every idle stream keeps ~0.45 KB more.
  const shared = new grpc.Metadata();
  let released: boolean | undefined;
  const ok = await oneCall((call) => {
    releaseCallMetadata(call, shared);
    released = call.metadata === shared;
    call.once('data', () => call.end());
  });
  assert.equal(released, true, "grpc-js's request metadata field is found and replaced");
  assert.equal(ok.status.code, grpc.status.OK);
  const failed = await oneCall((call) => {
    releaseCallMetadata(call, shared);
    call.once('data', () => call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: 'too many', metadata: new grpc.Metadata() }));
  });
  assert.equal(failed.status.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(failed.status.details, 'too many');
  assert.deepEqual(shared.getMap(), {}, 'nothing was added to the shared set');
});
