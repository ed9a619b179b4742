/**
 * A real HAProxy (Debian's `haproxy`) in front of relays on loopback, running
 * the configuration the deployment ships (deploy/haproxy/haproxy.cfg) with
 * only its addresses and check timing replaced.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { requireBinaries, which } from './binaries';
import { freePort } from './ports';
import { sleep } from './wait';

/** dist/test/support/haproxy.js → deploy/haproxy/haproxy.cfg */
export const SHIPPED_CONFIG = path.resolve(__dirname, '..', '..', '..', 'deploy', 'haproxy', 'haproxy.cfg');

export interface Backend {
  name: string;
  /** delta-ADS port. */
  port: number;
  /** Admin port (GET /readyz). */
  adminPort: number;
}

export interface LoopbackOptions {
  port: number;
  statsPort: number;
  backends: Backend[];
  /** Health-check interval. */
  checkMs: number;
}

/**
 * The shipped configuration pointed at loopback: the client and stats
 * listeners on the given ports, one `server` per backend with its own check
 * port, checks every `checkMs`. Everything else (mode, timeouts, retries,
 * balance, the /readyz check) is kept as shipped. Throws if the shipped file
 * no longer has the lines this relies on.
 */
export function loopbackConfig(shipped: string, o: LoopbackOptions): string {
  const lines = shipped.split('\n');
  const out: string[] = [];
  let section = '';
  const seen = new Set<string>();
  for (const line of lines) {
    const t = line.trim();
    const head = /^(global|defaults|frontend|backend|listen)\b\s*(\S*)/.exec(line);
    if (head) section = `${head[1]} ${head[2]}`.trim();
    if (section === 'frontend xds' && t.startsWith('bind ')) {
      out.push(`    bind 127.0.0.1:${o.port}`);
      seen.add('bind');
    } else if (section === 'frontend stats' && t.startsWith('bind ')) {
      out.push(`    bind 127.0.0.1:${o.statsPort}`);
      seen.add('stats');
    } else if (section === 'backend relays' && t.startsWith('default-server ')) {
      const kept = t.replace(/\binter \S+/, `inter ${o.checkMs}ms`).replace(/\bport \d+/, '');
      if (!/\bcheck\b/.test(kept) || !/\binter\b/.test(kept)) throw new Error(`unexpected default-server line: ${t}`);
      out.push(`    ${kept}`);
      for (const b of o.backends) out.push(`    server ${b.name} 127.0.0.1:${b.port} port ${b.adminPort}`);
      seen.add('servers');
    } else if (section === 'backend relays' && t.startsWith('server ')) {
      continue; // replaced above
    } else {
      out.push(line);
    }
  }
  for (const need of ['bind', 'stats', 'servers']) {
    if (!seen.has(need)) throw new Error(`${SHIPPED_CONFIG} no longer has the ${need} line the tests rewrite`);
  }
  return out.join('\n');
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export class HAProxy {
  private exited: string | undefined;
  private output = '';

  private constructor(
    private readonly proc: ChildProcess,
    private readonly dir: string,
    readonly port: number,
    readonly statsPort: number,
  ) {
    proc.stdout?.on('data', (d: Buffer) => (this.output = (this.output + d.toString('utf8')).slice(-4000)));
    proc.stderr?.on('data', (d: Buffer) => (this.output = (this.output + d.toString('utf8')).slice(-4000)));
    proc.once('exit', (code, signal) => (this.exited = `haproxy exited (code ${code}, signal ${signal})`));
  }

  /** Starts haproxy with the shipped configuration pointed at `backends`. */
  static async start(backends: Backend[], checkMs = 100): Promise<HAProxy> {
    requireBinaries(['haproxy']);
    const [port, statsPort] = [await freePort(), await freePort()];
    const dir = mkdtempSync(path.join(os.tmpdir(), 'xdstp-relay-haproxy-'));
    const cfg = path.join(dir, 'haproxy.cfg');
    writeFileSync(cfg, loopbackConfig(readFileSync(SHIPPED_CONFIG, 'utf8'), { port, statsPort, backends, checkMs }));
    // -db: stay in the foreground, no daemon.
    const proc = spawn(which('haproxy')!, ['-f', cfg, '-db'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const h = new HAProxy(proc, dir, port, statsPort);
    for (let i = 0; !(await canConnect(port)); i++) {
      if (h.exited || i > 200) {
        await h.stop();
        throw new Error(`haproxy did not start: ${h.exited ?? 'timeout'}\n${h.output}`);
      }
      await sleep(25);
    }
    return h;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** HAProxy's view of each relay: server name → status (`UP`, `DOWN`, `UP 1/2`, …) and current sessions. */
  async servers(): Promise<Record<string, { status: string; sessions: number; total: number }>> {
    const csv = await (await fetch(`http://127.0.0.1:${this.statsPort}/stats;csv`)).text();
    const [header, ...rows] = csv.split('\n').filter((l) => l.trim() !== '');
    const cols = header!.replace(/^# /, '').split(',');
    const at = (name: string): number => cols.indexOf(name);
    const out: Record<string, { status: string; sessions: number; total: number }> = {};
    for (const row of rows) {
      const f = row.split(',');
      if (f[at('pxname')] !== 'relays' || ['FRONTEND', 'BACKEND'].includes(f[at('svname')]!)) continue;
      out[f[at('svname')]!] = { status: f[at('status')]!, sessions: Number(f[at('scur')]), total: Number(f[at('stot')]) };
    }
    return out;
  }

  async stop(): Promise<void> {
    if (!this.exited) {
      const done = new Promise<void>((r) => this.proc.once('exit', () => r()));
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 3000);
      await done;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
