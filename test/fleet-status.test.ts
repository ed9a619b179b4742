/**
 * Fleet-wide client status, with real parts: three relay processes (the real
 * CLI) sharing one redis-server behind the real HAProxy, 30 delta and SotW
 * clients spread over them through HAProxy, one of them NACKing. One fleet
 * CSDS request to any relay (or through HAProxy) lists every client with the
 * relay it is on; a SIGKILLed relay is reported unreachable until its
 * heartbeat expires, then its clients show on the relays they reconnected to.
 *
 * The tests run in order on one fleet.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { binariesSkip } from './support/binaries';
import { cleanEnv, runCliToExit, spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { FleetClient } from './support/fleet-client';
import { HAProxy } from './support/haproxy';
import { http, pollUntil } from './support/admin';
import { fetchStatus } from './support/csds';
import { CLUSTER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { freePort } from './support/ports';
import { RedisServer, redisSkip } from './support/redis-server';
import { SotwClient } from './support/sotw-client';
import { fleetSummaries, rowsOf, statusRequest, type FleetRelaySummary, type StatusRow } from '../src/status';

const skip = redisSkip('fleet-wide client status') || binariesSkip(['haproxy'], 'fleet-wide client status');
const DELTA = 19;
const SOTW = 10;
const CLIENTS = DELTA + SOTW + 1;
/** Short for the test (the default is 5 s): heartbeats every second. */
const TTL_MS = 3000;
const T = { timeout: 40_000 };
const NACK_MESSAGE = 'cluster fs/bad: unknown lb_policy MAGLEV_X (test rejection)';

const name = (i: number): string => xdstp('a', CLUSTER, `fs/c${i % 5}`);
const BAD = xdstp('a', CLUSTER, 'fs/bad');
/** `npm run xds --` without npm: dist/test → dist/src/tools/xds-client.js. */
const XDS_TOOL = path.resolve(__dirname, '..', 'src', 'tools', 'xds-client.js');

