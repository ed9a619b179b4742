/**
 * The processes a scenario runs: the relay (the real CLI, pinned to the server
 * core), the ceiling server, and the load generator pool (pinned to the load
 * core). Each is started and stopped by the scenario that uses it.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Plan } from './names';
import { LOAD_CORE, SERVER_CORE, cpuSeconds, freePort, httpGet, memStatus, sleep, spawnPinned, stopChild, type MemStatus } from './proc';
import { RpcChild } from './rpc';
import type {
  AdsProtocol,
  CollectResult,
  OpenCommand,
  OpenResult,
  RoundResult,
  StallStateResult,
  SyncResult,
  WindowSpec,
} from './protocol';

/** dist/bench/lib → dist/src/cli.js */
export const CLI_PATH = path.resolve(__dirname, '..', '..', 'src', 'cli.js');
const WORKER_PATH = path.resolve(__dirname, '..', 'loadgen', 'worker.js');
const CEILING_PATH = path.resolve(__dirname, '..', 'ceiling', 'server.js');

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('XDSTP_RELAY_')) env[k] = v;
  return env;
}

// ------------------------------------------------------------------ metrics

/** Sum of every sample of `name` whose labels include `labels` (Prometheus text format). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    let labelText = '';
    let valueText = rest.trim();
    if (rest[0] === '{') {
      const close = rest.indexOf('}');
      labelText = rest.slice(1, close);
      valueText = rest.slice(close + 1).trim();
    }
    const ok = Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`));
    if (!ok) continue;
    total += Number(valueText.split(' ')[0]);
    found = true;
  }
  return found ? total : NaN;
}

// -------------------------------------------------------------------- relay

export interface RelayProc {
  readonly pid: number;
  readonly port: number;
  readonly adminPort: number;
  readonly child: ChildProcess;
  metrics(): Promise<string>;
  cpu(): number;
  mem(): MemStatus;
  /** Last lines of its output (for error reports). */
  output(): string;
  stop(): Promise<void>;
}

export interface RelayStartOptions {
  originPort: number;
  share?: boolean;
  /** Extra CLI flags (e.g. --redis …). */
  extraArgs?: string[];
  /** Node flags before the script (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** Wait for /readyz (upstream connected) rather than /healthz. */
  waitReady?: boolean;
  timeoutMs?: number;
  /** Core to pin the relay to (default SERVER_CORE). */
  core?: number;
  /** Interval of the readiness poll (default 50 ms). */
  pollMs?: number;
}

/** Starts `node dist/src/cli.js …` pinned to the server core and waits until it answers. */
export async function startRelay(opts: RelayStartOptions): Promise<RelayProc> {
  const port = await freePort();
  const adminPort = await freePort();
  const args = [
    ...(opts.nodeArgs ?? []),
    CLI_PATH,
    '--listen',
    `127.0.0.1:${port}`,
    '--admin',
    `127.0.0.1:${adminPort}`,
    '--authority',
    `bench=grpc://127.0.0.1:${opts.originPort}`,
    '--log-level',
    'warn',
    ...(opts.share === false ? ['--no-share-responses'] : []),
    ...(hasShutdownGrace() ? ['--shutdown-grace', '500'] : []),
    // Every load-generator connection comes from 127.0.0.1: the per-peer bound would cap the scenario.
    ...(cliHasFlag('--max-connections-per-peer') ? ['--max-connections-per-peer', '0', '--max-connections', '0'] : []),
    ...(opts.extraArgs ?? []),
  ];
  const child = spawnPinned(opts.core ?? SERVER_CORE, process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv() });
  const lines: string[] = [];
  const keep = (d: Buffer): void => {
    for (const l of d.toString('utf8').split('\n')) if (l.trim()) lines.push(l);
    if (lines.length > 50) lines.splice(0, lines.length - 50);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const pid = child.pid ?? -1;
  const relay: RelayProc = {
    pid,
    port,
    adminPort,
    child,
    metrics: async () => (await httpGet(adminPort, '/metrics')).body,
    cpu: () => cpuSeconds(pid),
    mem: () => memStatus(pid),
    output: () => lines.join('\n'),
    // Graceful drain takes up to 2 s, then a --cpu-prof profile is written on exit.
    stop: () => stopChild(child, 15_000),
  };
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  const probe = opts.waitReady === false ? '/healthz' : '/readyz';
  for (;;) {
    if (child.exitCode !== null) throw new Error(`relay exited with ${child.exitCode}:\n${relay.output()}`);
    try {
      const r = await httpGet(adminPort, probe, 1000);
      if (r.status === 200) return relay;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await relay.stop();
      throw new Error(`relay not ready on ${probe} within ${opts.timeoutMs ?? 15_000} ms:\n${relay.output()}`);
    }
    await sleep(opts.pollMs ?? 50);
  }
}

