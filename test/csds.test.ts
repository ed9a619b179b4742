/**
 * CSDS on the relay's listen port, over real gRPC, with real delta clients and
 * a real origin: what FetchClientStatus and StreamClientStatus report.

 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createCsdsService } from '../src/downstream/csds';
import type { StatusSource } from '../src/downstream/status-source';
import { createLogger } from '../src/log';
import {
  createCsdsClient,
  FETCH_CLIENT_STATUS_PATH,
  type ClientStatusRequest,
  type ClientStatusResponse,
} from '../src/proto/csds-messages';
import { metricValue, pollUntil, withAdminRelay } from './support/admin';
import { entryOf, fetchStatus, fetchStatusError, statusUntil, streamsOf, summary } from './support/csds';
import { withRelay } from './support/relay-fixture';
import { CLUSTER, LISTENER, xdstp } from './support/names';
import type { Node } from '../src/proto/messages';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

const scopes = (res: ClientStatusResponse): string[] => (res.config ?? []).map((c) => c.client_scope ?? '');

// ------------------------------------------------------------ who is listed

test('FetchClientStatus lists every delta client stream with its node, then the upstream authority with the relay node', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    origin.setResource(LISTENER, L('who/l1'), 'x', 'v1');
    const a = client({ nodeId: 'edge-a', node: { cluster: 'edge' } });
    const b = client({ nodeId: 'edge-b' });
    a.subscribe(LISTENER, [L('who/l1')]);
    b.subscribe(LISTENER, [L('who/l1')]);
    await a.waitForVersion(LISTENER, L('who/l1'), 'v1');
    await b.waitForVersion(LISTENER, L('who/l1'), 'v1');

    const res = await fetchStatus(address);
    const [sa, sb] = [streamsOf(res, 'edge-a'), streamsOf(res, 'edge-b')];
    assert.equal(sa.length, 1, JSON.stringify(summary(res)));
    assert.equal(sb.length, 1);
    assert.match(sa[0]!.client_scope ?? '', /^stream\/\d+\/delta$/);
    assert.notEqual(sa[0]!.client_scope, sb[0]!.client_scope);
    assert.equal(sa[0]!.node?.cluster, 'edge');
    assert.equal(sa[0]!.node?.user_agent_name, 'xdstp-relay-tests');
    // Client streams first, then one entry per authority, as the relay's own node.
    assert.deepEqual(scopes(res).slice(-1), ['upstream/a']);
    assert.equal(res.config!.at(-1)!.node?.id, 'relay-test');
  });
});

test("each client's node is listed as it sent it, also when clients of one build sent the same extensions", T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    origin.setResource(LISTENER, L('who/l2'), 'x', 'v1');
    const build = (b: string): Node => ({
      user_agent_build_version: { version: { major_number: 1, minor_number: 31 }, metadata: { fields: { sha: { stringValue: b } } } },
      extensions: Array.from({ length: 20 }, (_, i) => ({ name: `envoy.ext.${b}.${i}`, category: 'envoy.filters.http', type_urls: [`type.${b}.${i}`] })),
      client_features: [`feature.${b}`],
    });
    const clients = [
      client({ nodeId: 'build-1-a', node: build('one') }),
      client({ nodeId: 'build-1-b', node: build('one') }),
      client({ nodeId: 'build-2-a', node: build('two') }),
    ];
    for (const c of clients) c.subscribe(LISTENER, [L('who/l2')]);
    for (const c of clients) await c.waitForVersion(LISTENER, L('who/l2'), 'v1');

    const res = await fetchStatus(address);
    for (const [id, b] of [['build-1-a', 'one'], ['build-1-b', 'one'], ['build-2-a', 'two']] as const) {
      const [listed] = streamsOf(res, id);
      assert.ok(listed?.node, `${id} is listed with its node`);
      const sent = build(b);
      assert.deepEqual(listed.node.extensions, sent.extensions, id);
      assert.deepEqual(listed.node.user_agent_build_version, sent.user_agent_build_version, id);
      assert.ok(listed.node.client_features?.includes(`feature.${b}`), id);
    }
  });
});

test('a client stream that closed is no longer listed', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    origin.setResource(LISTENER, L('gone/l1'), 'x', 'v1');
    const c = client({ nodeId: 'leaving' });
    c.subscribe(LISTENER, [L('gone/l1')]);
    await c.waitForVersion(LISTENER, L('gone/l1'), 'v1');
    assert.equal(streamsOf(await fetchStatus(address), 'leaving').length, 1);
    c.close();
    await statusUntil(address, (res) => streamsOf(res, 'leaving').length === 0, 'the closed stream to disappear');
  });
});

// ------------------------------------------------------------ per-name status

test('a delta client that ACKs shows SYNCED/ACKED with the versions it holds', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const [n1, n2] = [L('ack/l1'), L('ack/l2')];
    origin.setResource(LISTENER, n1, 'one', 'v1');
    origin.setResource(LISTENER, n2, 'two', 'v7');
    const c = client({ nodeId: 'acker' });
    c.subscribe(LISTENER, [n1, n2]);
    await c.waitForVersion(LISTENER, n1, 'v1');
    await c.waitForVersion(LISTENER, n2, 'v7');
    const synced = (res: ClientStatusResponse, name: string, version: string): boolean => {
      const e = entryOf(res, 'acker', LISTENER, name);
      return e?.config_status === 'SYNCED' && e.client_status === 'ACKED' && e.version_info === version;
    };
    await statusUntil(address, (res) => synced(res, n1, 'v1') && synced(res, n2, 'v7'), 'SYNCED/ACKED at v1 and v7');

    origin.setResource(LISTENER, n1, 'one again', 'v2');
    await c.waitForVersion(LISTENER, n1, 'v2');
    await statusUntil(address, (res) => synced(res, n1, 'v2') && synced(res, n2, 'v7'), 'SYNCED/ACKED at v2 after the update');
  });
});

test('xds_config carries the payload the client received, unless exclude_resource_contents', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('payload/l1');
    origin.setResource(LISTENER, n, 'the listener bytes', 'v1');
    const c = client({ nodeId: 'payload' });
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    const got = c.resource(LISTENER, n)!.resource!;

    const withContents = entryOf(await fetchStatus(address), 'payload', LISTENER, n);
    assert.equal(withContents?.xds_config?.type_url, got.type_url);
    assert.deepEqual(Buffer.from(withContents!.xds_config!.value), Buffer.from(got.value));

    const without = entryOf(await fetchStatus(address, { exclude_resource_contents: true }), 'payload', LISTENER, n);
    assert.equal(without?.version_info, 'v1');
    assert.equal(without?.xds_config, undefined);
  });
});

test('a name the origin does not have shows DOES_NOT_EXIST', T, async () => {
  await withRelay({}, async ({ client, address }) => {
    const missing = L('missing/none');
    const c = client({ nodeId: 'asker' });
    c.subscribe(LISTENER, [missing]);
    await c.waitForRemoved(LISTENER, missing);
    const e = await statusUntil(
      address,
      (res) => {
        const got = entryOf(res, 'asker', LISTENER, missing);
        return got?.client_status === 'DOES_NOT_EXIST' && got;
      },
      'DOES_NOT_EXIST for the missing name',
    );
    assert.equal(e.config_status, 'SYNCED');
    assert.equal(e.version_info, undefined);
  });
});

test('a name still waiting for its upstream shows NOT_SENT/REQUESTED', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    await origin.stop();
    const n = L('waiting/l1');
    const c = client({ nodeId: 'waiter' });
    c.subscribe(LISTENER, [n]);
    const e = await statusUntil(address, (res) => entryOf(res, 'waiter', LISTENER, n), 'the entry of the waiting name');
    assert.equal(e.config_status, 'NOT_SENT');
    assert.equal(e.client_status, 'REQUESTED');
    assert.equal(e.version_info, undefined);
  });
});

test('the legacy wildcard has an entry "*" and one per resource it covers', T, async () => {
  await withRelay({ defaultUpstream: true }, async ({ defaultOrigin, client, address }) => {
    defaultOrigin!.setResource(CLUSTER, 'c-1', 'c1', 'v1');
    defaultOrigin!.setResource(CLUSTER, 'c-2', 'c2', 'v2');
    const c = client({ nodeId: 'wild' });
    c.subscribe(CLUSTER, ['*']);
    await c.waitForVersion(CLUSTER, 'c-1', 'v1');
    await c.waitForVersion(CLUSTER, 'c-2', 'v2');
    const res = await statusUntil(address, (r) => entryOf(r, 'wild', CLUSTER, '*')?.client_status === 'ACKED' && r, 'the wildcard entry ACKED');
    const names = (streamsOf(res, 'wild')[0]!.generic_xds_configs ?? []).map((g) => `${g.name}@${g.version_info ?? ''} ${g.config_status}`);
    assert.deepEqual(names.sort(), ['*@ SYNCED', 'c-1@v1 SYNCED', 'c-2@v2 SYNCED']);
  });
});

test('a glob has an entry under its own spelling and one per member under the canonical name', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const glob = L('glob/*');
    const [m1, m2] = [L('glob/m1'), L('glob/m2')];
    origin.setResource(LISTENER, m1, 'm1', 'v1');
    origin.setResource(LISTENER, m2, 'm2', 'v3');
    const c = client({ nodeId: 'globber' });
    c.subscribe(LISTENER, [glob]);
    await c.waitForVersion(LISTENER, m1, 'v1');
    await c.waitForVersion(LISTENER, m2, 'v3');
    const res = await statusUntil(
      address,
      (r) => entryOf(r, 'globber', LISTENER, glob)?.client_status === 'ACKED' && r,
      'the glob entry ACKED',
    );
    const names = (streamsOf(res, 'globber')[0]!.generic_xds_configs ?? []).map((g) => [g.name, g.version_info ?? '', g.client_status]);
    assert.deepEqual(names.sort(), [
      [glob, '', 'ACKED'],
      [m1, 'v1', 'ACKED'],
      [m2, 'v3', 'ACKED'],
    ].sort());
  });
});

test('an empty glob shows DOES_NOT_EXIST under its own spelling', T, async () => {
  await withRelay({}, async ({ client, address }) => {
    const glob = L('empty-glob/*');
    const c = client({ nodeId: 'empty' });
    c.subscribe(LISTENER, [glob]);
    await c.waitForRemoved(LISTENER, glob);
    await statusUntil(address, (res) => entryOf(res, 'empty', LISTENER, glob)?.client_status === 'DOES_NOT_EXIST', 'DOES_NOT_EXIST for the empty glob');
  });
});

test('a slow client that has not read an update shows STALE', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('slow/l1');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client({ nodeId: 'slow' });
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    await statusUntil(address, (res) => entryOf(res, 'slow', LISTENER, n)?.config_status === 'SYNCED', 'SYNCED before the update');
    c.pause();
    origin.setResource(LISTENER, n, 'y', 'v2');
    await statusUntil(address, (res) => entryOf(res, 'slow', LISTENER, n)?.config_status === 'STALE', 'STALE while the client is not reading');
    c.resume();
    await c.waitForVersion(LISTENER, n, 'v2');
    await statusUntil(address, (res) => entryOf(res, 'slow', LISTENER, n)?.config_status === 'SYNCED', 'SYNCED once it read and ACKed');
  });
});

test('a slow client that has not read an update still reports the version it ACKed', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('slow-version/l1');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client({ nodeId: 'slow' });
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    c.pause();
    origin.setResource(LISTENER, n, 'y', 'v2');
    const e = await statusUntil(address, (res) => {
      const got = entryOf(res, 'slow', LISTENER, n);
      return got?.config_status === 'STALE' && got;
    }, 'STALE');
    assert.equal(e.version_info, 'v1');
    assert.equal(e.client_status, 'ACKED');
  });
});

test('a delta client that NACKs shows ERROR/NACKED with its message and the rejected version', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('nack/l1');
    origin.setResource(LISTENER, n, 'good', 'v1');
    const c = client({
      nodeId: 'nacker',
      reject: (r) => (r.resources?.some((x) => x.name === n && x.version === 'v2') ? 'listener v2: port 0 is not allowed' : undefined),
    });
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    const before = Date.now();
    origin.setResource(LISTENER, n, 'bad', 'v2');
    await c.waitFor(() => c.nacked.length === 1, 'the NACK');
    const e = await statusUntil(address, (res) => {
      const got = entryOf(res, 'nacker', LISTENER, n);
      return got?.config_status === 'ERROR' && got;
    }, 'ERROR for the NACKed name');
    assert.equal(e.client_status, 'NACKED');
    assert.equal(e.version_info, 'v1', 'the version the client kept');
    assert.equal(e.error_state?.version_info, 'v2');
    assert.equal(e.error_state?.details, 'listener v2: port 0 is not allowed');
    const at = Number(e.error_state?.last_update_attempt?.seconds ?? 0) * 1000;
    assert.ok(at >= Math.floor(before / 1000) * 1000 && at <= Date.now(), `NACK time ${at}`);
  });
});

test('last_updated is when the relay received the version the client holds', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('when/l1');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client({ nodeId: 'when' });
    const before = Math.floor(Date.now() / 1000);
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    const e = entryOf(await fetchStatus(address), 'when', LISTENER, n);
    const seconds = Number(e?.last_updated?.seconds ?? 0);
    assert.ok(seconds >= before && seconds <= Date.now() / 1000, `last_updated ${seconds}`);
  });
});

// ------------------------------------------------------------ the relay's upstream view

test("the relay's upstream entry shows what it subscribed upstream and at which version", T, async () => {
  await withRelay({ authorities: ['a', 'b'] }, async ({ origins, client, address }) => {
    const na = L('up/l1');
    const nb = xdstp('b', CLUSTER, 'up/c1');
    origins.a!.setResource(LISTENER, na, 'x', 'v4');
    origins.b!.setResource(CLUSTER, nb, 'y', 'v9');
    const c = client({ nodeId: 'downstream' });
    c.subscribe(LISTENER, [na]);
    c.subscribe(CLUSTER, [nb]);
    await c.waitForVersion(LISTENER, na, 'v4');
    await c.waitForVersion(CLUSTER, nb, 'v9');

    const res = await fetchStatus(address, { node_matchers: [{ node_id: { exact: 'relay-test' } }] });
    assert.deepEqual(scopes(res), ['upstream/a', 'upstream/b']);
    const view = (i: number): string[] => (res.config![i]!.generic_xds_configs ?? []).map((g) => `${g.type_url} ${g.name}@${g.version_info} ${g.config_status}/${g.client_status}`);
    assert.deepEqual(view(0), [`${LISTENER} ${na}@v4 SYNCED/ACKED`]);
    assert.deepEqual(view(1), [`${CLUSTER} ${nb}@v9 SYNCED/ACKED`]);
  });
});

// ------------------------------------------------------------ node matchers over gRPC

test('node matchers select the right clients over gRPC', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('match/l1');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const region = (r: string) => ({ metadata: { fields: { region: { stringValue: r } } } });
    const clients = [
      client({ nodeId: 'edge-1', node: region('eu') }),
      client({ nodeId: 'edge-2', node: region('us') }),
      client({ nodeId: 'core-1', node: region('eu') }),
    ];
    for (const c of clients) c.subscribe(LISTENER, [n]);
    for (const c of clients) await c.waitForVersion(LISTENER, n, 'v1');

    const nodes = async (request: ClientStatusRequest): Promise<string[]> =>
      (await fetchStatus(address, request)).config!.map((c) => c.node?.id ?? '').sort();
    assert.deepEqual(await nodes({}), ['core-1', 'edge-1', 'edge-2', 'relay-test']);
    assert.deepEqual(await nodes({ node_matchers: [{ node_id: { prefix: 'edge-' } }] }), ['edge-1', 'edge-2']);
    assert.deepEqual(await nodes({ node_matchers: [{ node_id: { safe_regex: { regex: '[a-z]+-1' } } }] }), ['core-1', 'edge-1']);
    assert.deepEqual(
      await nodes({ node_matchers: [{ node_metadatas: [{ path: [{ key: 'region' }], value: { string_match: { exact: 'eu' } } }] }] }),
      ['core-1', 'edge-1'],
    );
    assert.deepEqual(
      await nodes({ node_matchers: [{ node_id: { exact: 'edge-2' } }, { node_id: { exact: 'relay-test' } }] }),
      ['edge-2', 'relay-test'],
    );
  });
});

test('a malformed node matcher is answered INVALID_ARGUMENT and the relay keeps answering', T, async () => {
  await withRelay({}, async ({ address }) => {
    const err = await fetchStatusError(address, { node_matchers: [{ node_id: { safe_regex: { regex: '(a)\\1' } } }] });
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.match(err.details, /node_matchers\[0\]\.node_id\.safe_regex/);
    assert.deepEqual(scopes(await fetchStatus(address)), ['upstream/a']);
  });
});

test('an undecodable ClientStatusRequest is answered INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async ({ address }) => {
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    try {
      const err = await new Promise<grpc.ServiceError>((resolve, reject) => {
        const pass = (b: Buffer): Buffer => b;
        // Field 1, length 16, then only one byte.
        client.makeUnaryRequest(FETCH_CLIENT_STATUS_PATH, pass, pass, Buffer.from([0x0a, 0x10, 0x01]), (e) =>
          e ? resolve(e) : reject(new Error('accepted an undecodable request')),
        );
      });
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
      assert.match(err.details, /undecodable ClientStatusRequest/);
    } finally {
      client.close();
    }
  });
});

// ------------------------------------------------------------ StreamClientStatus

test('StreamClientStatus answers each request on the stream with the status at that moment', T, async () => {
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('stream/l1');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const first = client({ nodeId: 'first' });
    first.subscribe(LISTENER, [n]);
    await first.waitForVersion(LISTENER, n, 'v1');

    const csds = createCsdsClient(address);
    const call = csds.StreamClientStatus();
    const answers: ClientStatusResponse[] = [];
    call.on('data', (r: ClientStatusResponse) => answers.push(r));
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    try {
      const onlyStreams: ClientStatusRequest = { node_matchers: [{ node_id: { safe_regex: { regex: '(first|second)' } } }] };
      call.write(onlyStreams);
      await pollUntil(async () => answers.length === 1, 'the first answer');
      const second = client({ nodeId: 'second' });
      second.subscribe(LISTENER, [n]);
      await second.waitForVersion(LISTENER, n, 'v1');
      call.write(onlyStreams);
      await pollUntil(async () => answers.length === 2, 'the second answer');
      assert.deepEqual(answers.map((a) => a.config!.map((c) => c.node?.id).sort()), [['first'], ['first', 'second']]);
      call.end();
      assert.equal((await ended).code, grpc.status.OK);
    } finally {
      call.cancel();
      csds.close();
    }
  });
});

test('StreamClientStatus ends INVALID_ARGUMENT on a malformed request', T, async () => {
  await withRelay({}, async ({ address }) => {
    const csds = createCsdsClient(address);
    const call = csds.StreamClientStatus();
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    call.on('data', () => {});
    try {
      call.write({ node_matchers: [{ node_id: { prefix: '' } }] });
      const status = await ended;
      assert.equal(status.code, grpc.status.INVALID_ARGUMENT);
      assert.match(status.details, /node_id\.prefix: must not be empty/);
    } finally {
      csds.close();
    }
  });
});

// ------------------------------------------------------------ interoperability

const XDS_PKG_DIR = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
const ENVOY_INCLUDE_DIRS = [
  ...['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(XDS_PKG_DIR, 'deps', d)),
  path.dirname(require.resolve('protobufjs/package.json')),
];

test("a CSDS client built from Envoy's published protos (grpc-js-xds) reads the relay's answer", T, async () => {
  assert.ok(fs.existsSync(path.join(XDS_PKG_DIR, 'deps', 'envoy-api', 'envoy/service/status/v3/csds.proto')));
  const def = protoLoader.loadSync('envoy/service/status/v3/csds.proto', {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
    includeDirs: ENVOY_INCLUDE_DIRS,
  });
  // The loaded package is an untyped tree of constructors.
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { status: { v3: { ClientStatusDiscoveryService: grpc.ServiceClientConstructor } } } };
  };
  await withRelay({}, async ({ origin, client, address }) => {
    const n = L('interop/l1');
    origin.setResource(LISTENER, n, 'interop payload', 'v5');
    const c = client({ nodeId: 'interop' });
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v5');
    await statusUntil(address, (res) => entryOf(res, 'interop', LISTENER, n)?.config_status === 'SYNCED', 'SYNCED');

    const Csds = pkg.envoy.service.status.v3.ClientStatusDiscoveryService;
    const envoyClient = new Csds(address, grpc.credentials.createInsecure());
    try {
      type Answer = { config: Array<{ client_scope: string; node: { id: string }; generic_xds_configs: Array<Record<string, unknown>> }> };
      const res = await new Promise<Answer>((resolve, reject) =>
        (envoyClient as unknown as { FetchClientStatus: (r: object, cb: (e: Error | null, r: Answer) => void) => void }).FetchClientStatus(
          { node_matchers: [{ node_id: { exact: 'interop' } }] },
          (e, r) => (e ? reject(e) : resolve(r)),
        ),
      );
      assert.equal(res.config.length, 1);
      const [g] = res.config[0]!.generic_xds_configs;
      assert.equal(res.config[0]!.node.id, 'interop');
      assert.equal(g!.name, n);
      assert.equal(g!.version_info, 'v5');
      assert.equal(g!.config_status, 'SYNCED');
      assert.equal(g!.client_status, 'ACKED');
      const any = g!.xds_config as { type_url: string; value: Buffer };
      assert.equal(any.type_url, LISTENER);
      assert.equal(Buffer.from(any.value).toString(), 'interop payload');
    } finally {
      envoyClient.close();
    }
  });
});

// ------------------------------------------------------------ authorization hook

test('with an authorize hook, a refused caller gets PERMISSION_DENIED and an allowed one the status', T, async () => {
  const source: StatusSource = {
    clients: () => [{ scope: 'stream/1/delta', node: { id: 'n' }, resources: () => [] }],
  };
  const server = new grpc.Server();
  // The hook sees the decoded request: here only a caller presenting node id "ops" is allowed.
  const { definition, implementation } = createCsdsService({
    source,
    logger: createLogger('silent'),
    authorize: (_call, request) => request.node?.id === 'ops',
  });
  server.addService(definition, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  try {
    const address = `127.0.0.1:${port}`;
    const refused = await fetchStatusError(address, { node: { id: 'someone' } });
    assert.equal(refused.code, grpc.status.PERMISSION_DENIED);
    assert.deepEqual(scopes(await fetchStatus(address, { node: { id: 'ops' } })), ['stream/1/delta']);
  } finally {
    server.forceShutdown();
  }
});

// ------------------------------------------------------------ metrics

test('xdstp_relay_clients counts client streams by type and status, without the upstream view', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const [n1, n2] = [L('gauge/l1'), L('gauge/l2')];
    origin.setResource(LISTENER, n1, 'x', 'v1');
    origin.setResource(LISTENER, n2, 'x', 'v1');
    const a = client();
    const b = client();
    a.subscribe(LISTENER, [n1]);
    b.subscribe(LISTENER, [n1, n2]);
    await a.waitForVersion(LISTENER, n1, 'v1');
    await b.waitForVersion(LISTENER, n2, 'v1');
    const type = 'envoy.config.listener.v3.Listener';
    const count = (samples: Awaited<ReturnType<typeof scrape>>, status: string): number =>
      metricValue(samples, 'xdstp_relay_clients', { type, status });
    await pollUntil(async () => count(await scrape(), 'synced') === 2, 'two synced clients');

    b.pause();
    origin.setResource(LISTENER, n2, 'y', 'v2');
    const samples = await pollUntil(async () => {
      const s = await scrape();
      return count(s, 'stale') === 1 && s;
    }, 'one stale client');
    assert.equal(count(samples, 'synced'), 1);
    assert.equal(count(samples, 'nacked'), 0);
    // No per-client label.
    for (const s of samples.filter((x) => x.name === 'xdstp_relay_clients')) assert.deepEqual(Object.keys(s.labels).sort(), ['status', 'type']);
  });
});

test('xdstp_relay_clients counts a client that NACKed as nacked', T, async () => {
  await withAdminRelay({}, async ({ origin, client, scrape }) => {
    const n = L('gauge-nack/l1');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const c = client({ reject: (r) => (r.resources?.some((x) => x.version === 'v2') ? 'no' : undefined) });
    c.subscribe(LISTENER, [n]);
    await c.waitForVersion(LISTENER, n, 'v1');
    origin.setResource(LISTENER, n, 'y', 'v2');
    await c.waitFor(() => c.nacked.length === 1, 'the NACK');
    await pollUntil(
      async () => metricValue(await scrape(), 'xdstp_relay_clients', { type: 'envoy.config.listener.v3.Listener', status: 'nacked' }) === 1,
      'one nacked client',
      3000,
    );
  });
});
