/**
 * Responses framed once and written to the HTTP/2 stream under a grpc-js
 * call (src/downstream/framed-writes.ts): the prefix is gRPC's, and a real
 * grpc-js client reads such a message between the call's own headers and
 * status, as if grpc-js had written it. If a grpc-js upgrade hides the
 * HTTP/2 stream, the relay falls back to the call's own writes and the
 * second test fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { framed } from '../src/downstream/framed-writes';
import { http2StreamOf } from '../src/downstream/grpc-call-internals';
import { DeltaAdsClient, deltaAdsServiceDefinition, openDeltaStream } from '../src/proto/ads-service';

test('a message gets the gRPC prefix (uncompressed, big-endian length) once: the same framed bytes for every stream', () => {
  const message = Buffer.from('a shared response');
  const bytes = framed(message);
  assert.equal(bytes[0], 0);
  assert.equal(bytes.readUInt32BE(1), message.length);
  assert.deepEqual(bytes.subarray(5), message);
  assert.equal(framed(message), bytes, 'made once per message');
  assert.notEqual(framed(Buffer.from('a shared response')), bytes, 'per message object, not per content');
});

test('a grpc-js client reads framed messages written under the call, then the status the call sends', async () => {
  const server = new grpc.Server();
  let found = false;
  server.addService(deltaAdsServiceDefinition, {
    DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      const h2 = http2StreamOf(call);
      found = h2 !== undefined;
      call.once('data', () => {
        call.sendMetadata(new grpc.Metadata());
        h2?.write(framed(Buffer.from('first')));
        h2?.write(framed(Buffer.from('second')));
        call.end();
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const client = new DeltaAdsClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    const call = openDeltaStream(client);
    const received: string[] = [];
    call.on('data', (m: Buffer) => received.push(m.toString()));
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    call.write(Buffer.from([0x12, 0x00]));
    const s = await status;
    assert.equal(found, true, "the HTTP/2 stream under the call is found");
    assert.deepEqual(received, ['first', 'second']);
    assert.equal(s.code, grpc.status.OK);
  } finally {
    client.close();
    server.forceShutdown();
  }
});