let helpText: string | undefined;

/** True when this build of the CLI has a flag (its --help mentions it). */
export function cliHasFlag(flag: string): boolean {
  if (helpText === undefined) {
    const r = spawnSync(process.execPath, [CLI_PATH, '--help'], { encoding: 'utf8', timeout: 10_000 });
    helpText = `${r.stdout}${r.stderr}`;
  }
  return new RegExp(`${flag.replace(/[-]/g, '\\-')}(\\s|$)`, 'm').test(helpText);
}

/** Benchmark relays get a short shutdown grace so teardown with thousands of clients stays quick. */
function hasShutdownGrace(): boolean {
  return cliHasFlag('--shutdown-grace');
}

// ------------------------------------------------------------------ ceiling

export interface CeilingProc {
  readonly rpc: RpcChild;
  readonly port: number;
  readonly pid: number;
  cpu(): number;
  mem(): MemStatus;
  stop(): Promise<void>;
}

/** A bare server: grpc mode serves both ADS methods (delta and SotW), h2 mode answers any path. */
export async function startCeiling(mode: 'grpc' | 'h2', nodeArgs: string[] = []): Promise<CeilingProc> {
  const child = spawnPinned(SERVER_CORE, process.execPath, [...nodeArgs, CEILING_PATH, `--mode=${mode}`], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const rpc = new RpcChild(`ceiling-${mode}`, child);
  const hello = (await rpc.hello) as { port: number };
  return {
    rpc,
    port: hello.port,
    pid: rpc.pid,
    cpu: () => cpuSeconds(rpc.pid),
    mem: () => memStatus(rpc.pid),
    stop: () => rpc.stop(),
  };
}

// -------------------------------------------------------------- load generators

export interface OpenOptions {
  /** Delta (default) or state-of-the-world ADS. */
  protocol?: AdsProtocol;
  subscribe?: boolean;
  streamsPerConn?: number;
  concurrency?: number;
  stallEvery?: number;
  ack?: boolean;
  window?: WindowSpec;
  stallWindow?: WindowSpec;
  /** Each client's node lists an Envoy-like build with this many extensions (default 0: a plain node). */
  envoyExtensions?: number;
}

const DEFAULT_WINDOW: WindowSpec = { stream: 1 << 20, conn: 4 << 20 };
/** A stallable client grants little window, so a stall reaches the relay within a few responses. */
const STALL_WINDOW: WindowSpec = { stream: 4 * 1024, conn: 65535 };

export class GenPool {
  private constructor(readonly gens: RpcChild[]) {}

  static async start(n: number): Promise<GenPool> {
    const gens: RpcChild[] = [];
    for (let i = 0; i < n; i++) {
      const child = spawnPinned(LOAD_CORE, process.execPath, ['--max-old-space-size=4096', WORKER_PATH], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      gens.push(new RpcChild(`loadgen-${i}`, child));
    }
    await Promise.all(gens.map((g) => g.hello));
    return new GenPool(gens);
  }

  get pids(): number[] {
    return this.gens.map((g) => g.pid);
  }

  /** CPU seconds used by all generators so far. */
  cpu(): number {
    let t = 0;
    for (const g of this.gens) t += cpuSeconds(g.pid);
    return t;
  }

  mem(): number {
    let t = 0;
    for (const g of this.gens) t += memStatus(g.pid).rss;
    return t;
  }

  private all<T>(body: (i: number) => object, timeoutMs?: number): Promise<T[]> {
    return Promise.all(this.gens.map((g, i) => g.call<T>(body(i), timeoutMs)));
  }

  /** Opens `total` clients (indices firstIndex…) spread evenly over the generators. */
  async open(group: string, port: number, total: number, plan: Plan, o: OpenOptions = {}, firstIndex = 0): Promise<OpenResult> {
    const n = this.gens.length;
    const per = Math.floor(total / n);
    const rest = total % n;
    const cmds: OpenCommand[] = [];
    let first = firstIndex;
    for (let i = 0; i < n; i++) {
      const count = per + (i < rest ? 1 : 0);
      cmds.push({
        cmd: 'open',
        group,
        port,
        protocol: o.protocol ?? 'delta',
        first,
        count,
        plan,
        subscribe: o.subscribe ?? true,
        streamsPerConn: o.streamsPerConn ?? 1,
        concurrency: Math.max(1, Math.floor((o.concurrency ?? 256) / n)),
        stallEvery: o.stallEvery ?? 0,
        ack: o.ack ?? true,
        window: o.window ?? DEFAULT_WINDOW,
        stallWindow: o.stallWindow ?? STALL_WINDOW,
        envoyExtensions: o.envoyExtensions ?? 0,
      });
      first += count;
    }
    const rs = await this.all<OpenResult>((i) => cmds[i]!);
    return {
      opened: rs.reduce((a, r) => a + r.opened, 0),
      failed: rs.reduce((a, r) => a + r.failed, 0),
      ms: Math.max(...rs.map((r) => r.ms)),
      ...(rs.find((r) => r.firstError) ? { firstError: rs.find((r) => r.firstError)!.firstError } : {}),
    };
  }

  async subscribe(group: string): Promise<void> {
    await this.all(() => ({ cmd: 'subscribe', group }));
  }

  async waitSynced(group: string, timeoutMs: number): Promise<SyncResult> {
    const rs = await this.all<SyncResult>(() => ({ cmd: 'waitSynced', group, timeoutMs }), timeoutMs + 30_000);
    const endReasons: Record<string, number> = {};
    for (const r of rs) for (const [k, v] of Object.entries(r.endReasons)) endReasons[k] = (endReasons[k] ?? 0) + v;
    return {
      synced: rs.reduce((a, r) => a + r.synced, 0),
      total: rs.reduce((a, r) => a + r.total, 0),
      times: rs.flatMap((r) => r.times),
      ended: rs.reduce((a, r) => a + r.ended, 0),
      endReasons,
    };
  }

  async watch(group: string, round: number, timeoutMs: number): Promise<RoundResult> {
    const rs = await this.all<RoundResult>(() => ({ cmd: 'watch', group, round, timeoutMs }), timeoutMs + 30_000);
    return {
      round,
      got: rs.reduce((a, r) => a + r.got, 0),
      total: rs.reduce((a, r) => a + r.total, 0),
      lat: rs.flatMap((r) => r.lat),
    };
  }

  async record(group: string, on: boolean, minT0Us: number): Promise<void> {
    await this.all(() => ({ cmd: 'record', group, on, minT0Us }));
  }

  async collect(group: string): Promise<CollectResult> {
    const rs = await this.all<CollectResult>(() => ({ cmd: 'collect', group }));
    return {
      samples: rs.flatMap((r) => r.samples),
      stalledSamples: rs.flatMap((r) => r.stalledSamples),
      messages: rs.reduce((a, r) => a + r.messages, 0),
      resources: rs.reduce((a, r) => a + r.resources, 0),
      bytes: rs.reduce((a, r) => a + r.bytes, 0),
      ended: rs.reduce((a, r) => a + r.ended, 0),
    };
  }

  async stall(group: string, on: boolean): Promise<number> {
    const rs = await this.all<{ stalled: number }>(() => ({ cmd: 'stall', group, on }));
    return rs.reduce((a, r) => a + r.stalled, 0);
  }

  async stallState(group: string): Promise<StallStateResult> {
    const rs = await this.all<StallStateResult>(() => ({ cmd: 'stallState', group }));
    return { clients: rs.flatMap((r) => r.clients) };
  }

  async close(group: string): Promise<void> {
    await this.all(() => ({ cmd: 'close', group }));
  }

  async stop(): Promise<void> {
    await Promise.all(this.gens.map((g) => g.stop()));
  }
}

export function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
}
