/**
 * Malformed requests a real gRPC client (or a hostile one) can send, against
 * a real relay: strings inside `node` that are not UTF-8, and a request
 * message cut off by the client's end of stream. Each ends only its own
 * stream with an error status; a well-behaved client next to it keeps
 * receiving updates.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import { withRelay, type RelayEnv } from './support/relay-fixture';
import { CLUSTER, LISTENER, xdstp } from './support/names';
import { withSotwClient } from './support/sotw-client';
import { DELTA_ADS_PATH, SOTW_ADS_PATH, grpcMessage } from './support/raw-h2';
import { lenField, stringField } from '../src/proto/wire';
import { deltaRequestCodec, discoveryRequestCodec } from '../src/proto/messages';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const WATCHED = L('integrity/watched');
/** A truncated two-byte UTF-8 sequence: not valid UTF-8 anywhere. */
const NOT_UTF8 = Buffer.from([0x63, 0x61, 0x66, 0xc3, 0x28]);

/** A subscribed, synced delta client, and a check that an update still reaches it. */
async function bystander(env: RelayEnv): Promise<{ stillServed(version: string): Promise<void> }> {
  env.origin.setResource(LISTENER, WATCHED, 'payload-v1', 'v1');
  const c = env.client({ nodeId: 'bystander' });
  c.subscribe(LISTENER, [WATCHED]);
  await c.waitForVersion(LISTENER, WATCHED, 'v1');
  return {
    stillServed: async (version: string) => {
      env.origin.setResource(LISTENER, WATCHED, `payload-${version}`, version);
      await c.waitForVersion(LISTENER, WATCHED, version);
      assert.equal(c.status, undefined, 'the well-behaved stream is still open');
    },
  };
}

// ------------------------------------------------------------ node strings

/** Node fields (wire-encoded inside a Node) each carrying a string that is not UTF-8. */
const BAD_NODES: Array<[string, Buffer]> = [
  ['id', lenField(1, NOT_UTF8)],
  ['cluster', Buffer.concat([stringField(1, 'ok-id'), lenField(2, NOT_UTF8)])],
  ['user_agent_name', Buffer.concat([stringField(1, 'ok-id'), lenField(6, NOT_UTF8)])],
  ['user_agent_version', Buffer.concat([stringField(1, 'ok-id'), lenField(7, NOT_UTF8)])],
  ['locality.zone', Buffer.concat([stringField(1, 'ok-id'), lenField(4, Buffer.concat([stringField(1, 'region'), lenField(2, NOT_UTF8)]))])],
  ['client_features', Buffer.concat([stringField(1, 'ok-id'), stringField(10, 'fine'), lenField(10, NOT_UTF8)])],
  // Extension{ name (1) }, after one that is fine.
  ['extensions.name', Buffer.concat([stringField(1, 'ok-id'), lenField(9, stringField(1, 'envoy.fine')), lenField(9, lenField(1, NOT_UTF8))])],
  // metadata: Struct{ fields: { "k": Value{ string_value } } }
  ['metadata value', Buffer.concat([stringField(1, 'ok-id'), lenField(3, lenField(1, Buffer.concat([stringField(1, 'k'), lenField(2, lenField(3, NOT_UTF8))])))])],
  ['metadata key', Buffer.concat([stringField(1, 'ok-id'), lenField(3, lenField(1, Buffer.concat([lenField(1, NOT_UTF8), lenField(2, stringField(3, 'v'))])))])],
];

for (const [field, node] of BAD_NODES) {
  test(`delta: node.${field} that is not valid UTF-8 ends the stream with INVALID_ARGUMENT and leaves others alone`, T, async () => {
    await withRelay({}, async (env) => {
      const others = await bystander(env);
      const bad = env.client();
      bad.sendRaw(Buffer.concat([lenField(1, node), stringField(2, LISTENER), stringField(3, L('integrity/x'))]));
      const end = await bad.waitForEnd();
      assert.equal(end.code, grpc.status.INVALID_ARGUMENT, end.details);
      assert.match(end.details, /UTF-8/);
      await others.stillServed('v2');
    });
  });
}

