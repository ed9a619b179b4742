/**
 * Self-test of the real-gRPC-client harness, without the relay: a real
 * `@grpc/grpc-js-xds` client in a child process (test/support/grpc-xds-client.ts)
 * against a test-only state-of-the-world ADS server (test/support/sotw-origin.ts)
 * serving the Listener → RouteConfiguration → Cluster → ClusterLoadAssignment
 * chain (test/support/grpc-resources.ts) for local backends
 * (test/support/echo-backend.ts).
 *
 * Besides proving the harness, these pin down what the real client sends — its
 * ACKs and NACKs, its requests after a reconnect, and what a closed channel
 * looks like on the wire — which is what the relay's SotW stream must handle.
 * If these fail, the relay's gRPC tests (relay-sotw-grpc.test.ts) cannot be trusted.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { EchoBackend } from './support/echo-backend';
import {
  GrpcXdsClient,
  allAcked,
  federationBootstrap,
  legacyBootstrap,
  type GrpcBootstrap,
} from './support/grpc-xds-client';
import {
  encodePayload,
  endpointPortsOf,
  endpointsResource,
  grpcChain,
  legacyChainNames,
  xdstpChainNames,
  type ChainNames,
} from './support/grpc-resources';
import { CLUSTER, ENDPOINT, LISTENER, ROUTE } from './support/names';
import { SotwOrigin } from './support/sotw-origin';

const TARGET = 'xds:///my-service';
const T = { timeout: 30_000 };

let backendA: EchoBackend;
let backendB: EchoBackend;

before(async () => {
  backendA = await EchoBackend.start('A');
  backendB = await EchoBackend.start('B');
});

after(() => {
  backendA.stop();
  backendB.stop();
});

interface Env {
  origin: SotwOrigin;
  client: GrpcXdsClient;
  names: ChainNames;
}

/** A SotW origin serving the chain of `names` with the endpoint on backend A, and a real client bootstrapped at it. */
async function withChain(
  names: ChainNames,
  bootstrap: (originAddress: string) => GrpcBootstrap,
  body: (env: Env) => Promise<void>,
): Promise<void> {
  const origin = await SotwOrigin.start();
  let client: GrpcXdsClient | undefined;
  try {
    for (const r of grpcChain(names, [backendA.port])) origin.setResource(r.typeUrl, r.name, r.payload);
    client = await GrpcXdsClient.start(bootstrap(origin.address));
    await body({ origin, client, names });
  } finally {
    await client?.stop();
    origin.stop();
  }
}

const legacy = (body: (env: Env) => Promise<void>): Promise<void> =>
  withChain(legacyChainNames('my-service'), (address) => legacyBootstrap(address), body);

function chainOf(names: ChainNames): Array<{ typeUrl: string; name: string }> {
  return [
    { typeUrl: LISTENER, name: names.listener },
    { typeUrl: ROUTE, name: names.route },
    { typeUrl: CLUSTER, name: names.cluster },
    { typeUrl: ENDPOINT, name: names.endpoints },
  ];
}

function moveEndpointTo(origin: SotwOrigin, names: ChainNames, backend: EchoBackend): void {
  const r = endpointsResource(names, [backend.port]);
  origin.setResource(r.typeUrl, r.name, r.payload);
}

