/**
 * Real `redis-server` processes for tests.
 *
 *   const srv = await RedisServer.start();      // free port, no persistence
 *   srv.url                                      // redis://127.0.0.1:<port>
 *   await srv.kill();  await srv.restart();      // restart keeps the SAME port
 *   await srv.stop();
 *
 *   const cluster = await RedisCluster.start(3); // 3 masters, slots assigned
 *
 * Missing redis-server: `redisSkip()` prints a loud banner and returns a skip
 * reason for `test(name, { skip }, fn)`. With CI=true it returns `false`
 * instead, so the test runs and FAILS on the missing binary.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { after, before } from 'node:test';
import Redis from 'ioredis';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const SERVER = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const CLI = process.env.REDIS_CLI_BIN ?? 'redis-cli';

let availability: boolean | undefined;

/** True when a runnable `redis-server` is on PATH (or REDIS_SERVER_BIN). */
export function redisAvailable(): boolean {
  if (availability === undefined) {
    const r = spawnSync(SERVER, ['--version'], { stdio: 'ignore', timeout: 5000 });
    availability = r.status === 0;
  }
  return availability;
}

let bannerShown = false;

/**
 * Skip reason for tests needing redis-server, or `false` to run them.
 * Outside CI a missing binary skips with a banner; under CI=true it does not
 * skip, and `RedisServer.start()` then fails the test.
 */
export function redisSkip(what = 'Redis tests'): string | false {
  if (redisAvailable()) return false;
  if (process.env.CI === 'true') return false;
  if (!bannerShown) {
    bannerShown = true;
    const line = '!'.repeat(78);
    console.warn(
      `\n${line}\n!!  SKIPPING ${what}: '${SERVER}' not found on PATH.\n` +
        `!!  Install it (Debian/Ubuntu: apt-get install redis-server) to run them.\n` +
        `!!  Under CI=true a missing redis-server fails these tests instead.\n${line}\n`,
    );
  }
  return `redis-server not installed (${what})`;
}

function assertAvailable(): void {
  if (!redisAvailable()) {
    throw new Error(
      `redis-server ('${SERVER}') is not installed but is required` +
        (process.env.CI === 'true' ? ' in CI (CI=true): install it in the CI image' : ''),
    );
  }
}

/** A TCP port that was free a moment ago (and, with `alsoPlus`, port+alsoPlus too). */
export async function freePort(alsoPlus?: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port =
      alsoPlus === undefined
        ? await listenAndClose(0)
        : 20000 + Math.floor(Math.random() * (65535 - alsoPlus - 20000));
    if (alsoPlus === undefined) return port;
    try {
      await listenAndClose(port);
      await listenAndClose(port + alsoPlus);
      return port;
    } catch {
      // taken, try another
    }
  }
  throw new Error('no free port found');
}

function listenAndClose(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => {
      const p = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(p));
    });
  });
}

