/**
 * The fleet as it is deployed: a real HAProxy (TCP mode, checks on /readyz,
 * deploy/haproxy/haproxy.cfg with loopback addresses) in front of three relay
 * processes (the real CLI) sharing one redis-server and one control plane;
 * 200 delta clients reach them through HAProxy's one address and reconnect
 * through it, resuming with initial_resource_versions, like Envoys.
 *
 * The tests run in order on one fleet; each leaves three ready relays.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { binariesSkip } from './support/binaries';
import { spawnCli, type SpawnedCli } from './support/cli';
import { FleetClient } from './support/fleet-client';
import { HAProxy } from './support/haproxy';
import { http, metricValue, parsePrometheus } from './support/admin';
import { CLUSTER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { freePort } from './support/ports';
import { RedisServer, redisSkip } from './support/redis-server';
import { sleep } from './support/wait';

const skip = redisSkip('fleet behind HAProxy') || binariesSkip(['haproxy'], 'fleet behind HAProxy');
const CLIENTS = 200;
const MEMBERS = 40;
const SINGLETONS = 10;
const DRAIN_PERIOD_MS = 3000;
/** Upstream reconnects back off up to a few seconds; convergence waits span that. */
const CONVERGE_MS = 25_000;
const T = { timeout: 90_000 };

const GLOB = xdstp('a', CLUSTER, 'fleet/*');
const member = (i: number): string => xdstp('a', CLUSTER, `fleet/m${i}`);
const singleton = (i: number): string => xdstp('a', CLUSTER, `single/s${i}`);
const versionNumber = (v: string): number => Number(v.slice(1));

class RelayProcess {
  cli: SpawnedCli | undefined;

  constructor(
    readonly name: string,
    readonly port: number,
    readonly adminPort: number,
    private readonly args: string[],
  ) {}

  async start(): Promise<void> {
    this.cli = await spawnCli(
      ['--listen', `127.0.0.1:${this.port}`, '--admin', `127.0.0.1:${this.adminPort}`, '--node-id', this.name, ...this.args],
      {},
      20_000,
    );
  }

  /** SIGKILL: no drain, no goodbye. */
  async kill(): Promise<void> {
    const proc = this.cli?.proc;
    this.cli = undefined;
    if (!proc || proc.exitCode !== null) return;
    const gone = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGKILL');
    await gone;
  }

