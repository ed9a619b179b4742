/**
 * `npm start` with no flags: the relay serves the bundled examples/ mesh from
 * its file-backed authority, and the debug client shows them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as path from 'node:path';
import YAML from 'yaml';
import { envoyTypes } from '../src/typed-json/envoy-types';
import { assertWellFormed } from './support/assertions';
import { cleanEnv, spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { cluster, entry, resourcesFile, tempDir, writeFile } from './support/files';
import { allAcked, GrpcXdsClient, type GrpcBootstrap } from './support/grpc-xds-client';
import { CLUSTER, ENDPOINT, LISTENER, LISTENER_COLLECTION, ROUTE } from './support/names';
import { waitUntil } from './support/wait';

const T = { timeout: 30_000 };
const REPO = path.resolve(__dirname, '..', '..');
const XDS_CLIENT = path.join(REPO, 'dist', 'src', 'tools', 'xds-client.js');
const EX = 'xdstp://examples.local';
const INGRESS = `${EX}/envoy.config.listener.v3.Listener/mesh/*?node_type=ingress`;
const EGRESS = `${EX}/envoy.config.listener.v3.Listener/mesh/*?node_type=egress`;
const EDGE = `${EX}/envoy.config.listener.v3.ListenerCollection/edge`;
const WEB = `${EX}/envoy.config.cluster.v3.Cluster/web`;
/** Ports only: everything else must be the no-flags default. */
const PORTS = { XDSTP_RELAY_LISTEN: '127.0.0.1:0', XDSTP_RELAY_ADMIN: '127.0.0.1:0' };