test('sotw: node.id that is not valid UTF-8 ends the stream with INVALID_ARGUMENT and leaves others alone', T, async () => {
  await withRelay({}, async (env) => {
    const others = await bystander(env);
    await withSotwClient(env.address, async (bad) => {
      // DiscoveryRequest: node = 2, resource_names = 3, type_url = 4.
      bad.sendRaw(Buffer.concat([lenField(2, lenField(1, NOT_UTF8)), stringField(3, L('integrity/x')), stringField(4, LISTENER)]));
      const end = await bad.waitForEnd();
      assert.equal(end.code, grpc.status.INVALID_ARGUMENT, end.details);
      assert.match(end.details, /node\.id.*UTF-8/);
      await others.stillServed('v2');
    });
  });
});

test('sotw: a client repeating its node in every request is served, and one whose repeated node is not valid UTF-8 is refused', T, async () => {
  await withRelay({}, async (env) => {
    env.origin.setResource(LISTENER, WATCHED, 'payload-v1', 'v1');
    const node = Buffer.concat([stringField(1, 'repeater'), lenField(9, stringField(1, 'envoy.filters.http.router'))]);
    // DiscoveryRequest: version_info = 1, node = 2, resource_names = 3, type_url = 4, response_nonce = 5.
    const request = (nodeBytes: Buffer, version = '', nonce = ''): Buffer =>
      Buffer.concat([stringField(1, version), lenField(2, nodeBytes), stringField(3, WATCHED), stringField(4, LISTENER), stringField(5, nonce)]);
    await withSotwClient(env.address, async (c) => {
      c.sendRaw(request(node));
      const first = await c.waitFor(() => c.responses[0], 'the first state of the world');
      c.sendRaw(request(node, first.version_info, first.nonce));
      env.origin.setResource(LISTENER, WATCHED, 'payload-v2', 'v2');
      const second = await c.waitFor(() => c.responses[1], 'the update after an ACK repeating the node');
      assert.equal(c.status, undefined, 'a repeated node is accepted');
      const bad = Buffer.concat([node, lenField(9, lenField(1, NOT_UTF8))]);
      c.sendRaw(request(bad, second.version_info, second.nonce));
      const end = await c.waitForEnd();
      assert.equal(end.code, grpc.status.INVALID_ARGUMENT, end.details);
      assert.match(end.details, /node\.extensions\.name.*UTF-8/);
    });
  });
});

test('sotw: a metadata string in node that is not valid UTF-8 ends the stream with INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async (env) => {
    await withSotwClient(env.address, async (bad) => {
      const node = BAD_NODES.find(([f]) => f === 'metadata value')![1];
      bad.sendRaw(Buffer.concat([lenField(2, node), stringField(3, L('integrity/x')), stringField(4, LISTENER)]));
      const end = await bad.waitForEnd();
      assert.equal(end.code, grpc.status.INVALID_ARGUMENT, end.details);
    });
  });
});

test('delta: a node whose metadata nests deeper than protobuf parsers allow ends the stream with INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async (env) => {
    const others = await bystander(env);
    // Value{ struct_value (5): Struct{ fields (1): { key, Value } } }, 300 levels down.
    let value = stringField(3, 'bottom');
    for (let i = 0; i < 300; i++) value = lenField(5, lenField(1, Buffer.concat([stringField(1, 'k'), lenField(2, value)])));
    const node = Buffer.concat([stringField(1, 'deep'), lenField(3, lenField(1, Buffer.concat([stringField(1, 'top'), lenField(2, value)])))]);
    const bad = env.client();
    bad.sendRaw(Buffer.concat([lenField(1, node), stringField(2, LISTENER), stringField(3, L('integrity/x'))]));
    const end = await bad.waitForEnd();
    assert.equal(end.code, grpc.status.INVALID_ARGUMENT, end.details);
    await others.stillServed('v2');
  });
});

