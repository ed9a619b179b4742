/**
 * Processes for the benchmark: spawn pinned to a core with taskset, read CPU
 * time and memory from /proc, free ports, HTTP GETs against 127.0.0.1, and
 * what a piece of work costs this process.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';

/** Core of the server under test (relay, ceiling, redis-server). */
export const SERVER_CORE = 0;
/** Core of the load generators, the origin and the coordinator. */
export const LOAD_CORE = 1;

let clkTck: number | undefined;

function ticksPerSecond(): number {
  if (clkTck === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number((r.stdout ?? '').trim());
    clkTck = Number.isFinite(n) && n > 0 ? n : 100;
  }
  return clkTck;
}

/** What `work` cost this process: its result, wall seconds, CPU µs (user + system) and minor page faults. */
export async function costOf<T>(work: () => Promise<T>): Promise<{ result: T; secs: number; cpuUs: number; faults: number }> {
  const cpu0 = process.cpuUsage();
  const faults0 = process.resourceUsage().minorPageFault;
  const t0 = process.hrtime.bigint();
  const result = await work();
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return { result, secs, cpuUs: cpu.user + cpu.system, faults: process.resourceUsage().minorPageFault - faults0 };
}

/**
 * The kernel's count of connections a listener's full accept queue turned
 * away, machine-wide (`TcpExt: ListenOverflows` in /proc/net/netstat); NaN
 * where the kernel does not say.
 */
export function listenOverflows(): number {
  try {
    const lines = fs.readFileSync('/proc/net/netstat', 'utf8').split('\n').filter((l) => l.startsWith('TcpExt:'));
    const names = lines[0]?.split(' ') ?? [];
    const values = lines[1]?.split(' ') ?? [];
    const i = names.indexOf('ListenOverflows');
    return i > 0 ? Number(values[i]) : NaN;
  } catch {
    return NaN;
  }
}

/** utime + stime of a process (all its threads), in seconds; NaN when it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
  } catch {
    return NaN;
  }
}

export interface MemStatus {
  /** Resident set size, bytes. */
  rss: number;
  /** Peak resident set size since start (VmHWM), bytes. */
  hwm: number;
}

export function memStatus(pid: number): MemStatus {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string): number => {
      const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
      return m ? Number(m[1]) * 1024 : NaN;
    };
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return { rss: NaN, hwm: NaN };
  }
}

/** Pins every thread of this process to `core`. */
export function pinSelf(core: number): boolean {
  const r = spawnSync('taskset', ['-apc', String(core), String(process.pid)], { stdio: 'ignore' });
  return r.status === 0;
}

export function tasksetAvailable(): boolean {
  return spawnSync('taskset', ['-V'], { stdio: 'ignore' }).status === 0;
}

/** `taskset -c core cmd args…`; taskset execs, so the child's pid is the command's pid. */
export function spawnPinned(core: number, cmd: string, args: string[], opts: SpawnOptions = {}): ChildProcess {
  return spawn('taskset', ['-c', String(core), cmd, ...args], opts);
}

// One free-port helper for tests and benchmarks alike.
export { freePort } from '../../test/support/ports';

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** GET http://127.0.0.1:port/path → status and body (rejects on connection errors or after timeoutMs). */
export function httpGet(port: number, path: string, timeoutMs = 5000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
  });
}

/** Monotonic time in microseconds (CLOCK_MONOTONIC: the same clock in every process on the box). */
export function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** Waits until the process's CPU counter stops moving (two equal reads `stepMs` apart), at most `maxMs`. */
export async function cpuSettled(pid: number, stepMs = 40, maxMs = 2000): Promise<number> {
  const end = Date.now() + maxMs;
  let last = cpuSeconds(pid);
  for (;;) {
    await sleep(stepMs);
    const now = cpuSeconds(pid);
    if (now === last || Date.now() >= end || Number.isNaN(now)) return now;
    last = now;
  }
}

/** Kills a child we started (by its pid only), SIGTERM then SIGKILL after graceMs. */
export async function stopChild(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Busy CPU seconds of the whole machine (all cores) since boot, from /proc/stat. */
export function machineBusySeconds(): number {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal …
    const busy = f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!;
    return busy / ticksPerSecond();
  } catch {
    return NaN;
  }
}

/** CPU seconds of this process plus its reaped children (utime stime cutime cstime). */
export function selfAndChildrenSeconds(): number {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / ticksPerSecond();
  } catch {
    return NaN;
  }
}

/** CPU used by processes that are not ours: a sample of `ms`, as a share of the whole machine. */
export async function foreignLoad(ms: number, ourPids: readonly number[] = []): Promise<number> {
  const ours = (): number => selfAndChildrenSeconds() + ourPids.reduce((t, p) => t + (cpuSeconds(p) || 0), 0);
  const b0 = machineBusySeconds();
  const o0 = ours();
  await sleep(ms);
  const busy = machineBusySeconds() - b0;
  const mine = ours() - o0;
  return Math.max(0, busy - mine) / ((ms / 1000) * os.cpus().length);
}
