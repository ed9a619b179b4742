/**
 * Spawn the real CLI (`node dist/src/cli.js`) and talk to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { EventEmitter } from 'node:events';
import { waitUntil } from './wait';

/** dist/test/support/cli.js → dist/src/cli.js */
export const CLI_PATH = path.resolve(__dirname, '..', '..', 'src', 'cli.js');

export interface LogLine {
  msg?: string;
  level?: number | string;
  [k: string]: unknown;
}

export interface SpawnedCli {
  proc: ChildProcess;
  port: number;
  adminPort: number | null;
  /** Parsed JSON log lines (stdout and stderr). */
  logs: LogLine[];
  /** Raw output lines that were not JSON. */
  text: string[];
  stop(): Promise<void>;
}

/** Environment without any XDSTP_RELAY_* leaking in from the caller. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('XDSTP_RELAY_')) env[k] = v;
  return { ...env, ...extra };
}

function collect(proc: ChildProcess, events: EventEmitter, logs: LogLine[], text: string[]): void {
  for (const stream of [proc.stdout, proc.stderr]) {
    let buf = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() === '') continue;
        try {
          const parsed = JSON.parse(line) as unknown;
          if (parsed && typeof parsed === 'object') logs.push(parsed as LogLine);
          else text.push(line);
        } catch {
          text.push(line);
        }
        events.emit('change');
      }
    });
    stream?.on('end', () => {
      if (buf.trim() !== '') text.push(buf);
      buf = '';
      events.emit('change');
    });
  }
}

/**
 * The admin server defaults to a fixed port (0.0.0.0:9901); unless a test sets
 * it, bind it to a free loopback port so parallel runs cannot collide.
 */
function withAdminDefault(args: string[], env: Record<string, string>): string[] {
  // `status` starts no relay and has no --admin option.
  if (args[0] === 'status') return args;
  if (args.some((a) => a === '--admin' || a.startsWith('--admin=')) || env.XDSTP_RELAY_ADMIN !== undefined) return args;
  return [...args, '--admin', '127.0.0.1:0'];
}

/** Spawn the CLI and wait for its "relay listening" line; kill with stop(). */
export async function spawnCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 5000,
  /** `exact`: run with exactly these args (the admin address comes from a config file the test wrote). */
  opts: { exact?: boolean } = {},
): Promise<SpawnedCli> {
  const proc = spawn(process.execPath, [CLI_PATH, ...(opts.exact ? args : withAdminDefault(args, env))], {
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events = new EventEmitter();
  const logs: LogLine[] = [];
  const text: string[] = [];
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  proc.on('exit', (code, signal) => {
    exited = { code, signal };
    events.emit('change');
  });
  collect(proc, events, logs, text);
  const stop = async (): Promise<void> => {
    if (exited) return;
    proc.kill('SIGTERM');
    try {
      await waitUntil(events, () => exited !== undefined, { timeoutMs: 3000, what: 'CLI exit after SIGTERM' });
    } catch {
      proc.kill('SIGKILL');
    }
  };
  try {
    const line = await waitUntil(events, () => logs.find((l) => l.msg === 'relay listening'), {
      timeoutMs,
      what: '"relay listening" log line',
      explain: () =>
        [...logs.map((l) => JSON.stringify(l)), ...text].join('\n') +
        (exited ? `\nexited: ${JSON.stringify(exited)}` : ''),
      abort: () => (exited ? `CLI exited with ${exited.code ?? exited.signal}` : undefined),
    });
    const port = Number(line.port);
    const adminPort = line.adminPort === null || line.adminPort === undefined ? null : Number(line.adminPort);
    return { proc, port, adminPort, logs, text, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Run the CLI expecting it to exit by itself (killed after `timeoutMs`). */
export function runCliToExit(args: string[], env: Record<string, string> = {}, timeoutMs = 5000): Promise<CliExit> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [CLI_PATH, ...withAdminDefault(args, env)], {
      env: cleanEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`CLI did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