test('delta: a node with valid UTF-8 everywhere (non-ASCII included) is served', T, async () => {
  await withRelay({}, async (env) => {
    env.origin.setResource(LISTENER, WATCHED, 'payload-v1', 'v1');
    const c = env.client({ nodeId: 'nœud-ü-日本', node: { cluster: 'grappe-é', locality: { zone: 'zone-ß' }, metadata: { fields: { clé: { string_value: 'valeur-ø' } } } } });
    c.subscribe(LISTENER, [WATCHED]);
    await c.waitForVersion(LISTENER, WATCHED, 'v1');
    assert.equal(c.status, undefined);
  });
});

// ------------------------------------------------------------ truncated messages

interface CallEnd {
  /** grpc-status from the trailers (or a trailers-only response); undefined when none came. */
  status: number | undefined;
  message: string;
  /** gRPC messages the relay sent before ending. */
  messages: number;
}

/** How long a call waiting for responses waits for them before ending its side anyway (the assertions then say what was missing). */
const RESPONSES_WAIT_MS = 5000;

/**
 * One ADS call over node's own HTTP/2 client, which writes whatever bytes it
 * is given: `chunks` go out as DATA frames, then END_STREAM (after the
 * responses asked for, or RESPONSES_WAIT_MS without them). Resolves with the
 * status the relay ended the call with.
 */
function callWithBytes(port: number, path: string, chunks: Buffer[], opts: { endAfterFirstResponse?: boolean; endAfterResponses?: number; headers?: http2.OutgoingHttpHeaders } = {}): Promise<CallEnd> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...opts.headers });
    const out: CallEnd = { status: undefined, message: '', messages: 0 };
    const take = (h: http2.IncomingHttpHeaders): void => {
      if (h['grpc-status'] !== undefined) {
        out.status = Number(h['grpc-status']);
        out.message = decodeURIComponent(String(h['grpc-message'] ?? ''));
      }
    };
    req.on('response', take);
    req.on('trailers', take);
    let received = Buffer.alloc(0);
    const endAfter = opts.endAfterResponses ?? (opts.endAfterFirstResponse ? 1 : 0);
    const finish = (): void => {
      clearTimeout(waiting);
      req.end();
    };
    const waiting = endAfter > 0 ? setTimeout(finish, RESPONSES_WAIT_MS) : undefined;
    req.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      // Count whole length-prefixed messages.
      while (received.length >= 5 && received.length >= 5 + received.readUInt32BE(1)) {
        received = received.subarray(5 + received.readUInt32BE(1));
        if (++out.messages === endAfter) finish();
      }
    });
    req.on('close', () => {
      clearTimeout(waiting);
      session.close();
      resolve(out);
    });
    req.on('error', () => {
      /* the close event tells */
    });
    for (const c of chunks) req.write(c);
    if (endAfter === 0) finish();
  });
}

function deltaSubscribe(name: string): Buffer {
  return grpcMessage(deltaRequestCodec.encode({ node: { id: 'cut-off' }, type_url: LISTENER, resource_names_subscribe: [name] }));
}

function sotwRequest(name: string): Buffer {
  return grpcMessage(discoveryRequestCodec.encode({ node: { id: 'cut-off' }, type_url: LISTENER, resource_names: [name] }));
}

test('delta: a request cut off mid-message by the end of the stream ends it with INVALID_ARGUMENT, not OK', T, async () => {
  await withRelay({}, async (env) => {
    const others = await bystander(env);
    const whole = deltaSubscribe(L('integrity/cut'));
    const end = await callWithBytes(env.relay.port, DELTA_ADS_PATH, [whole.subarray(0, whole.length - 3)]);
    assert.equal(end.status, grpc.status.INVALID_ARGUMENT, end.message);
    assert.match(end.message, /cut off/);
    await others.stillServed('v2');
  });
});

test('delta: a request cut off inside its 5-byte length prefix ends the stream with INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async (env) => {
    const whole = deltaSubscribe(L('integrity/cut'));
    const end = await callWithBytes(env.relay.port, DELTA_ADS_PATH, [whole, whole.subarray(0, 3)]);
    assert.equal(end.status, grpc.status.INVALID_ARGUMENT, end.message);
  });
});

