/**
 * Real `redis-sentinel` processes (Debian's redis-sentinel) on loopback,
 * monitoring a primary started with test/support/redis-server.ts.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { WatchedChild, requireBinaries, which } from './binaries';
import { freePort } from './ports';
import { sleep } from './wait';

export interface SentinelOptions {
  masterName: string;
  masterPort: number;
  quorum: number;
  /** Unreachable this long = subjectively down. */
  downAfterMs: number;
  failoverTimeoutMs: number;
}

export class RedisSentinel {
  private readonly child: WatchedChild;

  private constructor(
    proc: ChildProcess,
    private readonly dir: string,
    readonly port: number,
  ) {
    this.child = new WatchedChild(proc, 'redis-sentinel');
  }

  private get exited(): string | undefined {
    return this.child.exited;
  }

  private get output(): string {
    return this.child.output;
  }

  static async start(o: SentinelOptions): Promise<RedisSentinel> {
    requireBinaries(['redis-sentinel']);
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'xdstp-relay-sentinel-'));
    const conf = path.join(dir, 'sentinel.conf');
    // Sentinel rewrites its configuration file as it learns the topology: one per process.
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        'daemonize no',
        `dir ${dir}`,
        'loglevel warning',
        `sentinel monitor ${o.masterName} 127.0.0.1 ${o.masterPort} ${o.quorum}`,
        `sentinel down-after-milliseconds ${o.masterName} ${o.downAfterMs}`,
        `sentinel failover-timeout ${o.masterName} ${o.failoverTimeoutMs}`,
        `sentinel parallel-syncs ${o.masterName} 1`,
        '',
      ].join('\n'),
    );
    const proc = spawn(which('redis-sentinel')!, [conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    const s = new RedisSentinel(proc, dir, port);
    for (let i = 0; ; i++) {
      if (s.cliMaybe('ping') === 'PONG') return s;
      if (s.exited || i > 200) {
        await s.stop();
        throw new Error(`redis-sentinel did not start: ${s.exited ?? 'timeout'}\n${s.output}`);
      }
      await sleep(25);
    }
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  private cliMaybe(...args: string[]): string | undefined {
    const r = spawnSync(which('redis-cli') ?? 'redis-cli', ['-p', String(this.port), ...args], { encoding: 'utf8', timeout: 5000 });
    return r.status === 0 ? r.stdout.trim() : undefined;
  }

  /** `redis-cli -p <sentinel port> …args` output lines. */
  cli(...args: string[]): string[] {
    const out = this.cliMaybe(...args);
    if (out === undefined) throw new Error(`redis-cli -p ${this.port} ${args.join(' ')} failed\n${this.output}`);
    return out.split('\n');
  }

  /** `host:port` this sentinel considers the master of `name`. */
  masterOf(name: string): string {
    const [host, port] = this.cli('sentinel', 'get-master-addr-by-name', name);
    return `${host}:${port}`;
  }

  async stop(): Promise<void> {
    await this.child.stop(3000);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
