/**
 * A real headless Chromium (Debian's `chromium`) loading a page: the DOM it
 * built, or a screenshot. Spawned asynchronously, so a relay running in this
 * process keeps answering while the browser loads from it. Missing outside CI:
 * the tests skip loudly (binaries.ts); under CI=true they fail.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { binariesSkip, requireBinaries, which } from './binaries';

export function chromiumSkip(what: string): string | false {
  return binariesSkip(['chromium'], what);
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function runChromium(args: string[], timeoutMs = 60_000): Promise<Run> {
  requireBinaries(['chromium']);
  // A profile of its own: runs never share state (or a lock) with each other or a desktop browser.
  const profile = mkdtempSync(path.join(os.tmpdir(), 'xdstp-chromium-'));
  try {
    return await new Promise<Run>((resolve, reject) => {
      const proc = spawn(
        which('chromium')!,
        [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-dev-shm-usage',
          '--no-first-run',
          '--no-default-browser-check',
          '--disable-extensions',
          '--hide-scrollbars',
          `--user-data-dir=${profile}`,
          ...args,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
      proc.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-8000)));
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`chromium ${args.join(' ')}: no exit within ${timeoutMs} ms\n${stderr}`));
      }, timeoutMs);
      proc.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** The DOM Chromium built from `url`, serialized (`--dump-dom`). */
export async function dumpDom(url: string): Promise<string> {
  const r = await runChromium(['--dump-dom', url]);
  if (r.code !== 0 || r.stdout.trim() === '') throw new Error(`chromium --dump-dom ${url}: exit ${r.code}\n${r.stderr}`);
  return r.stdout;
}

/** Saves a PNG of `url` as rendered in a `width`×`height` window. */
export async function screenshot(url: string, file: string, width = 1280, height = 1400): Promise<void> {
  const r = await runChromium([`--screenshot=${file}`, `--window-size=${width},${height}`, url]);
  if (r.code !== 0) throw new Error(`chromium --screenshot ${url}: exit ${r.code}\n${r.stderr}`);
}
