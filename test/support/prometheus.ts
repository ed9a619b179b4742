/**
 * A real Prometheus (Debian's `prometheus`) on loopback with a throw-away
 * storage directory, and `promtool`, for checking what deploy/prometheus/
 * ships.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { WatchedChild, requireBinaries, which } from './binaries';
import { freePort } from './ports';
import { sleep } from './wait';

/** dist/test/support/prometheus.js → deploy/prometheus/ */
export const PROMETHEUS_DIR = path.resolve(__dirname, '..', '..', '..', 'deploy', 'prometheus');

export interface ToolRun {
  code: number | null;
  output: string;
}

/** Runs `promtool …args` (cwd: deploy/prometheus/). */
export function promtool(...args: string[]): ToolRun {
  return promtoolWithInput(undefined, ...args);
}

/** Runs `promtool …args` with `input` on its standard input (e.g. `check metrics`). */
export function promtoolWithInput(input: string | undefined, ...args: string[]): ToolRun {
  requireBinaries(['promtool']);
  const r = spawnSync(which('promtool')!, args, { cwd: PROMETHEUS_DIR, encoding: 'utf8', timeout: 60_000, input });
  return { code: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}` };
}

/** One sample of an instant vector from the HTTP API. */
export interface VectorSample {
  metric: Record<string, string>;
  value: [number, string];
}

export class Prometheus {
  private readonly child: WatchedChild;

  private constructor(
    proc: ChildProcess,
    private readonly dir: string,
    readonly port: number,
  ) {
    this.child = new WatchedChild(proc, 'prometheus');
  }

  private get exited(): string | undefined {
    return this.child.exited;
  }

  private get output(): string {
    return this.child.output;
  }

  /** Starts prometheus with `config` (YAML text) on a free loopback port; resolves once /-/ready answers. */
  static async start(config: string): Promise<Prometheus> {
    requireBinaries(['prometheus']);
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'xdstp-relay-prometheus-'));
    const file = path.join(dir, 'prometheus.yml');
    writeFileSync(file, config);
    const proc = spawn(
      which('prometheus')!,
      [`--config.file=${file}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const p = new Prometheus(proc, dir, port);
    for (let i = 0; ; i++) {
      const ready = await fetch(`http://127.0.0.1:${port}/-/ready`).then((r) => r.ok, () => false);
      if (ready) return p;
      if (p.exited || i > 600) {
        await p.stop();
        throw new Error(`prometheus did not become ready: ${p.exited ?? 'timeout'}\n${p.output}`);
      }
      await sleep(50);
    }
  }

  private async api<T>(pathAndQuery: string): Promise<T> {
    const res = await fetch(`http://127.0.0.1:${this.port}${pathAndQuery}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${pathAndQuery}: ${body.error ?? res.status}`);
    return body.data;
  }

  /** Instant query. */
  async query(expr: string): Promise<VectorSample[]> {
    const data = await this.api<{ resultType: string; result: VectorSample[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
    return data.result;
  }

  /** Loaded rule groups with each rule's name, health and last error. */
  async rules(): Promise<Array<{ name: string; rules: Array<{ name: string; health: string; lastError?: string; type: string }> }>> {
    return (await this.api<{ groups: Array<{ name: string; rules: Array<{ name: string; health: string; lastError?: string; type: string }> }> }>('/api/v1/rules')).groups;
  }

  async stop(): Promise<void> {
    await this.child.stop(5000);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
