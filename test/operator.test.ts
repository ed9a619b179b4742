/**
 * What an operator looks at on a running relay process: its version, what
 * /server_info and /debug/upstreams report, why an upstream is unavailable,
 * and how it takes the environment Kubernetes gives a pod.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TestOrigin } from './support/origin';
import { DeltaClient } from './support/delta-client';
import { runCliToExit, spawnCli, type SpawnedCli } from './support/cli';
import { freePort } from './support/ports';
import { parsePrometheus, pollUntil } from './support/admin';
import { LISTENER, xdstp } from './support/names';
import { redactUrl } from '../src/admin/server-info';

const T = { timeout: 30_000 };
/** dist/test/operator.test.js → the repository root. */
const ROOT = path.resolve(__dirname, '..', '..');
const PACKAGE_VERSION = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

type Json = Record<string, unknown>;

async function getJson(cli: SpawnedCli, p: string, token?: string): Promise<{ status: number; json: Json; text: string }> {
  const res = await fetch(`http://127.0.0.1:${cli.adminPort}${p}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const text = await res.text();
  return { status: res.status, json: (res.headers.get('content-type') ?? '').includes('json') ? (JSON.parse(text) as Json) : {}, text };
}

async function withCli<T>(args: string[], env: Record<string, string>, body: (cli: SpawnedCli) => Promise<T>): Promise<T> {
  const cli = await spawnCli(['--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', ...args], env);
  try {
    return await body(cli);
  } finally {
    await cli.stop();
  }
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-relay-operator-'));
}

// -------------------------------------------------------------------- version

test('--version prints the version in package.json and exits 0', T, async () => {
  const res = await runCliToExit(['--version']);
  assert.equal(res.code, 0, res.stderr);
  assert.equal(res.stdout.trim(), PACKAGE_VERSION);
});

test('build_info and the user agent presented upstream carry the package version without npm in the environment', T, async () => {
  const origin = await TestOrigin.start();
  try {
    // spawnCli runs `node dist/src/cli.js` directly: no npm_package_version to fall back on.
    await withCli(['--authority', `a=${origin.uri}`], { npm_package_version: '9.9.9-npm' }, async (cli) => {
      const c = new DeltaClient(`127.0.0.1:${cli.port}`, { nodeId: 'ua-probe' });
      try {
        const name = xdstp('a', LISTENER, 'ua/one');
        origin.setResource(LISTENER, name, 'one', 'v1');
        c.subscribe(LISTENER, [name]);
        await c.waitForVersion(LISTENER, name, 'v1');
      } finally {
        c.close();
      }
      const node = origin.requests.find((r) => r.node)?.node;
      assert.equal(node?.user_agent_name, 'xdstp-relay');
      assert.equal(node?.user_agent_version, PACKAGE_VERSION);
      const metrics = await (await fetch(`http://127.0.0.1:${cli.adminPort}/metrics`)).text();
      const info = parsePrometheus(metrics).find((s) => s.name === 'xdstp_relay_build_info');
      assert.equal(info?.labels.version, PACKAGE_VERSION);
    });
  } finally {
    await origin.stop();
  }
});

// --------------------------------------------------------------- /server_info