/** A SotW client that reconnects (a new connection, so HAProxy places it again) when its stream ends, like gRPC's xDS client. */
class ReconnectingSotw {
  client: SotwClient | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly target: string,
    readonly nodeId: string,
    readonly names: string[],
  ) {}

  start(): void {
    if (this.closed) return;
    const c = new SotwClient(this.target, { nodeId: this.nodeId });
    this.client = c;
    c.request(CLUSTER, this.names);
    c.events.on('change', () => {
      if (c.status && this.client === c && !this.closed) {
        this.client = undefined;
        c.close();
        this.timer = setTimeout(() => this.start(), 50 + Math.random() * 100);
      }
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.client?.close();
  }
}

interface StatusJson {
  relays: Array<{ server: string; ok: boolean }>;
  fleet: FleetRelaySummary[];
  clients: StatusRow[];
}

describe('fleet-wide client status: three relays, Redis, HAProxy', { skip }, () => {
  let redis: RedisServer;
  let origin: TestOrigin;
  let haproxy: HAProxy;
  const relays: Array<{ name: string; port: number; adminPort: number; cli?: SpawnedCli }> = [];
  const deltas: FleetClient[] = [];
  const sotws: ReconnectingSotw[] = [];
  let nacker: DeltaClient | undefined;
  const address = (r: { port: number }): string => `127.0.0.1:${r.port}`;

  /** Node id → relay address, as the relays' own /debug/clients see it. */
  async function placement(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const r of relays) {
      if (!r.cli) continue;
      const body = (await http(r.adminPort, 'GET', '/debug/clients?limit=1000')).json as { clients: Array<{ node: { id: string } | null }> };
      for (const c of body.clients) out.set(c.node?.id ?? '', address(r));
    }
    return out;
  }

  /** Client rows (not upstream entries) of a fleet answer. */
  const clientRows = (rows: readonly StatusRow[]): StatusRow[] => rows.filter((r) => r.protocol !== 'upstream');

  /** One in-process fleet CSDS request, read as the status tool reads it. */
  async function fleetAnswer(server: string): Promise<{ rows: StatusRow[]; fleet: FleetRelaySummary[] }> {
    const response = await fetchStatus(server, statusRequest(undefined, true));
    const rows = rowsOf(server, response);
    return { rows, fleet: fleetSummaries([response], rows) };
  }

  async function statusCli(server: string): Promise<{ code: number | null; json: StatusJson; stderr: string }> {
    const r = await runCliToExit(['status', '--server', server, '--fleet', '--json'], {}, 15_000);
    try {
      return { code: r.code, json: JSON.parse(r.stdout) as StatusJson, stderr: r.stderr };
    } catch {
      throw new Error(`status printed no JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
    }
  }

  /** Every client is in the fleet answer exactly once, on the relay it is connected to, the NACK with its message. */
  function assertComplete(rows: readonly StatusRow[], where: Map<string, string>, what: string): void {
    const clients = clientRows(rows);
    const ids = clients.map((r) => r.node).sort();
    assert.equal(ids.length, CLIENTS, `${what}: ${ids.length} client rows: ${ids.join(', ')}`);
    assert.equal(new Set(ids).size, CLIENTS, `${what}: each client once`);
    for (const r of clients) assert.equal(r.relay, where.get(r.node), `${what}: ${r.node} is on ${where.get(r.node)}, the answer says ${r.relay}`);
    const nacks = clients.filter((r) => r.nacks.length > 0);
    assert.deepEqual(nacks.map((r) => r.node), ['nacker'], `${what}: only the NACKing client has a NACK`);
    assert.equal(nacks[0]!.nacks[0]!.details, NACK_MESSAGE);
    assert.equal(nacks[0]!.nacks[0]!.name, BAD);
  }

  before(async () => {
    redis = await RedisServer.start();
    origin = await TestOrigin.start({ label: 'fleet-status-origin' });
    for (let i = 0; i < 5; i++) origin.setResource(CLUSTER, name(i), `c${i}`, 'v1');
    origin.setResource(CLUSTER, BAD, 'bad', 'v1');
    const common = ['--authority', `a=${origin.uri}`, '--redis', redis.url, '--redis-prefix', `fleet-status-${process.pid}:`, '--fleet-heartbeat-ttl', String(TTL_MS), '--shutdown-grace', '300'];
    for (let i = 1; i <= 3; i++) relays.push({ name: `relay-${i}`, port: await freePort(), adminPort: await freePort() });
    await Promise.all(
      relays.map(async (r) => {
        r.cli = await spawnCli(['--listen', address(r), '--admin', `127.0.0.1:${r.adminPort}`, '--node-id', r.name, ...common], {}, 20_000);
      }),
    );
    haproxy = await HAProxy.start(relays.map((r) => ({ name: r.name, port: r.port, adminPort: r.adminPort })));
    await pollUntil(async () => Object.values(await haproxy.servers()).filter((s) => s.status.startsWith('UP')).length === 3 || undefined, 'HAProxy sees three relays up', 10_000);
    for (let i = 0; i < DELTA; i++) {
      const c = new FleetClient(haproxy.address, `delta-${i}`, CLUSTER, [name(i)]);
      deltas.push(c);
      c.start();
    }
    for (let i = 0; i < SOTW; i++) {
      const c = new ReconnectingSotw(haproxy.address, `sotw-${i}`, [name(i)]);
      sotws.push(c);
      c.start();
    }
    nacker = new DeltaClient(haproxy.address, {
      nodeId: 'nacker',
      reject: (resp) => ((resp.resources ?? []).some((r) => r.name === BAD) ? NACK_MESSAGE : undefined),
    });
    nacker.subscribe(CLUSTER, [BAD]);
  });

  after(async () => {
    nacker?.close();
    for (const c of deltas) c.close();
    for (const c of sotws) c.close();
    await haproxy?.stop();
    await Promise.all(relays.map((r) => r.cli?.stop()));
    await origin?.stop();
    await redis?.dispose();
  });

  test('status --fleet --json through HAProxy lists all 30 clients with the relay each is on and the NACK with its message; each relay directly gives the same', T, async () => {
    const where = await pollUntil(async () => {
      const p = await placement();
      return p.size === CLIENTS ? p : undefined;
    }, 'all clients connected', 15_000);
    assert.equal(new Set(where.values()).size, 3, 'HAProxy spread the clients over the three relays');
    // Everything synced (or NACKed) before the answers are compared.
    // (Upstream states travel with the heartbeats: the first one, written as the relay started, may still say connecting.)
    await pollUntil(async () => {
      const { rows, fleet } = await fleetAnswer(address(relays[0]!));
      const clients = clientRows(rows);
      return clients.length === CLIENTS &&
        clients.filter((r) => r.nacks.length > 0).length === 1 &&
        clients.every((r) => Object.values(r.types).every((c) => c.stale === 0 && c.not_sent === 0)) &&
        fleet.every((r) => r.upstreams?.a === 'ready')
        ? true
        : undefined;
    }, 'every client synced, the NACK recorded, every upstream ready', 15_000);

    const viaLb = await statusCli(haproxy.address);
    assert.equal(viaLb.code, 0, viaLb.stderr);
    assertComplete(viaLb.json.clients, where, 'through HAProxy');
    assert.deepEqual(viaLb.json.fleet.map((r) => r.relay).sort(), relays.map(address).sort(), 'a line per relay');
    for (const r of viaLb.json.fleet) {
      assert.equal(r.reachable, true, `${r.relay} answered`);
      assert.equal(r.membership, 'redis');
      assert.equal(r.streams, [...where.values()].filter((a) => a === r.relay).length, `${r.relay}: its clients counted`);
      assert.equal(r.synced + r.stale + r.nacked, r.streams);
      assert.equal(r.upstreams?.a, 'ready');
    }
    assert.equal(viaLb.json.fleet.reduce((n, r) => n + r.nacked, 0), 1);

    const sets = [];
    for (const r of relays) {
      const direct = await statusCli(address(r));
      assert.equal(direct.code, 0, direct.stderr);
      assertComplete(direct.json.clients, where, `through ${r.name}`);
      sets.push(clientRows(direct.json.clients).map((c) => `${c.node}@${c.relay}`).sort());
    }
    assert.deepEqual(sets[1], sets[0]);
    assert.deepEqual(sets[2], sets[0]);

    // The same through `npm run xds -- status --fleet`.
    // (Not spawnSync: this process runs the clients, and they must keep answering meanwhile.)
    const tool = await promisify(execFile)(process.execPath, [XDS_TOOL, 'status', '--server', haproxy.address, '--fleet', '--json'], { env: cleanEnv(), encoding: 'utf8', timeout: 15_000 });
    assertComplete((JSON.parse(tool.stdout) as StatusJson).clients, where, 'npm run xds -- status --fleet');

    // The table: a RELAY column, a line per relay, the NACK.
    const table = await runCliToExit(['status', '--server', haproxy.address, '--fleet'], {}, 15_000);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^NODE\s+RELAY\s+PROTOCOL/m);
    assert.match(table.stdout, new RegExp(`^nacker\\s+${where.get('nacker')!.replace(/\./g, '\\.')}\\s+delta`, 'm'));
    assert.ok(table.stdout.includes(NACK_MESSAGE), table.stdout);
    for (const r of relays) assert.match(table.stdout, new RegExp(`^${address(r).replace(/\./g, '\\.')} \\(${r.name}\\): \\d+ clients( \\(of \\d+ connected\\))?: \\d+ synced, \\d+ stale, \\d+ NACKed; upstreams a=ready`, 'm'));
  });

  test('GET /debug/fleet lists the three relays: address, version, heartbeat age, clients, drain state', T, async () => {
    const body = await pollUntil(async () => {
      const b = (await http(relays[1]!.adminPort, 'GET', '/debug/fleet')).json as {
        membership: string;
        ttlMs: number;
        relays: Array<{ address: string; nodeId: string; version: string; heartbeatAgeMs: number; clients: number; draining: boolean; self: boolean }>;
      };
      // Client counts travel with the heartbeats: wait for one after the last client arrived.
      return b.relays.length === 3 && b.relays.reduce((n, r) => n + r.clients, 0) === CLIENTS ? b : undefined;
    }, 'the fleet with every client counted', 10_000);
    assert.equal(body.membership, 'redis');
    assert.equal(body.ttlMs, TTL_MS);
    assert.deepEqual(body.relays.map((r) => r.address).sort(), relays.map(address).sort());
    for (const r of body.relays) {
      assert.match(r.version, /^\d+\.\d+\.\d+/);
      assert.ok(r.heartbeatAgeMs >= 0 && r.heartbeatAgeMs < TTL_MS, `heartbeat age ${r.heartbeatAgeMs}`);
      assert.equal(r.draining, false);
      assert.equal(r.self, r.address === address(relays[1]!));
    }
  });

  test('a SIGKILLed relay is reported unreachable until its heartbeat expires, then gone; its clients show on the relays they reconnected to', T, async () => {
    const before = await placement();
    // Not the NACKing client's relay: that one does not reconnect.
    const victim = relays.find((r) => address(r) !== before.get('nacker'))!;
    const moved = [...before].filter(([, a]) => a === address(victim)).map(([id]) => id);
    assert.ok(moved.length > 0, 'the victim has clients');
    const proc = victim.cli!.proc;
    const gone = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGKILL');
    await gone;
    victim.cli = undefined;
    const survivor = address(relays.find((r) => r !== victim)!);

    const seen = await fleetAnswer(survivor);
    const entry = seen.fleet.find((r) => r.relay === address(victim));
    assert.ok(entry, `the killed relay is still listed right after the kill: ${JSON.stringify(seen.fleet.map((r) => r.relay))}`);
    assert.equal(entry.reachable, false);
    assert.match(entry.error ?? '', /UNAVAILABLE|DEADLINE_EXCEEDED/);

    // Gone once its record expired (within the TTL of its last heartbeat).
    await pollUntil(async () => ((await fleetAnswer(survivor)).fleet.some((r) => r.relay === address(victim)) ? undefined : true), 'the killed relay leaves the fleet', TTL_MS + 3000);

    const after = await pollUntil(async () => {
      const p = await placement();
      return p.size === CLIENTS ? p : undefined;
    }, 'the moved clients reconnected', 15_000);
    const final = await pollUntil(async () => {
      const s = await statusCli(haproxy.address);
      return s.code === 0 && clientRows(s.json.clients).length === CLIENTS ? s : undefined;
    }, 'a complete fleet answer without the killed relay', 15_000);
    assertComplete(final.json.clients, after, 'after the kill');
    assert.equal(final.json.fleet.length, 2);
    assert.ok(final.json.fleet.every((r) => r.reachable && r.relay !== address(victim)));
    for (const id of moved) assert.notEqual(after.get(id), address(victim), `${id} moved`);
  });

  test('a draining relay says so; one that shuts down leaves the fleet at once, before its record would expire', T, async () => {
    const [drained, other] = relays.filter((r) => r.cli) as [(typeof relays)[number], (typeof relays)[number]];
    const reply = await http(drained.adminPort, 'POST', '/drain?period=0');
    assert.equal(reply.status, 202, reply.text);
    type View = { relays: Array<{ address: string; draining: boolean }> };
    await pollUntil(async () => ((await http(other.adminPort, 'GET', '/debug/fleet')).json as View).relays.find((r) => r.address === address(drained))?.draining, 'the drain in its heartbeat', 5000);
    const { fleet } = await fleetAnswer(address(other));
    assert.equal(fleet.find((r) => r.relay === address(drained))?.draining, true);

    await drained.cli!.stop();
    drained.cli = undefined;
    const view = (await http(other.adminPort, 'GET', '/debug/fleet')).json as View;
    assert.deepEqual(view.relays.map((r) => r.address), [address(other)], 'its record went with it');
  });
});