test('delta: a stream that served a request, then sent half a message and ended, ends with INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('integrity/held'), 'held', 'v1');
    const whole = deltaSubscribe(L('integrity/held'));
    const end = await callWithBytes(env.relay.port, DELTA_ADS_PATH, [whole, whole.subarray(0, 9)], { endAfterFirstResponse: true });
    assert.equal(end.messages, 1, 'the complete request was answered');
    assert.equal(end.status, grpc.status.INVALID_ARGUMENT, end.message);
  });
});

test('delta: a complete request split over many DATA frames, then the end of the stream, ends with OK', T, async () => {
  await withRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('integrity/split'), 'split', 'v1');
    const whole = deltaSubscribe(L('integrity/split'));
    const chunks: Buffer[] = [];
    for (let i = 0; i < whole.length; i += 3) chunks.push(whole.subarray(i, i + 3));
    const end = await callWithBytes(env.relay.port, DELTA_ADS_PATH, chunks, { endAfterFirstResponse: true });
    assert.equal(end.messages, 1);
    assert.equal(end.status, grpc.status.OK, end.message);
  });
});

test('delta: several requests in one DATA frame are each applied, in order', T, async () => {
  await withRelay({}, async (env) => {
    // Two types: each request is answered by a response of its own.
    const cluster = xdstp('a', CLUSTER, 'integrity/two');
    env.origin.setResource(LISTENER, L('integrity/one'), 'one', 'v1');
    env.origin.setResource(CLUSTER, cluster, 'two', 'v1');
    const second = grpcMessage(deltaRequestCodec.encode({ type_url: CLUSTER, resource_names_subscribe: [cluster] }));
    const end = await callWithBytes(env.relay.port, DELTA_ADS_PATH, [Buffer.concat([deltaSubscribe(L('integrity/one')), second])], { endAfterResponses: 2 });
    assert.equal(end.messages, 2, 'both subscriptions were answered');
    assert.equal(end.status, grpc.status.OK, end.message);
  });
});

test('delta: a client that compresses its requests (grpc-encoding gzip) is served', T, async () => {
  await withRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('integrity/gzip'), 'gzip', 'v1');
    const body = gzipSync(deltaRequestCodec.encode({ node: { id: 'gzip' }, type_url: LISTENER, resource_names_subscribe: [L('integrity/gzip')] }));
    const message = grpcMessage(body);
    message[0] = 1; // compressed
    const end = await callWithBytes(env.relay.port, DELTA_ADS_PATH, [message], { endAfterFirstResponse: true, headers: { 'grpc-encoding': 'gzip' } });
    assert.equal(end.messages, 1, 'the compressed subscription was answered');
    assert.equal(end.status, grpc.status.OK, end.message);
  });
});

test('sotw: a request cut off mid-message by the end of the stream ends it with INVALID_ARGUMENT, not OK', T, async () => {
  await withRelay({}, async (env) => {
    const others = await bystander(env);
    const whole = sotwRequest(L('integrity/cut'));
    const end = await callWithBytes(env.relay.port, SOTW_ADS_PATH, [whole.subarray(0, whole.length - 1)]);
    assert.equal(end.status, grpc.status.INVALID_ARGUMENT, end.message);
    await others.stillServed('v2');
  });
});

test('sotw: a complete request, then the end of the stream, ends with OK', T, async () => {
  await withRelay({}, async (env) => {
    env.origin.setResource(LISTENER, L('integrity/whole'), 'whole', 'v1');
    const end = await callWithBytes(env.relay.port, SOTW_ADS_PATH, [sotwRequest(L('integrity/whole'))], { endAfterFirstResponse: true });
    assert.equal(end.messages, 1);
    assert.equal(end.status, grpc.status.OK, end.message);
  });
});

test('a truncated request is counted as a bad request', T, async () => {
  await withRelay({}, async (env) => {
    const whole = deltaSubscribe(L('integrity/cut'));
    await callWithBytes(env.relay.port, DELTA_ADS_PATH, [whole.subarray(0, 7)]);
    const text = await env.relay.metrics.registry.metrics();
    assert.match(text, /xdstp_relay_bad_requests_total\{reason="truncated"\} 1/);
  });
});
