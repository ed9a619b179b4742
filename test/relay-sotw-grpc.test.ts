/**
 * gRPC's proxyless clients through the relay, proven with the real
 * client: `@grpc/grpc-js-xds` in a child process (test/support/grpc-xds-client.ts)
 * speaks state-of-the-world ADS to the relay (the real CLI, spawned), which
 * speaks delta upstream to the test origin (test/support/origin.ts) serving
 * the Listener → RouteConfiguration → Cluster → ClusterLoadAssignment chain
 * for local backends. What the client holds is read from its own CSDS
 * (gRFC A40), not only inferred from RPCs succeeding.
 *
 * Both bootstrap forms run the main sequence: legacy names (`xds:///my-service`
 * → Listener `my-service`) through `--default-upstream`, and xdstp federation
 * names (an `authorities` entry whose server is the relay, plus
 * `client_default_listener_resource_name_template`) through `--authority`.
 * The harness itself is checked without the relay by grpc-xds-harness.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { legacyKey } from '../src/engine/routing';
import { spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { EchoBackend } from './support/echo-backend';
import {
  GrpcXdsClient,
  allAcked,
  federationBootstrap,
  fmtCsds,
  legacyBootstrap,
  type CsdsResource,
  type GrpcBootstrap,
} from './support/grpc-xds-client';
import {
  encodePayload,
  endpointPortsOf,
  endpointsResource,
  grpcChain,
  legacyChainNames,
  publish,
  xdstpChainNames,
  type ChainNames,
} from './support/grpc-resources';
import { CLUSTER, ENDPOINT, LISTENER, ROUTE, isXdstp, keyOf } from './support/names';
import { TestOrigin } from './support/origin';
import { freePort } from './support/ports';
import { RedisServer, redisSkip } from './support/redis-server';
import { sleep } from './support/wait';
import { storedVersion } from './support/redis-records';
import { fetchStatus, streamsOf } from './support/csds';
import { pollUntil } from './support/admin';


const TARGET = 'xds:///my-service';
const AUTHORITY = 'a';
const T = { timeout: 40_000 };
/** How long an update may take to reach the client ("within seconds"). */
const PROPAGATION_MS = 5000;
/** A client reconnecting to a restarted relay waits out grpc-js' reconnect backoff (1 s, 1.6 s, …). */
const RECONNECT_MS = 15_000;

interface Form {
  label: string;
  names: ChainNames;
  /** The relay flags that send these names to `origin`. */
  upstreamArgs(origin: TestOrigin): string[];
  bootstrap(relayAddress: string, nodeId: string): GrpcBootstrap;
}

const LEGACY: Form = {
  label: 'legacy names through --default-upstream',
  names: legacyChainNames('my-service'),
  upstreamArgs: (origin) => ['--default-upstream', origin.uri],
  bootstrap: (address, nodeId) => legacyBootstrap(address, { nodeId }),
};

const FEDERATION: Form = {
  label: 'xdstp federation names through --authority',
  names: xdstpChainNames(AUTHORITY, 'my-service'),
  upstreamArgs: (origin) => ['--authority', `${AUTHORITY}=${origin.uri}`],
  bootstrap: (address, nodeId) => federationBootstrap(address, AUTHORITY, { nodeId }),
};

function chainOf(names: ChainNames): Array<{ typeUrl: string; name: string }> {
  return [
    { typeUrl: LISTENER, name: names.listener },
    { typeUrl: ROUTE, name: names.route },
    { typeUrl: CLUSTER, name: names.cluster },
    { typeUrl: ENDPOINT, name: names.endpoints },
  ];
}

let backendA: EchoBackend;
let backendB: EchoBackend;

/** Everything one test starts, torn down whatever happens. */
class Env {
  readonly origin: TestOrigin;
  relay: SpawnedCli | undefined;
  private readonly children: GrpcXdsClient[] = [];
  private readonly deltaClients: DeltaClient[] = [];
  private readonly extraArgs: string[];
  private nodes = 0;

  private constructor(
    readonly form: Form,
    origin: TestOrigin,
    readonly relayPort: number,
    extraArgs: string[],
  ) {
    this.origin = origin;
    this.extraArgs = extraArgs;
  }

  /** Origin with the chain (endpoint on backend A, version v1), and the relay on a fixed port. */
  static async start(form: Form, extraArgs: string[] = []): Promise<Env> {
    const origin = await TestOrigin.start({ label: 'origin' });
    publish(origin, grpcChain(form.names, [backendA.port]), 'v1');
    const env = new Env(form, origin, await freePort(), extraArgs);
    try {
      await env.startRelay();
    } catch (err) {
      await env.dispose();
      throw err;
    }
    return env;
  }

