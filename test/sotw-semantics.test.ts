/**
 * State-of-the-world ADS (StreamAggregatedResources) as the protocol text
 * describes it (the xDS protocol documentation, envoyproxy.io), over real gRPC with a raw SotW client. The
 * real gRPC client is exercised in relay-sotw-grpc.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { http, metricValue, parsePrometheus } from './support/admin';
import { withRelay } from './support/relay-fixture';
import { withSotwClient } from './support/sotw-client';
import { CLUSTER, ENDPOINT, LISTENER, xdstp } from './support/names';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const E = (rest: string): string => xdstp('a', ENDPOINT, rest);
const payloads = (r: { resources?: Array<{ value: Uint8Array }> } | undefined): string[] =>
  (r?.resources ?? []).map((a) => Buffer.from(a.value).toString()).sort();

test('SotW: a Listener response carries every requested listener, even those that did not change', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(LISTENER, L('x'), 'x1', 'v1');
    origin.setResource(LISTENER, L('y'), 'y1', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(LISTENER, [L('x'), L('y')]);
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 2, 'both listeners');
      origin.setResource(LISTENER, L('y'), 'y2', 'v2');
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).includes('y2'), 'the change');
      assert.deepEqual(payloads(c.of(LISTENER).at(-1)), ['x1', 'y2']);
    });
  });
});

test('SotW: a deleted Listener is omitted from the next full-state response', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(LISTENER, L('x'), 'x1', 'v1');
    origin.setResource(LISTENER, L('y'), 'y1', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(LISTENER, [L('x'), L('y')]);
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 2, 'both listeners');
      origin.removeResource(LISTENER, L('x'));
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 1, 'x omitted');
      assert.deepEqual(payloads(c.of(LISTENER).at(-1)), ['y1']);
    });
  });
});

test('SotW: an ACK is never answered with an unchanged response', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(ENDPOINT, E('e'), 'e1', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(ENDPOINT, [E('e')]);
      await c.waitFor(() => c.of(ENDPOINT).length === 1, 'the endpoint');
      await c.expectNoResponse(400);
      assert.equal(c.sent.length, 2, 'the request and its ACK');
    });
  });
});

test('SotW: a NACK keeps the stream; the rejected version is not resent, a newer one is', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(ENDPOINT, E('e'), 'bad', 'v1');
    await withSotwClient(address, { reject: (r) => (payloads(r).includes('bad') ? 'invalid endpoint' : undefined) }, async (c) => {
      c.request(ENDPOINT, [E('e')]);
      await c.waitFor(() => c.of(ENDPOINT).length === 1, 'the bad version');
      await c.expectNoResponse(300);
      origin.setResource(ENDPOINT, E('e'), 'good', 'v2');
      await c.waitFor(() => payloads(c.of(ENDPOINT).at(-1)).includes('good'), 'the newer version');
      assert.equal(c.of(ENDPOINT).length, 2);
      assert.equal(c.status, undefined);
    });
  });
});

test('SotW: an empty name list after names unsubscribes everything of that type, never a wildcard', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ origin, defaultOrigin, address }) => {
    origin.setResource(LISTENER, L('x'), 'x1', 'v1');
    defaultOrigin!.setResource(LISTENER, 'legacy-l', 'l1', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(LISTENER, [L('x')]);
      await c.waitFor(() => c.of(LISTENER).length === 1, 'x');
      c.request(LISTENER, []);
      await origin.waitFor(() => !origin.subscribedKeys(LISTENER).has(L('x')), 'x unsubscribed upstream');
      await c.expectNoResponse(300);
      assert.ok(!defaultOrigin!.subscribedNames(LISTENER).has('*'), 'no wildcard subscription');
    });
  });
});

test('SotW: an empty first Listener request is the legacy wildcard', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, address }) => {
    defaultOrigin!.setResource(LISTENER, 'l1', 'one', 'v1');
    defaultOrigin!.setResource(LISTENER, 'l2', 'two', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(LISTENER, []);
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 2, 'every listener');
      defaultOrigin!.setResource(LISTENER, 'l3', 'three', 'v1');
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 3, 'the new listener too');
    });
  });
});

test('SotW: an xdstp glob is honoured as a full-state collection', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(LISTENER, L('g/m1'), 'm1', 'v1');
    origin.setResource(LISTENER, L('g/m2'), 'm2', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(LISTENER, [L('g/*')]);
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 2, 'both members');
      origin.removeResource(LISTENER, L('g/m1'));
      await c.waitFor(() => payloads(c.of(LISTENER).at(-1)).length === 1, 'm1 gone from the state of the world');
      assert.deepEqual(payloads(c.of(LISTENER).at(-1)), ['m2']);
    });
  });
});

test('SotW: a request with a stale nonce is not answered', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(ENDPOINT, E('a'), 'a1', 'v1');
    origin.setResource(ENDPOINT, E('b'), 'b1', 'v1');
    await withSotwClient(address, { autoAck: false }, async (c) => {
      c.request(ENDPOINT, [E('a')]);
      await c.waitFor(() => c.of(ENDPOINT).length === 1, 'a');
      const stale = c.lastNonce(ENDPOINT);
      origin.setResource(ENDPOINT, E('a'), 'a2', 'v2');
      await c.waitFor(() => c.of(ENDPOINT).length === 2, 'a newer response');
      c.request(ENDPOINT, [E('a'), E('b')], stale);
      await c.expectNoResponse(300);
      c.request(ENDPOINT, [E('a'), E('b')]);
      await c.waitFor(() => payloads(c.of(ENDPOINT).at(-1)).includes('b1'), 'b, once the request is current');
    });
  });
});

test('SotW and delta clients of one name share one upstream subscription and both get the update', T, async () => {
  await withRelay({}, async ({ origin, address, client }) => {
    origin.setResource(CLUSTER, xdstp('a', CLUSTER, 'shared'), 's1', 'v1');
    const name = xdstp('a', CLUSTER, 'shared');
    const d = client();
    await withSotwClient(address, async (s) => {
      s.request(CLUSTER, [name]);
      d.subscribe(CLUSTER, [name]);
      await s.waitFor(() => s.of(CLUSTER).length === 1, 'sotw has it');
      await d.waitForVersion(CLUSTER, name, 'v1');
      origin.setResource(CLUSTER, name, 's2', 'v2');
      await s.waitFor(() => payloads(s.of(CLUSTER).at(-1)).includes('s2'), 'sotw updated');
      await d.waitForVersion(CLUSTER, name, 'v2');
      assert.equal(origin.subscribeCount(name), 1);
    });
  });
});

test('SotW streams show in /debug/clients and the metrics by protocol, and a drain sends them away', T, async () => {
  await withRelay({ admin: true }, async ({ origin, address, relay }) => {
    origin.setResource(ENDPOINT, E('e'), 'e1', 'v1');
    await withSotwClient(address, { nodeId: 'grpc-node-1' }, async (c) => {
      c.request(ENDPOINT, [E('e')]);
      await c.waitFor(() => c.of(ENDPOINT).length === 1, 'the endpoint');
      const port = relay.adminPort!;
      const clients = (await http(port, 'GET', '/debug/clients')).json as { clients: Array<{ protocol: string; node: { id: string } }> };
      assert.deepEqual(clients.clients.map((x) => [x.protocol, x.node.id]), [['sotw', 'grpc-node-1']]);
      const metrics = parsePrometheus((await http(port, 'GET', '/metrics')).text);
      assert.equal(metricValue(metrics, 'xdstp_relay_downstream_streams_open', { protocol: 'sotw' }), 1);
      assert.equal(metricValue(metrics, 'xdstp_relay_downstream_streams_open', { protocol: 'delta' }), 0);
      await http(port, 'POST', '/drain?period=0');
      await c.waitFor(() => c.status, 'the stream ended').catch(() => undefined);
      assert.equal(c.status?.code, grpc.status.UNAVAILABLE);
    });
  });
});

const C = (rest: string): string => xdstp('a', CLUSTER, rest);

test('SotW: a full state that asks for a glob and one of its members carries the member once', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(CLUSTER, C('g/m1?j=2&k=1'), 'm1', 'v1');
    origin.setResource(CLUSTER, C('g/m2?j=2&k=1'), 'm2', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(CLUSTER, [C('g/*?k=1&j=2'), C('g/m1?k=1&j=2')]);
      await c.waitFor(() => payloads(c.of(CLUSTER).at(-1)).includes('m2'), 'the glob');
      origin.setResource(CLUSTER, C('g/m1?j=2&k=1'), 'm1b', 'v2');
      await c.waitFor(() => payloads(c.of(CLUSTER).at(-1)).includes('m1b'), 'the change');
      for (const r of c.of(CLUSTER)) assert.equal(new Set(payloads(r)).size, payloads(r).length, `no resource twice in ${payloads(r).join(', ')}`);
      assert.deepEqual(payloads(c.of(CLUSTER).at(-1)), ['m1b', 'm2']);
    });
  });
});

test('SotW: a per-name response that answers a glob and one of its members carries the member once', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(ENDPOINT, E('g/m1?j=2&k=1'), 'm1', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(ENDPOINT, [E('g/*?k=1&j=2'), E('g/m1?k=1&j=2')]);
      await c.waitFor(() => c.of(ENDPOINT).length > 0, 'an answer');
      await c.expectNoResponse(200);
      for (const r of c.of(ENDPOINT)) assert.deepEqual(payloads(r), ['m1']);
    });
  });
});

test('SotW: a list that only drops a name its glob still covers gets no answer, and the member stays in later states', T, async () => {
  await withRelay({}, async ({ origin, address }) => {
    origin.setResource(CLUSTER, C('g/m1?j=2&k=1'), 'm1', 'v1');
    origin.setResource(CLUSTER, C('g/m2?j=2&k=1'), 'm2', 'v1');
    await withSotwClient(address, async (c) => {
      c.request(CLUSTER, [C('g/*?j=2&k=1'), C('g/m1?j=2&k=1')]);
      await c.waitFor(() => payloads(c.of(CLUSTER).at(-1)).length === 2, 'both members');
      await c.expectNoResponse(200);
      c.request(CLUSTER, [C('g/*?j=2&k=1')]);
      await c.expectNoResponse(400);
      origin.setResource(CLUSTER, C('g/m2?j=2&k=1'), 'm2b', 'v2');
      await c.waitFor(() => payloads(c.of(CLUSTER).at(-1)).includes('m2b'), 'the change');
      assert.deepEqual(payloads(c.of(CLUSTER).at(-1)), ['m1', 'm2b']);
    });
  });
});