async function withCli(args: string[], env: Record<string, string>, body: (cli: SpawnedCli, client: () => DeltaClient) => Promise<void>): Promise<void> {
  const clients: DeltaClient[] = [];
  const cli = await spawnCli(args, env, 15_000);
  try {
    await body(cli, () => {
      const c = new DeltaClient(`127.0.0.1:${cli.port}`, { nodeId: `examples-${clients.length}` });
      clients.push(c);
      return c;
    });
  } finally {
    for (const c of clients) c.close();
    await cli.stop();
  }
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runXdsClient(args: string[], timeoutMs = 15_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [XDS_CLIENT, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`xds client did not exit\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test('with no flags (only ports) the relay serves the bundled examples and says how to look at them', T, async () => {
  await withCli([], PORTS, async (cli, client) => {
    const hint = String((await waitForLog(cli, 'serving the bundled examples')).hint);
    assert.match(hint, new RegExp(`^npm run xds -- subscribe '(.+)' --server 127\\.0\\.0\\.1:${cli.port}$`));
    const loaded = cli.logs.find((l) => l.msg === 'file origin loaded');
    assert.ok(loaded && loaded.rejected === 0 && Number(loaded.resources) >= 10, JSON.stringify(loaded));

    const ingress = client();
    ingress.subscribe(LISTENER, [INGRESS]);
    await ingress.waitFor(() => ingress.held(LISTENER).size === 2, 'two ingress listeners');
    assert.deepEqual([...ingress.held(LISTENER).keys()].sort(), [
      `${EX}/envoy.config.listener.v3.Listener/mesh/http?node_type=ingress`,
      `${EX}/envoy.config.listener.v3.Listener/mesh/postgres?node_type=ingress`,
    ]);

    const egress = client();
    egress.subscribe(LISTENER, [EGRESS]);
    await egress.waitFor(() => egress.held(LISTENER).size === 1, 'one egress listener');

    const edge = client();
    edge.subscribe(LISTENER_COLLECTION, [EDGE]);
    await edge.waitFor(() => edge.resource(LISTENER_COLLECTION, EDGE), 'the list collection');
    const collection = edge.resource(LISTENER_COLLECTION, EDGE)!.resource!;
    const decoded = envoyTypes().decodeAny(collection.type_url, collection.value) as { entries: Array<{ inline_entry?: { name?: string } }> };
    assert.deepEqual(decoded.entries.map((e) => e.inline_entry?.name), ['redirect-to-https', 'healthz']);

    const clusters = client();
    clusters.subscribe(CLUSTER, [WEB]);
    clusters.subscribe(ENDPOINT, [`${EX}/envoy.config.endpoint.v3.ClusterLoadAssignment/web`]);
    await clusters.waitFor(() => clusters.resource(CLUSTER, WEB), 'the web cluster');
    const web = clusters.resource(CLUSTER, WEB)!.resource!;
    const webJson = envoyTypes().decodeAny(web.type_url, web.value) as { name?: string; type?: string; eds_cluster_config?: { service_name?: string } };
    assert.equal(webJson.name, WEB);
    assert.equal(webJson.type, 'EDS');
    assert.equal(webJson.eds_cluster_config?.service_name, `${EX}/envoy.config.endpoint.v3.ClusterLoadAssignment/web`);
    await clusters.waitFor(() => clusters.held(ENDPOINT).size === 1, 'the web endpoints');
    assertWellFormed(ingress, egress, edge, clusters);

    // The hinted command, run as the debug client: it prints the example listeners as JSON.
    const glob = /subscribe '(.+)' --server (\S+)$/.exec(hint)!;
    const run = await runXdsClient(['subscribe', glob[1]!, '--server', glob[2]!, '--count', '1', '--compact', '--timeout', '10000']);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trim().split('\n');
    assert.equal(lines.length, 1, run.stdout);
    const printed = JSON.parse(lines[0]!) as { type_url: string; resources: Array<{ name: string; version: string; resource: Record<string, unknown> }>; removed_resources: string[] };
    assert.equal(printed.type_url, LISTENER);
    assert.deepEqual(printed.resources.map((r) => r.name).sort(), [...ingress.held(LISTENER).keys()].sort());
    const http = printed.resources.find((r) => r.name.includes('/mesh/http'))!;
    assert.equal(http.resource['@type'], LISTENER);
    const chain = (http.resource.filter_chains as Array<{ filters: Array<{ typed_config: Record<string, unknown> }> }>)[0]!;
    const hcm = chain.filters[0]!.typed_config;
    assert.equal(hcm['@type'], 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager');
    assert.equal((hcm.rds as { route_config_name?: string }).route_config_name, `${EX}/envoy.config.route.v3.RouteConfiguration/ingress`);
  });
});

/** Waits for a log line of the spawned relay, re-checking whenever it writes output. */
function waitForLog(cli: SpawnedCli, msg: string): Promise<Record<string, unknown>> {
  const events = new EventEmitter();
  const poke = (): void => {
    // The collector registered first has parsed the chunk by now.
    events.emit('change');
  };
  cli.proc.stdout?.on('data', poke);
  cli.proc.stderr?.on('data', poke);
  return waitUntil(events, () => cli.logs.find((l) => l.msg === msg), {
    timeoutMs: 5000,
    what: `"${msg}" log line`,
    explain: () => cli.logs.map((l) => JSON.stringify(l)).join('\n'),
  }).finally(() => {
    cli.proc.stdout?.off('data', poke);
    cli.proc.stderr?.off('data', poke);
  });
}

test('the debug client prints removals and legacy names need --type', T, async () => {
  await withCli([], PORTS, async (cli) => {
    const missing = `${EX}/envoy.config.cluster.v3.Cluster/does-not-exist`;
    const run = await runXdsClient(['subscribe', missing, WEB, '--server', `127.0.0.1:${cli.port}`, '--count', '1', '--compact', '--raw']);
    assert.equal(run.code, 0, run.stderr);
    const printed = JSON.parse(run.stdout.trim()) as { resources: Array<{ name: string; resource: { type_url: string; value: string } }>; removed_resources: string[] };
    assert.deepEqual(printed.removed_resources, [missing]);
    assert.deepEqual(printed.resources.map((r) => r.name), [WEB]);
    assert.equal(printed.resources[0]!.resource.type_url, CLUSTER, '--raw keeps the payload as base64');

    const legacy = await runXdsClient(['subscribe', 'backend', '--server', `127.0.0.1:${cli.port}`, '--count', '1']);
    assert.notEqual(legacy.code, 0);
    assert.match(legacy.stderr, /--type/);
  });
});

test('an explicit upstream replaces the examples, and file:// in a config file is relative to that file', T, async () => {
  const dir = tempDir('xdstp-config-');
  writeFile(dir, 'origin/clusters.yaml', resourcesFile(entry('xdstp://local/envoy.config.cluster.v3.Cluster/c1', cluster('c1'))));
  fs.writeFileSync(path.join(dir, 'relay.yaml'), 'authority:\n  local: file://origin\nlisten: 127.0.0.1:0\nadmin: 127.0.0.1:0\nunsubscribe-grace: 0\n');
  await withCli(['--config', path.join(dir, 'relay.yaml')], {}, async (cli, client) => {
    assert.equal(cli.logs.find((l) => l.msg === 'serving the bundled examples'), undefined);
    const c = client();
    c.subscribe(CLUSTER, ['xdstp://local/envoy.config.cluster.v3.Cluster/c1']);
    await c.waitFor(() => c.held(CLUSTER).has('xdstp://local/envoy.config.cluster.v3.Cluster/c1'), 'c1 from the config-relative directory');
    c.subscribe(CLUSTER, [WEB]);
    await c.waitForRemoved(CLUSTER, WEB);
  });
});

test('examples/relay.yaml serves the same mesh as the no-flags default', T, async () => {
  await withCli(['--config', path.join(REPO, 'examples', 'relay.yaml'), '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'], {}, async (_cli, client) => {
    const c = client();
    c.subscribe(LISTENER, [INGRESS]);
    await c.waitFor(() => c.held(LISTENER).size === 2, 'two ingress listeners');
  });
});

test('package.json wires `npm start` and `npm run xds` to the built entry points', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string>; dependencies: Record<string, string> };
  assert.equal(pkg.scripts.start, 'node dist/src/cli.js');
  assert.equal(pkg.scripts.xds, 'node dist/src/tools/xds-client.js');
  assert.ok(pkg.dependencies['@grpc/grpc-js-xds'], 'the Envoy API protos are a runtime dependency');
});

type Obj = Record<string, unknown>;

test('examples/envoy-bootstrap.yaml is an Envoy Bootstrap for delta ADS whose xdstp:// names the no-flags relay serves', T, async () => {
  const bootstrap = YAML.parse(fs.readFileSync(path.join(REPO, 'examples', 'envoy-bootstrap.yaml'), 'utf8')) as Obj;
  // Encoding with Envoy's own API protos: an unknown or misspelt field is an error.
  const encoded = envoyTypes().encodeAny({ '@type': 'type.googleapis.com/envoy.config.bootstrap.v3.Bootstrap', ...bootstrap });
  const b = envoyTypes().decodeAny(encoded.typeUrl, encoded.value) as {
    node: { id: string; cluster: string };
    dynamic_resources: Record<string, Obj & { api_config_source?: Obj }> & { lds_resources_locator: string; cds_resources_locator: string };
    static_resources: { clusters: Array<{ name: string; load_assignment: { endpoints: Array<{ lb_endpoints: Array<{ endpoint: { address: { socket_address: Obj } } }> }> } }> };
  };
  assert.ok(b.node.id && b.node.cluster);
  const dyn = b.dynamic_resources;
  assert.equal(dyn.ads_config!.api_type, 'DELTA_GRPC');
  for (const k of ['lds_config', 'cds_config']) {
    assert.equal(dyn[k]!.resource_api_version, 'V3');
    assert.equal(dyn[k]!.api_config_source?.api_type, 'AGGREGATED_DELTA_GRPC');
  }
  const relay = b.static_resources.clusters.find((c) => c.name === (dyn.ads_config!.grpc_services as Array<{ envoy_grpc: { cluster_name: string } }>)[0]!.envoy_grpc.cluster_name)!;
  assert.deepEqual(relay.load_assignment.endpoints[0]!.lb_endpoints[0]!.endpoint.address.socket_address, { address: '127.0.0.1', port_value: 18000 });

  await withCli([], PORTS, async (_cli, client) => {
    const c = client();
    c.subscribe(LISTENER, [dyn.lds_resources_locator]);
    c.subscribe(CLUSTER, [dyn.cds_resources_locator]);
    await c.waitFor(() => c.held(LISTENER).size === 2 && c.held(CLUSTER).size === 3, 'the listeners and clusters the bootstrap names');
    // What they refer to exists too: route configurations and endpoints.
    const routes = new Set<string>();
    for (const name of c.held(LISTENER).keys()) {
      const l = c.resource(LISTENER, name)!.resource!;
      const json = JSON.stringify(envoyTypes().decodeAny(l.type_url, l.value));
      for (const m of json.matchAll(/"route_config_name":"([^"]+)"/g)) routes.add(m[1]!);
    }
    const endpoints = new Set<string>();
    for (const name of c.held(CLUSTER).keys()) {
      const cl = c.resource(CLUSTER, name)!.resource!;
      endpoints.add((envoyTypes().decodeAny(cl.type_url, cl.value) as { eds_cluster_config: { service_name: string } }).eds_cluster_config.service_name);
    }
    assert.equal(routes.size, 1);
    assert.equal(endpoints.size, 3);
    c.subscribe(ROUTE, [...routes]);
    c.subscribe(ENDPOINT, [...endpoints]);
    await c.waitFor(() => c.held(ROUTE).size === routes.size && c.held(ENDPOINT).size === endpoints.size, 'every route configuration and endpoint set');
    assertWellFormed(c);
  });
});

test('examples/grpc-bootstrap.json: a real gRPC client resolves xds:///web through the no-flags relay', T, async () => {
  const bootstrap = JSON.parse(fs.readFileSync(path.join(REPO, 'examples', 'grpc-bootstrap.json'), 'utf8')) as GrpcBootstrap;
  assert.equal(bootstrap.xds_servers[0]!.server_uri, '127.0.0.1:18000');
  await withCli([], PORTS, async (cli) => {
    // The same bootstrap, pointed at this relay's port.
    const here = JSON.parse(JSON.stringify(bootstrap).replaceAll('127.0.0.1:18000', `127.0.0.1:${cli.port}`)) as GrpcBootstrap;
    const grpcClient = await GrpcXdsClient.start(here, { label: 'examples' });
    try {
      // The example endpoints are placeholders: the RPC itself is not expected to succeed.
      await grpcClient.call('xds:///web', { timeoutMs: 500 });
      const template = bootstrap.client_default_listener_resource_name_template!;
      await grpcClient.csdsUntil(
        (r) =>
          allAcked(r, [
            { typeUrl: LISTENER, name: template.replace('%s', 'web') },
            { typeUrl: ROUTE, name: `${EX}/envoy.config.route.v3.RouteConfiguration/grpc-web` },
            { typeUrl: CLUSTER, name: WEB },
            { typeUrl: ENDPOINT, name: `${EX}/envoy.config.endpoint.v3.ClusterLoadAssignment/web` },
          ]),
        'Listener, RouteConfiguration, Cluster and ClusterLoadAssignment of xds:///web ACKed',
        15_000,
      );
    } finally {
      await grpcClient.stop();
    }
  });
});