  get relayAddress(): string {
    return `127.0.0.1:${this.relayPort}`;
  }

  async startRelay(): Promise<void> {
    this.relay = await spawnCli([
      '--listen', this.relayAddress,
      '--unsubscribe-grace', '0',
      ...this.form.upstreamArgs(this.origin),
      ...this.extraArgs,
    ]);
  }

  async stopRelay(): Promise<void> {
    await this.relay?.stop();
    this.relay = undefined;
  }

  /** A real gRPC client bootstrapped at the relay. */
  async grpcClient(): Promise<GrpcXdsClient> {
    const c = await GrpcXdsClient.start(this.form.bootstrap(this.relayAddress, `grpc-${++this.nodes}`));
    this.children.push(c);
    return c;
  }

  deltaClient(): DeltaClient {
    const c = new DeltaClient(this.relayAddress, { nodeId: `delta-${++this.nodes}` });
    this.deltaClients.push(c);
    return c;
  }

  moveEndpointTo(backend: EchoBackend, version: string): void {
    const r = endpointsResource(this.form.names, [backend.port]);
    this.origin.setResource(r.typeUrl, r.name, r.payload, version);
  }

  async dispose(): Promise<void> {
    for (const c of this.deltaClients) c.close();
    await Promise.all(this.children.map((c) => c.stop()));
    await this.stopRelay();
    await this.origin.stop();
  }
}

async function withEnv(form: Form, body: (env: Env) => Promise<void>, extraArgs: string[] = []): Promise<void> {
  const env = await Env.start(form, extraArgs);
  try {
    await body(env);
  } finally {
    await env.dispose();
  }
}

/**
 * Wait until the client's CSDS shows exactly the chain, every link ACKED, and
 * the ClusterLoadAssignment pointing at `backend`; returns that CSDS answer.
 */
async function holdsChain(client: GrpcXdsClient, names: ChainNames, backend: EchoBackend): Promise<CsdsResource[]> {
  const held = await client.csdsUntil(
    (rs) => allAcked(rs, chainOf(names)) && endpointPortsOf(rs.find((r) => r.typeUrl === ENDPOINT)?.config).includes(backend.port),
    `the chain ACKED with the endpoint on backend ${backend.name}`,
    PROPAGATION_MS,
  );
  assert.deepEqual(
    held.map((r) => `${r.typeUrl} ${r.name}`).sort(),
    chainOf(names).map((r) => `${r.typeUrl} ${r.name}`).sort(),
    `the client holds the chain and nothing else:\n${fmtCsds(held)}`,
  );
  return held;
}

function versionIn(held: readonly CsdsResource[], typeUrl: string): string {
  return held.find((r) => r.typeUrl === typeUrl)?.version ?? '';
}

/** Every call of a short burst succeeds (the client keeps working). */
async function assertRpcsWork(client: GrpcXdsClient, backend: string, calls = 5): Promise<void> {
  for (let i = 0; i < calls; i++) {
    assert.deepEqual(await client.call(TARGET, { timeoutMs: 2000 }), { ok: true, backend }, `call ${i + 1} of ${calls}`);
    await sleep(50);
  }
}