test('/server_info shows version, Node, start time, uptime and the effective configuration with the Redis password hidden', T, async () => {
  const dir = tempDir();
  const token = 'admin-token-contents-7f3a';
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, `${token}\n`);
  const redisPort = await freePort();
  try {
    const args = ['--authority', 'a=grpc://127.0.0.1:1', '--admin-token', tokenFile, '--redis', `redis://relay:hunter2-secret@127.0.0.1:${redisPort}`, '--redis-warm-timeout', '0'];
    await withCli(args, {}, async (cli) => {
      assert.equal((await getJson(cli, '/server_info')).status, 401, 'a configuration dump wants the admin token like /debug/*');
      const { status, json, text } = await getJson(cli, '/server_info', token);
      assert.equal(status, 200, text);
      assert.equal(json.version, PACKAGE_VERSION);
      assert.equal(json.node_version, process.versions.node);
      assert.ok(Math.abs(Date.parse(String(json.start_time)) - Date.now()) < 60_000, String(json.start_time));
      assert.equal(typeof json.uptime_seconds, 'number');
      const config = json.configuration as Json;
      assert.deepEqual((config.authorities as Json[]).map((a) => a.name), ['a']);
      assert.equal((config.redis as Json).spec, `redis://relay:***@127.0.0.1:${redisPort}`);
      assert.equal((config.security as Json).adminTokenFile, tokenFile, 'file paths are shown');
      assert.doesNotMatch(text, /hunter2-secret/);
      assert.ok(!text.includes(token), 'never the token itself');
      assert.match(String(json.configuration_sha256), /^[0-9a-f]{64}$/);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the /server_info digest is the same for the same configuration and differs when it changes', T, async () => {
  // The addresses are part of the configuration: give every run the same ones.
  const listen = `127.0.0.1:${await freePort()}`;
  const admin = `127.0.0.1:${await freePort()}`;
  const digest = async (extra: string[]): Promise<string> => {
    const cli = await spawnCli(['--listen', listen, '--admin', admin, '--authority', 'a=grpc://127.0.0.1:1', '--node-id', 'digest', ...extra]);
    try {
      return String((await getJson(cli, '/server_info')).json.configuration_sha256);
    } finally {
      await cli.stop();
    }
  };
  const a = await digest([]);
  const b = await digest([]);
  const c = await digest(['--drain-period', '1234']);
  assert.equal(a, b);
  assert.notEqual(a, c);
  assert.notEqual(a, createHash('sha256').update('').digest('hex'));
});

test('every form of Redis address keeps its hosts and loses its password in /server_info', () => {
  assert.equal(redactUrl('redis://relay:pw@cache:6379/2'), 'redis://relay:***@cache:6379/2');
  assert.equal(redactUrl('rediss://:pw@cache:6380'), 'rediss://:***@cache:6380');
  assert.equal(redactUrl('redis+sentinel://pw@s1:26379,s2:26379/main'), 'redis+sentinel://***@s1:26379,s2:26379/main');
  assert.equal(redactUrl('redis+cluster://u:p@ss@n1:7000,n2:7001'), 'redis+cluster://u:***@n1:7000,n2:7001');
  assert.equal(redactUrl('redis+cluster://n1:7000,n2:7001'), 'redis+cluster://n1:7000,n2:7001');
});

// ----------------------------------------------------------- /debug/upstreams

test('an unreachable upstream is logged with its cause and /debug/upstreams shows that server\'s last error', T, async () => {
  const dead = await freePort();
  await withCli(['--authority', `a=grpc://127.0.0.1:${dead}`], {}, async (cli) => {
    const warn = await pollUntil(async () => cli.logs.find((l) => l.msg?.startsWith('upstream unavailable')), 'the upstream unavailable warning');
    const error = warn.error as Json;
    assert.equal(error.code, 14);
    assert.equal(error.codeName, 'UNAVAILABLE');
    assert.match(String(error.message), new RegExp(`127\\.0\\.0\\.1:${dead}`));
    assert.match(String(warn.msg), /upstream unavailable: .+/, 'the cause is in the message too');
    const { json } = await getJson(cli, '/debug/upstreams');
    const servers = ((json.upstreams as Json[])[0]!.servers as Json[]);
    assert.equal(servers.length, 1);
    assert.equal(servers[0]!.target, `127.0.0.1:${dead}`);
    assert.equal((servers[0]!.lastError as Json).code, 14);
    assert.equal(servers[0]!.lastConnected, null);
    assert.equal(servers[0]!.lastResponse, null);
  });
});

test('/debug/upstreams shows per server which one serves, when it connected and last answered, and why the other failed', T, async () => {
  const origin = await TestOrigin.start();
  const dead = await freePort();
  try {
    await withCli(['--authority', `a=grpc://127.0.0.1:${dead},${origin.uri}`], {}, async (cli) => {
      const c = new DeltaClient(`127.0.0.1:${cli.port}`, { nodeId: 'servers-probe' });
      try {
        const name = xdstp('a', LISTENER, 'servers/one');
        origin.setResource(LISTENER, name, 'one', 'v1');
        c.subscribe(LISTENER, [name]);
        await c.waitForVersion(LISTENER, name, 'v1');
      } finally {
        c.close();
      }
      const { json } = await getJson(cli, '/debug/upstreams');
      const upstream = (json.upstreams as Json[])[0]!;
      assert.equal(upstream.state, 'ready', 'the existing fields stay');
      const servers = upstream.servers as Json[];
      assert.deepEqual(servers.map((s) => s.state), ['standby', 'ready']);
      assert.equal((servers[0]!.lastError as Json).codeName, 'UNAVAILABLE');
      assert.equal(servers[0]!.lastConnected, null);
      assert.equal(servers[1]!.lastError, null);
      assert.ok(Date.parse(String(servers[1]!.lastConnected)) <= Date.parse(String(servers[1]!.lastResponse)), JSON.stringify(servers[1]));
      assert.ok(Date.now() - Date.parse(String(servers[1]!.lastResponse)) < 30_000);
    });
  } finally {
    await origin.stop();
  }
});

// ------------------------------------------------------------- environment

test('service-link variables Kubernetes injects are ignored with one warning that lists them', T, async () => {
  const links = {
    XDSTP_RELAY_SERVICE_HOST: '10.0.0.7',
    XDSTP_RELAY_SERVICE_PORT: '18000',
    XDSTP_RELAY_PORT: 'tcp://10.0.0.7:18000',
    XDSTP_RELAY_PORT_18000_TCP: 'tcp://10.0.0.7:18000',
  };
  await withCli(['--authority', 'a=grpc://127.0.0.1:1'], { ...links, XDSTP_RELAY_NODE_ID: 'from-env' }, async (cli) => {
    const warnings = cli.logs.filter((l) => Array.isArray(l.ignored));
    assert.equal(warnings.length, 1, JSON.stringify(cli.logs));
    assert.deepEqual(warnings[0]!.ignored, Object.keys(links).sort());
    const listening = cli.logs.find((l) => l.msg === 'relay listening');
    assert.equal(listening?.nodeId, 'from-env', 'the relay\'s own variables still apply');
  });
});

test('an unknown flag still stops the start with exit 2', T, async () => {
  const res = await runCliToExit(['--authority', 'a=grpc://127.0.0.1:1', '--service-host', '10.0.0.7']);
  assert.equal(res.code, 2, res.stdout + res.stderr);
  const line = JSON.parse(res.stderr.trim()) as { problems: Array<{ path: string }> };
  assert.deepEqual(line.problems.map((p) => p.path), ['service-host']);
});

test('an unknown key in a config file still stops the start with exit 2', T, async () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, 'relay.yaml');
    fs.writeFileSync(file, 'authority:\n  - a=grpc://127.0.0.1:1\nservice-port: 18000\n');
    const res = await runCliToExit(['--config', file]);
    assert.equal(res.code, 2, res.stdout + res.stderr);
    assert.match(res.stderr, /service-port|servicePort/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