  async stop(): Promise<void> {
    await this.cli?.stop();
    this.cli = undefined;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async metric(name: string): Promise<number> {
    return metricValue(parsePrometheus((await http(this.adminPort, 'GET', '/metrics')).text), name);
  }

  /** Node ids of the client streams open on this relay. */
  async nodeIds(): Promise<Set<string>> {
    const body = (await http(this.adminPort, 'GET', '/debug/clients?limit=100000')).json as { clients: Array<{ node: { id: string } | null }> };
    return new Set(body.clients.map((c) => c.node?.id ?? ''));
  }
}

describe('three relays behind a real HAProxy', { skip }, () => {
  let redis: RedisServer;
  let origin: TestOrigin;
  let haproxy: HAProxy;
  const relays: RelayProcess[] = [];
  const clients: FleetClient[] = [];
  let version = 1;

  /** What a client subscribed to [GLOB, its singleton] must end up holding: the origin's state. */
  function expected(c: FleetClient): Map<string, string> {
    const want = new Map<string, string>();
    for (const n of [...Array(MEMBERS * 2).keys()].map(member).concat(c.names.filter((n) => n !== GLOB))) {
      const r = origin.getResource(CLUSTER, n);
      if (r) want.set(n, r.version);
    }
    return want;
  }

  function isCurrent(c: FleetClient): boolean {
    const held = c.held();
    const want = expected(c);
    if (held.size !== want.size) return false;
    for (const [n, v] of want) if (held.get(n) !== v) return false;
    return true;
  }

  async function allCurrent(what: string, timeoutMs = CONVERGE_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const stale = clients.filter((c) => !c.connected || !isCurrent(c));
      if (stale.length === 0) return;
      if (Date.now() > deadline) {
        const c = stale[0]!;
        const want = expected(c);
        const diff = [...want].filter(([n, v]) => c.held().get(n) !== v).slice(0, 5);
        throw new Error(`${what}: ${stale.length} clients not current, e.g. ${c.nodeId} (connected ${c.connected}): ${JSON.stringify(diff)} held ${c.held().size}/${want.size}`);
      }
      await sleep(50);
    }
  }

  function assertNothingLost(): void {
    for (const c of clients) {
      assert.deepEqual(c.removed, [], `${c.nodeId} was sent removals`);
      assert.deepEqual(c.violations, [], `${c.nodeId} saw protocol violations`);
      for (const [name, versions] of c.history) {
        const nums = versions.map(versionNumber);
        for (let i = 1; i < nums.length; i++) assert.ok(nums[i]! >= nums[i - 1]!, `${c.nodeId} was rolled back on ${name}: ${versions.join(' → ')}`);
      }
    }
  }

  async function serverStatus(name: string): Promise<string> {
    return (await haproxy.servers())[name]?.status ?? 'missing';
  }

  async function waitStatus(name: string, prefix: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await serverStatus(name)).startsWith(prefix)) {
      if (Date.now() > deadline) throw new Error(`HAProxy never saw ${name} ${prefix}: ${JSON.stringify(await haproxy.servers())}`);
      await sleep(20);
    }
  }

  before(async () => {
    redis = await RedisServer.start();
    origin = await TestOrigin.start({ label: 'fleet-origin' });
    for (let i = 0; i < MEMBERS; i++) origin.setResource(CLUSTER, member(i), `m${i}`, `v${version}`);
    for (let i = 0; i < SINGLETONS; i++) origin.setResource(CLUSTER, singleton(i), `s${i}`, `v${version}`);
    const common = [
      '--authority', `a=${origin.uri}`,
      '--redis', redis.url,
      '--redis-prefix', `fleet-${process.pid}:`,
      '--drain-period', String(DRAIN_PERIOD_MS),
      '--shutdown-grace', '500',
      '--log-level', 'info',
    ];
    for (let i = 1; i <= 3; i++) relays.push(new RelayProcess(`relay-${i}`, await freePort(), await freePort(), common));
    await Promise.all(relays.map((r) => r.start()));
    haproxy = await HAProxy.start(relays.map((r) => ({ name: r.name, port: r.port, adminPort: r.adminPort })));
    for (const r of relays) await waitStatus(r.name, 'UP');
    for (let i = 0; i < CLIENTS; i++) {
      const c = new FleetClient(haproxy.address, `client-${i}`, CLUSTER, [GLOB, singleton(i % SINGLETONS)]);
      clients.push(c);
      c.start();
    }
  });

  after(async () => {
    for (const c of clients) c.close();
    await haproxy?.stop();
    await Promise.all(relays.map((r) => r.stop().catch(() => undefined)));
    await origin?.stop();
    await redis?.dispose();
  });

  test('200 clients sync through HAProxy, spread over the three relays', T, async () => {
    await allCurrent('initial sync');
    const perRelay = await Promise.all(relays.map((r) => r.metric('xdstp_relay_downstream_streams_open')));
    assert.equal(perRelay.reduce((a, b) => a + b, 0), CLIENTS, `streams per relay ${perRelay}`);
    for (const n of perRelay) assert.ok(n >= CLIENTS / 6, `leastconn spreads them: ${perRelay}`);
    assertNothingLost();
  });

  test('POST /drain?wait=1: HAProxy stops sending the relay new clients, its clients move at the drain rate and lose nothing', T, async () => {
    await allCurrent('before the drain');
    const drained = relays[1]!;
    const onIt = await drained.nodeIds();
    const movers = clients.filter((c) => onIt.has(c.nodeId));
    assert.ok(movers.length >= 20, `${movers.length} clients on ${drained.name}`);
    const before = new Map(movers.map((c) => [c, c.ends.length]));
    const heldBefore = new Map(clients.map((c) => [c, c.held()]));

    const t0 = Date.now();
    const drain = http(drained.adminPort, 'POST', `/drain?wait=1`);
    // Readiness: HAProxy takes it out of rotation within a couple of checks.
    await waitStatus(drained.name, 'DOWN', 2000);
    assert.ok(Date.now() - t0 < DRAIN_PERIOD_MS / 2, 'out of rotation well before the drain ends');
    // New clients arriving now land elsewhere.
    const acceptedBefore = await drained.metric('xdstp_relay_downstream_streams_total');
    const newcomers = Array.from({ length: 10 }, (_, i) => new FleetClient(haproxy.address, `newcomer-${i}`, CLUSTER, [GLOB]));
    try {
      for (const c of newcomers) c.start();
      await Promise.all(newcomers.map((c) => c.waitFor(() => c.held().size === MEMBERS, 'the glob', 10_000)));
      assert.equal(await drained.metric('xdstp_relay_downstream_streams_total'), acceptedBefore, 'no new stream reached the draining relay');
    } finally {
      for (const c of newcomers) c.close();
    }

    const reply = await drain;
    assert.equal(reply.status, 200, reply.text);
    await allCurrent('after the drain');
    assert.equal(await drained.metric('xdstp_relay_downstream_streams_open'), 0);

    // Every mover left. One sent away before HAProxy's checks saw the relay
    // unready may have been placed on it again and left a second time.
    const departures: number[] = [];
    let twice = 0;
    for (const c of movers) {
      const left = c.ends.slice(before.get(c)!).map((e) => e.at);
      assert.ok(left.length >= 1 && left.length <= 2, `${c.nodeId} left ${left.length} times`);
      if (left.length === 2) twice++;
      departures.push(...left);
    }
    assert.ok(twice <= movers.length / 4, `${twice} of ${movers.length} clients came back before HAProxy saw the drain`);
    // Gradual: no more than the drain rate per second (its streams over its
    // period), with a quarter of slack: 200 clients' stream ends are seen
    // through one busy event loop, so their timestamps bunch up a little.
    departures.sort((a, b) => a - b);
    const perSecond = Math.ceil((departures.length / (DRAIN_PERIOD_MS / 1000)) * 1.25) + 1;
    let worst = 0;
    for (let i = 0, j = 0; i < departures.length; i++) {
      while (departures[i]! - departures[j]! >= 1000) j++;
      worst = Math.max(worst, i - j + 1);
    }
    assert.ok(worst <= perSecond, `at most ${perSecond} clients/s left, saw ${worst} within one second`);
    assert.ok(departures[departures.length - 1]! - departures[0]! >= DRAIN_PERIOD_MS / 2, 'spread over the drain period, not all at once');
    for (const c of clients) assert.deepEqual(c.held(), heldBefore.get(c), `${c.nodeId} lost nothing`);
    assertNothingLost();

    await drained.restart();
    await waitStatus(drained.name, 'UP');
  });

  test('a relay SIGKILLed mid update burst: its clients reconnect through HAProxy, resume, and end at the origin\'s final state', T, async () => {
    await allCurrent('before the burst');
    const victim = relays[0]!;
    const onIt = await victim.nodeIds();
    const movers = clients.filter((c) => onIt.has(c.nodeId));
    assert.ok(movers.length >= 20, `${movers.length} clients on ${victim.name}`);
    const endsBefore = new Map(movers.map((c) => [c, c.ends.length]));

    // About 1.5 s of updates: every 25 ms two members and one singleton get a new version;
    // the relay dies a third of the way in.
    let killed = false;
    const burst = (async () => {
      for (let step = 0; step < 60; step++) {
        version++;
        for (let k = 0; k < 2; k++) origin.setResource(CLUSTER, member((step * 2 + k) % MEMBERS), `burst ${step}`, `v${version}`);
        origin.setResource(CLUSTER, singleton(step % SINGLETONS), `burst ${step}`, `v${version}`);
        if (step === 20) {
          await victim.kill();
          killed = true;
        }
        await sleep(25);
      }
    })();
    await burst;
    assert.ok(killed);
    await allCurrent('after the burst');
    for (const c of movers) assert.ok(c.ends.length > endsBefore.get(c)!, `${c.nodeId} moved off the killed relay`);
    const survivors = await Promise.all(relays.slice(1).map((r) => r.nodeIds()));
    for (const c of movers) assert.ok(survivors.some((ids) => ids.has(c.nodeId)), `${c.nodeId} is on a live relay`);
    assertNothingLost();

    await victim.start();
    await waitStatus(victim.name, 'UP');
  });

  test('the origin stopped while clients move between relays: nothing is removed, clients keep what they had, and all converge when it returns', T, async () => {
    await allCurrent('before the outage');
    const heldBefore = new Map(clients.map((c) => [c, c.held()]));
    await origin.stop();

    // Move a third of the clients while no relay can reach the control plane.
    const drained = relays[2]!;
    const onIt = await drained.nodeIds();
    const movers = clients.filter((c) => onIt.has(c.nodeId));
    assert.ok(movers.length >= 20, `${movers.length} clients on ${drained.name}`);
    const endsBefore = new Map(movers.map((c) => [c, c.ends.length]));
    const reply = await http(drained.adminPort, 'POST', '/drain?period=1000&wait=1');
    assert.equal(reply.status, 200, reply.text);
    const deadline = Date.now() + 10_000;
    while (!movers.every((c) => c.connected && c.ends.length > endsBefore.get(c)!)) {
      assert.ok(Date.now() < deadline, 'every mover reconnected');
      await sleep(50);
    }
    await sleep(300); // whatever the new relays would send on resume has arrived
    for (const c of clients) assert.deepEqual(c.held(), heldBefore.get(c), `${c.nodeId} keeps what it had while the origin is away`);
    assertNothingLost();

    // Changes made while it was away reach everyone once it returns.
    version++;
    for (let i = 0; i < 3; i++) origin.setResource(CLUSTER, member(i), 'after the outage', `v${version}`);
    origin.setResource(CLUSTER, member(MEMBERS), 'new member', `v${version}`);
    origin.setResource(CLUSTER, singleton(0), 'after the outage', `v${version}`);
    await origin.restart();
    await allCurrent('after the origin returned');
    for (const c of clients) assert.equal(c.held().get(member(MEMBERS)), `v${version}`);
    assertNothingLost();

    await drained.restart();
    await waitStatus(drained.name, 'UP');
  });
});
