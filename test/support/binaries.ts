/**
 * External programs the tests drive (haproxy, prometheus, promtool,
 * redis-sentinel, chromium). Like redis-server (redis-server.ts): missing outside CI, a
 * test skips with a loud banner; under CI=true it runs and fails on the
 * missing binary, since .ci/run installs them.
 */
import { accessSync, constants } from 'node:fs';
import * as path from 'node:path';

/** Debian package providing each binary (what .ci/run installs). */
const PACKAGE: Record<string, string> = {
  chromium: 'chromium',
  haproxy: 'haproxy',
  prometheus: 'prometheus',
  promtool: 'prometheus',
  'redis-sentinel': 'redis-sentinel',
  'redis-server': 'redis-server',
  'redis-cli': 'redis-tools',
};

const found = new Map<string, string | undefined>();

/** Full path of `bin` on PATH, or undefined. */
export function which(bin: string): string | undefined {
  if (!found.has(bin)) {
    let hit: string | undefined;
    // Debian puts haproxy in /usr/sbin, which a non-root PATH may lack.
    for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/sbin']) {
      if (!dir) continue;
      const p = path.join(dir, bin);
      try {
        accessSync(p, constants.X_OK);
        hit = p;
        break;
      } catch {
        // not here
      }
    }
    found.set(bin, hit);
  }
  return found.get(bin);
}

const bannered = new Set<string>();

/**
 * Skip reason for tests needing `bins`, or `false` to run them. Outside CI a
 * missing binary skips with a banner; under CI=true it does not skip, and
 * `requireBinaries` then fails the test.
 */
export function binariesSkip(bins: string[], what: string): string | false {
  const missing = bins.filter((b) => !which(b));
  if (missing.length === 0 || process.env.CI === 'true') return false;
  const key = `${what}:${missing.join(',')}`;
  if (!bannered.has(key)) {
    bannered.add(key);
    const line = '!'.repeat(78);
    const pkgs = [...new Set(missing.map((b) => PACKAGE[b] ?? b))].join(' ');
    console.warn(
      `\n${line}\n!!  SKIPPING ${what}: ${missing.map((b) => `'${b}'`).join(', ')} not found on PATH.\n` +
        `!!  Install (Debian/Ubuntu): apt-get install ${pkgs}\n` +
        `!!  Under CI=true a missing binary fails these tests instead.\n${line}\n`,
    );
  }
  return `${missing.join(', ')} not installed (${what})`;
}

/** Throws a clear error when one of `bins` is missing (the CI=true path of binariesSkip). */
export function requireBinaries(bins: string[]): void {
  const missing = bins.filter((b) => !which(b));
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(', ')} not installed but required` +
        (process.env.CI === 'true' ? ' in CI (CI=true): .ci/run installs it with apt-get' : '') +
        ` (apt-get install ${[...new Set(missing.map((b) => PACKAGE[b] ?? b))].join(' ')})`,
    );
  }
}

/** A spawned server program: the tail of its output and how it exited, kept for error messages; a bounded stop. */
export class WatchedChild {
  /** Set once the process exited: how. */
  exited: string | undefined;
  private tail = '';

  constructor(
    readonly proc: import('node:child_process').ChildProcess,
    name: string,
  ) {
    const keep = (d: Buffer): void => {
      this.tail = (this.tail + d.toString('utf8')).slice(-4000);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    proc.once('exit', (code, signal) => (this.exited = `${name} exited (code ${code}, signal ${signal})`));
  }

  get output(): string {
    return this.tail;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. */
  async stop(graceMs: number): Promise<void> {
    if (this.exited) return;
    const done = new Promise<void>((r) => this.proc.once('exit', () => r()));
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await done;
    clearTimeout(timer);
  }
}