describe('gRPC proxyless clients through the relay (SotW ADS)', () => {
  before(async () => {
    backendA = await EchoBackend.start('A');
    backendB = await EchoBackend.start('B');
  });

  after(() => {
    backendA?.stop();
    backendB?.stop();
  });

  for (const form of [LEGACY, FEDERATION]) {
    describe(form.label, () => {
      test('the client resolves Listener → RouteConfiguration → Cluster → ClusterLoadAssignment through the relay and its RPC reaches backend A', T, async () => {
        await withEnv(form, async (env) => {
          const client = await env.grpcClient();
          await client.callUntil(TARGET, 'A');
          await holdsChain(client, form.names, backendA);
          for (const { typeUrl, name } of chainOf(form.names)) {
            assert.ok(env.origin.subscribedKeys(typeUrl).has(keyOf(name)), `the relay subscribed ${name} upstream`);
          }
        });
      });

      test('after the origin moves the endpoint to backend B, RPCs reach B within seconds and CSDS shows a new endpoint version ACKED', T, async () => {
        await withEnv(form, async (env) => {
          const client = await env.grpcClient();
          await client.callUntil(TARGET, 'A');
          const before = await holdsChain(client, form.names, backendA);
          env.moveEndpointTo(backendB, 'v2');
          await client.callUntil(TARGET, 'B', PROPAGATION_MS);
          const after = await holdsChain(client, form.names, backendB);
          assert.notEqual(versionIn(after, ENDPOINT), versionIn(before, ENDPOINT), 'the ClusterLoadAssignment version changed');
          assert.deepEqual(await client.call(TARGET), { ok: true, backend: 'B' });
        });
      });

      test('after the origin restarts, RPCs keep working and a later endpoint move still reaches the client', T, async () => {
        await withEnv(form, async (env) => {
          const client = await env.grpcClient();
          await client.callUntil(TARGET, 'A');
          await holdsChain(client, form.names, backendA);
          const streamsBefore = env.origin.totalStreams;
          await env.origin.restart();
          await assertRpcsWork(client, 'A');
          await env.origin.waitFor(() => env.origin.totalStreams > streamsBefore && env.origin.streamCount > 0, 'the relay back on the origin', RECONNECT_MS);
          await holdsChain(client, form.names, backendA);
          env.moveEndpointTo(backendB, 'v2');
          await client.callUntil(TARGET, 'B', RECONNECT_MS);
          await holdsChain(client, form.names, backendB);
        });
      });

      test('after the relay restarts with Redis, RPCs keep working and a later endpoint move still reaches the client', { ...T, skip: redisSkip('gRPC client + relay restart with Redis') }, async () => {
        const redis = await RedisServer.start();
        try {
          await withEnv(form, async (env) => {
            const client = await env.grpcClient();
            await client.callUntil(TARGET, 'A');
            await holdsChain(client, form.names, backendA);
            await env.stopRelay();
            await assertRpcsWork(client, 'A');
            await env.startRelay();
            env.moveEndpointTo(backendB, 'v2');
            await client.callUntil(TARGET, 'B', RECONNECT_MS);
            await holdsChain(client, form.names, backendB);
          }, ['--redis', redis.url, '--redis-prefix', `grpc-t${process.pid}-${form === LEGACY ? 'l' : 'f'}1:`]);
        } finally {
          await redis.dispose();
        }
      });

      test('a relay restarted with Redis while the origin is down serves the chain to a new gRPC client', { ...T, skip: redisSkip('gRPC client + relay restart with Redis') }, async () => {
        const redis = await RedisServer.start();
        const prefix = `grpc-t${process.pid}-${form === LEGACY ? 'l' : 'f'}2:`;
        const raw = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
        try {
          await withEnv(form, async (env) => {
            const first = await env.grpcClient();
            await first.callUntil(TARGET, 'A');
            await waitStored(raw, prefix, form.names);
            await env.stopRelay();
            await env.origin.stop();
            await env.startRelay();
            const second = await env.grpcClient();
            await second.callUntil(TARGET, 'A', RECONNECT_MS);
            await holdsChain(second, form.names, backendA);
            await assertRpcsWork(first, 'A');
          }, ['--redis', redis.url, '--redis-prefix', prefix]);
        } finally {
          raw.disconnect();
          await redis.dispose();
        }
      });
    });
  }

  test('a delta client and a gRPC client on one name cost one upstream subscription, and an endpoint move reaches both', T, async () => {
    await withEnv(FEDERATION, async (env) => {
      const names = FEDERATION.names;
      const grpcClient = await env.grpcClient();
      await grpcClient.callUntil(TARGET, 'A');
      const delta = env.deltaClient();
      delta.subscribe(ENDPOINT, [names.endpoints]);
      await delta.waitForVersion(ENDPOINT, names.endpoints, 'v1');
      assert.equal(env.origin.subscribeCount(names.endpoints), 1, 'one upstream subscription for both clients');
      env.moveEndpointTo(backendB, 'v2');
      await delta.waitForVersion(ENDPOINT, names.endpoints, 'v2', PROPAGATION_MS);
      await grpcClient.callUntil(TARGET, 'B', PROPAGATION_MS);
      await holdsChain(grpcClient, names, backendB);
      assert.equal(env.origin.subscribeCount(names.endpoints), 1, 'still one upstream subscription');
    });
  });

  test("the relay's CSDS view of a gRPC client equals what that client's own CSDS reports (names, versions, ACKED)", T, async () => {
    await withEnv(FEDERATION, async (env) => {
      const client = await env.grpcClient();
      await client.callUntil(TARGET, 'A');
      env.moveEndpointTo(backendB, 'v2');
      await client.callUntil(TARGET, 'B', PROPAGATION_MS);
      const own = await holdsChain(client, FEDERATION.names, backendB);
      const ownView = own.map((r) => `${r.typeUrl} ${r.name} ${r.version} ${r.status}`).sort();
      const relayView = async (): Promise<string[]> => {
        const res = await fetchStatus(env.relayAddress);
        const [stream] = streamsOf(res, 'grpc-1');
        return (stream?.generic_xds_configs ?? []).map((g) => `${g.type_url} ${g.name} ${g.version_info ?? ''} ${g.client_status}`).sort();
      };
      await pollUntil(async () => JSON.stringify(await relayView()) === JSON.stringify(ownView), 'the two views agree').catch(() => undefined);
      assert.deepEqual(await relayView(), ownView);
      const [stream] = streamsOf(await fetchStatus(env.relayAddress), 'grpc-1');
      assert.match(stream!.client_scope ?? '', /^stream\/\d+\/sotw$/);
    });
  });

  test('a ClusterLoadAssignment the client rejects shows NACKED in its CSDS, RPCs stay on the old endpoint, and the next valid version is applied', T, async () => {
    await withEnv(FEDERATION, async (env) => {
      const names = FEDERATION.names;
      const client = await env.grpcClient();
      await client.callUntil(TARGET, 'A');
      const good = await holdsChain(client, names, backendA);
      // gRPC requires a locality; the relay passes payloads through untouched, so the client is the one to reject it.
      const invalid = encodePayload({
        '@type': ENDPOINT,
        cluster_name: names.endpoints,
        endpoints: [{ load_balancing_weight: 1, lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: backendB.port } } } }] }],
      });
      env.origin.setResource(ENDPOINT, names.endpoints, invalid, 'v2');
      const nacked = await client.csdsUntil((rs) => rs.some((r) => r.typeUrl === ENDPOINT && r.status === 'NACKED'), 'the endpoint NACKED', PROPAGATION_MS);
      const eds = nacked.find((r) => r.typeUrl === ENDPOINT)!;
      assert.equal(eds.version, versionIn(good, ENDPOINT), 'the client keeps the version it accepted');
      assert.match(eds.error?.details ?? '', /locality unset/);
      await assertRpcsWork(client, 'A');
      env.moveEndpointTo(backendB, 'v3');
      await client.callUntil(TARGET, 'B', PROPAGATION_MS);
      await holdsChain(client, names, backendB);
    });
  });

  test('closing the gRPC channel releases every upstream subscription of the chain and never turns into a wildcard', T, async () => {
    await withEnv(LEGACY, async (env) => {
      const client = await env.grpcClient();
      await client.callUntil(TARGET, 'A');
      await env.origin.waitFor(() => env.origin.subscribedNames().size === 4, 'the four names subscribed upstream');
      await client.closeChannel(TARGET);
      await env.origin.waitFor(() => env.origin.subscribedNames().size === 0, 'no upstream subscription left', PROPAGATION_MS);
      assert.ok(!env.origin.everSubscribed().includes('*'), 'no wildcard was ever asked upstream');
    });
  });

  test('a Listener deleted at the origin is dropped from the next Listener response: CSDS shows it DOES_NOT_EXIST and the route the client stops watching is released upstream', T, async () => {
    await withEnv(FEDERATION, async (env) => {
      const names = FEDERATION.names;
      const client = await env.grpcClient();
      await client.callUntil(TARGET, 'A');
      await holdsChain(client, names, backendA);
      env.origin.removeResource(LISTENER, names.listener);
      await client.csdsUntil(
        (rs) => rs.some((r) => r.typeUrl === LISTENER && r.name === names.listener && r.status === 'DOES_NOT_EXIST'),
        'the Listener DOES_NOT_EXIST',
        PROPAGATION_MS,
      );
      // grpc-js-xds then sends an empty RouteConfiguration list on the still-open stream.
      await env.origin.waitFor(() => !env.origin.subscribedKeys(ROUTE).has(keyOf(names.route)), 'the route released upstream', PROPAGATION_MS);
      assert.ok(env.origin.subscribedKeys(LISTENER).has(keyOf(names.listener)), 'the client still watches its Listener');
    });
  });
});

/** Wait until the relay has written the whole chain (version v1) to Redis under `prefix`. */
async function waitStored(raw: Redis, prefix: string, names: ChainNames, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing: string[] = [];
    for (const { typeUrl, name } of chainOf(names)) {
      const key = isXdstp(name) ? keyOf(name) : legacyKey(typeUrl, name);
      if ((await storedVersion(raw, prefix, key)) !== 'v1') missing.push(name);
    }
    if (missing.length === 0) return;
    if (Date.now() > deadline) throw new Error(`not in Redis (${prefix}) within ${timeoutMs} ms: ${missing.join(', ')}`);
    await sleep(50);
  }
}