describe('real gRPC xDS client harness (no relay)', () => {
  test('the client resolves Listener → RouteConfiguration → Cluster → ClusterLoadAssignment over SotW ADS and its RPC reaches backend A', T, async () => {
    await legacy(async ({ origin, client, names }) => {
      const results = await client.callUntil(TARGET, 'A');
      assert.deepEqual(results.at(-1), { ok: true, backend: 'A' });
      const asked = (typeUrl: string): string[][] => origin.requestsOf(typeUrl).map((r) => r.names);
      assert.deepEqual(asked(LISTENER)[0], [names.listener]);
      assert.deepEqual(asked(ROUTE)[0], [names.route]);
      assert.deepEqual(asked(CLUSTER)[0], [names.cluster]);
      assert.deepEqual(asked(ENDPOINT)[0], [names.endpoints]);
    });
  });

  test('after the origin moves the endpoint to backend B, RPCs reach B within seconds', T, async () => {
    await legacy(async ({ origin, client, names }) => {
      await client.callUntil(TARGET, 'A');
      moveEndpointTo(origin, names, backendB);
      await client.callUntil(TARGET, 'B', 5000);
      const after = await client.call(TARGET);
      assert.deepEqual(after, { ok: true, backend: 'B' }, 'B is now the only endpoint');
    });
  });

  test('the client CSDS reports each name with the version it ACKed', T, async () => {
    await legacy(async ({ origin, client, names }) => {
      await client.callUntil(TARGET, 'A');
      moveEndpointTo(origin, names, backendB);
      await client.callUntil(TARGET, 'B', 5000);
      const held = await client.csdsUntil((rs) => allAcked(rs, chainOf(names)), 'the chain ACKED');
      const version = (typeUrl: string, name: string): string | undefined =>
        held.find((r) => r.typeUrl === typeUrl && r.name === name && r.status === 'ACKED')?.version;
      assert.equal(version(LISTENER, names.listener), '1');
      assert.equal(version(ROUTE, names.route), '1');
      assert.equal(version(CLUSTER, names.cluster), '1');
      assert.equal(version(ENDPOINT, names.endpoints), '2', 'the moved endpoint is the second ClusterLoadAssignment version');
      assert.equal(origin.versionOf(ENDPOINT), '2');
      const eds = held.find((r) => r.typeUrl === ENDPOINT)!;
      assert.deepEqual(endpointPortsOf(eds.config), [backendB.port], 'CSDS carries the accepted payload');
    });
  });

  test('with a federation bootstrap the client asks for xdstp names under the authority and its RPC reaches backend A', T, async () => {
    const names = xdstpChainNames('a', 'my-service');
    await withChain(names, (address) => federationBootstrap(address, 'a'), async ({ origin, client }) => {
      await client.callUntil(TARGET, 'A');
      assert.deepEqual(origin.requestsOf(LISTENER)[0]!.names, ['xdstp://a/envoy.config.listener.v3.Listener/my-service']);
      const held = await client.csdsUntil((rs) => allAcked(rs, chainOf(names)), 'the xdstp chain ACKED');
      assert.deepEqual(held.map((r) => r.name).sort(), Object.values(names).sort());
    });
  });

  test('the client NACKs an invalid ClusterLoadAssignment with error_detail and its last accepted version, and keeps using the old one', T, async () => {
    await legacy(async ({ origin, client, names }) => {
      await client.callUntil(TARGET, 'A');
      await client.csdsUntil((rs) => allAcked(rs, chainOf(names)), 'the chain ACKED');
      // A locality is required: gRPC rejects this one.
      const invalid = encodePayload({
        '@type': ENDPOINT,
        cluster_name: names.endpoints,
        endpoints: [{ load_balancing_weight: 1, lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: backendB.port } } } }] }],
      });
      origin.setResource(ENDPOINT, names.endpoints, invalid);
      const nack = await origin.waitFor(() => origin.requestsOf(ENDPOINT).find((r) => r.errorDetail), 'a NACK');
      assert.equal(nack.errorDetail!.code, grpc.status.UNAVAILABLE, 'grpc-js-xds NACKs with code UNAVAILABLE');
      assert.match(nack.errorDetail!.message ?? '', /locality unset/);
      assert.equal(nack.versionInfo, '1', 'a NACK carries the last accepted version');
      const eds = (await client.csdsUntil((rs) => rs.some((r) => r.typeUrl === ENDPOINT && r.status === 'NACKED'), 'EDS NACKED')).find(
        (r) => r.typeUrl === ENDPOINT,
      )!;
      assert.equal(eds.version, '1', 'CSDS keeps the accepted version');
      assert.equal(eds.error?.version, '2', 'and names the rejected one');
      assert.deepEqual(await client.call(TARGET), { ok: true, backend: 'A' });
    });
  });

  test('closing the channel sends an empty name list for every type it watched', T, async () => {
    await legacy(async ({ origin, client }) => {
      await client.callUntil(TARGET, 'A');
      const before = origin.requests.length;
      await client.closeChannel(TARGET);
      const emptied = await origin.waitFor(() => {
        const emptyTypes = new Set(origin.requests.slice(before).filter((r) => r.names.length === 0).map((r) => r.typeUrl));
        return emptyTypes.size === 4 ? emptyTypes : undefined;
      }, 'an empty request per type');
      assert.deepEqual([...emptied].sort(), [CLUSTER, ENDPOINT, LISTENER, ROUTE].sort());
      // With nothing left to watch the client half-closes the stream.
      await origin.waitFor(() => origin.streamCount === 0, 'the ADS stream closed');
    });
  });

  test('after the server restarts, the client asks again for every name with the versions it holds and no nonce, and RPCs keep working', T, async () => {
    await legacy(async ({ origin, client, names }) => {
      await client.callUntil(TARGET, 'A');
      moveEndpointTo(origin, names, backendB);
      await client.callUntil(TARGET, 'B', 5000);
      const before = origin.requests.length;
      await origin.restart();
      const first = await origin.waitFor(() => {
        const fresh = origin.requests.slice(before);
        return fresh.length >= 4 ? fresh.slice(0, 4) : undefined;
      }, 'four requests on the new stream', 10_000);
      const byType = new Map(first.map((r) => [r.typeUrl, r]));
      assert.deepEqual(byType.get(LISTENER)?.names, [names.listener]);
      assert.equal(byType.get(LISTENER)?.node?.id, 'grpc-xds-test', 'the first request of the new stream carries node');
      assert.equal(byType.get(ENDPOINT)?.versionInfo, '2');
      assert.equal(byType.get(ROUTE)?.versionInfo, '1');
      for (const r of first) assert.equal(r.nonce, '', `${r.typeUrl} is asked for without a nonce`);
      assert.deepEqual(await client.call(TARGET), { ok: true, backend: 'B' });
    });
  });
});