/** One RESP round trip on a fresh socket; resolves the raw reply text or rejects. */
function rawCommand(port: number, command: string, timeoutMs = 500): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('timeout'));
    }, timeoutMs);
    sock.on('connect', () => sock.write(`${command}\r\n`));
    sock.on('data', (d) => {
      data += d.toString('utf8');
      if (data.endsWith('\r\n')) {
        clearTimeout(timer);
        sock.destroy();
        resolve(data);
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface RedisServerOptions {
  port?: number;
  /** Start with `--cluster-enabled yes` (needs a free bus port at port+10000). */
  cluster?: boolean;
  extraArgs?: string[];
}

export class RedisServer {
  private proc: ChildProcess | undefined;
  private stderr = '';

  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly opts: RedisServerOptions,
  ) {}

  static async start(opts: RedisServerOptions = {}): Promise<RedisServer> {
    assertAvailable();
    const port = opts.port ?? (await freePort(opts.cluster ? 10000 : undefined));
    const dir = mkdtempSync(path.join(os.tmpdir(), 'xdstp-relay-redis-'));
    const srv = new RedisServer(port, dir, opts);
    await srv.launch();
    return srv;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc !== undefined;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  private async launch(): Promise<void> {
    const args = [
      '--port', String(this.port),
      '--bind', '127.0.0.1',
      '--save', '',
      '--appendonly', 'no',
      '--daemonize', 'no',
      '--dir', this.dir,
      '--loglevel', 'warning',
    ];
    if (this.opts.cluster) {
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${this.port}.conf`, '--cluster-node-timeout', '2000');
    }
    args.push(...(this.opts.extraArgs ?? []));
    const proc = spawn(SERVER, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    this.stderr = '';
    proc.stderr?.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString('utf8')).slice(-4000);
    });
    let exited: string | undefined;
    proc.once('exit', (code, signal) => {
      exited = `exited (code ${code}, signal ${signal})`;
      if (this.proc === proc) this.proc = undefined;
    });
    proc.once('error', (err) => {
      exited = `failed to start: ${err.message}`;
      if (this.proc === proc) this.proc = undefined;
    });
    try {
      await waitFor(`redis-server on port ${this.port} to answer PING`, 10_000, async () => {
        if (exited) throw new Error(exited);
        const reply = await rawCommand(this.port, 'PING');
        return reply.startsWith('+PONG') || reply.startsWith('-NOAUTH'); // answering (maybe with requirepass)
      });
    } catch (err) {
      const why = exited ?? (err as Error).message;
      await this.kill();
      throw new Error(`redis-server on port ${this.port}: ${why}\n${this.stderr}`);
    }
  }

  /** SIGKILL: the abrupt way (no goodbye to clients). */
  kill(): Promise<void> {
    return this.terminate('SIGKILL');
  }

  /** Graceful stop (SIGTERM), escalating to SIGKILL after 3 s. */
  async stop(): Promise<void> {
    await this.terminate('SIGTERM');
  }

  /** Freeze / thaw the process: connections stay open but nothing answers. */
  pause(): void {
    this.proc?.kill('SIGSTOP');
  }

  resume(): void {
    this.proc?.kill('SIGCONT');
  }

  /** Starts again on the same port (after a kill/stop, or stopping it first). */
  async restart(): Promise<void> {
    if (this.proc) await this.stop();
    await this.launch();
  }

  /** Stops the process and removes its working directory. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private terminate(signal: NodeJS.Signals): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) {
      this.proc = undefined;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const escalate = setTimeout(() => proc.kill('SIGKILL'), 3000);
      proc.once('exit', () => {
        clearTimeout(escalate);
        this.proc = undefined;
        resolve();
      });
      proc.kill('SIGCONT'); // a paused process can't handle SIGTERM
      proc.kill(signal);
    });
  }

  /** Runs `redis-cli -p <port> …args`, returns stdout. */
  cli(...args: string[]): string {
    return runCli(['-p', String(this.port), ...args]);
  }
}

function runCli(args: string[]): string {
  const r = spawnSync(CLI, args, { encoding: 'utf8', timeout: 20_000 });
  if (r.error) throw new Error(`${CLI} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${CLI} ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** A throw-away Redis Cluster of `masters` masters (no replicas) on local ports. */
export class RedisCluster {
  private constructor(readonly nodes: RedisServer[]) {}

  static async start(masters = 3): Promise<RedisCluster> {
    assertAvailable();
    const nodes: RedisServer[] = [];
    try {
      for (let i = 0; i < masters; i++) nodes.push(await RedisServer.start({ cluster: true }));
      runCli(['--cluster', 'create', ...nodes.map((n) => n.address), '--cluster-replicas', '0', '--cluster-yes']);
      await waitFor('cluster_state:ok on every node', 15_000, async () => {
        const infos = await Promise.all(nodes.map((n) => rawCommand(n.port, 'CLUSTER INFO')));
        return infos.every((s) => s.includes('cluster_state:ok'));
      });
      return new RedisCluster(nodes);
    } catch (err) {
      await Promise.all(nodes.map((n) => n.dispose()));
      throw err;
    }
  }

  /** `host:port` of every node, for `RedisStoreOptions.cluster`. */
  get addresses(): string[] {
    return this.nodes.map((n) => n.address);
  }

  async dispose(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.dispose()));
  }
}

/**
 * One redis-server for a test suite (call inside `describe`), with a raw
 * client: started before the suite's tests; after them, the stores handed to
 * `closeAfter` are closed, then the client and the server.
 */
export class RedisSuite {
  server!: RedisServer;
  raw!: Redis;
  private readonly stores: Array<{ close(): Promise<void> }> = [];

  constructor() {
    before(async () => {
      this.server = await RedisServer.start();
      this.raw = new Redis(this.server.url);
    });
    after(async () => {
      await Promise.all(this.stores.map((s) => s.close()));
      this.raw?.disconnect();
      await this.server?.dispose();
    });
  }

  /** `store`, closed after the suite. */
  closeAfter<T extends { close(): Promise<void> }>(store: T): T {
    this.stores.push(store);
    return store;
  }
}
