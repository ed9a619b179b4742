/**
 * Helpers for file-backed origins: temp directories, file writes, a relay on
 * a directory, and a logger whose lines a test can wait for.
 */
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import type { RelayConfigInput } from '../../src/config';
import { startRelay, type RunningRelay } from '../../src/relay';
import { DeltaClient, type DeltaClientOptions } from './delta-client';
import { waitUntil, withTimeout } from './wait';

export function tempDir(prefix = 'xdstp-files-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Writes in place, like an editor that truncates and rewrites. */
export function writeFile(dir: string, rel: string, text: string): void {
  const full = path.join(dir, rel);
  fs.mkdirSync(path.dirname(full), { recursive: true });
  fs.writeFileSync(full, text);
}

/** Writes a hidden temp file and renames it over the target (what tools like kubectl / git do). */
export function writeAtomic(dir: string, rel: string, text: string): void {
  const full = path.join(dir, rel);
  fs.mkdirSync(path.dirname(full), { recursive: true });
  const tmp = path.join(path.dirname(full), `.${path.basename(full)}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, full);
}

export function removeFile(dir: string, rel: string): void {
  fs.rmSync(path.join(dir, rel), { force: true });
}

export interface LogRecord {
  level: number;
  msg?: string;
  [k: string]: unknown;
}

/** A pino logger that keeps every line, so tests can wait for one. */
export class CapturedLog {
  readonly lines: LogRecord[] = [];
  readonly events = new EventEmitter();
  readonly logger: pino.Logger;

  constructor(level = 'info') {
    this.events.setMaxListeners(0);
    const echo = process.env.RELAY_TEST_LOGS !== undefined;
    this.logger = pino(
      { level, base: null },
      {
        write: (line: string) => {
          if (echo) process.stderr.write(line);
          try {
            this.lines.push(JSON.parse(line) as LogRecord);
          } catch {
            return;
          }
          this.events.emit('change');
        },
      },
    );
  }

  find(pred: (l: LogRecord) => boolean): LogRecord | undefined {
    return this.lines.find(pred);
  }

  /** The first line (from index `from` on) matching `pred`. */
  waitFor(pred: (l: LogRecord) => boolean, what: string, from = 0, timeoutMs = 5000): Promise<LogRecord> {
    return waitUntil(this.events, () => this.lines.slice(from).find(pred), {
      timeoutMs,
      what: `log line: ${what}`,
      explain: () => this.lines.map((l) => JSON.stringify(l)).join('\n'),
    });
  }
}

export interface FileRelay {
  relay: RunningRelay;
  address: string;
  log: CapturedLog;
  client(opts?: DeltaClientOptions): DeltaClient;
}

/** A relay whose authorities are served from directories (`{a: '/tmp/x'}`), torn down afterwards. */
export async function withFileRelay(
  authorities: Record<string, string>,
  body: (env: FileRelay) => Promise<void>,
  opts: { defaultUpstreamDir?: string; grace?: number } = {},
): Promise<void> {
  const log = new CapturedLog();
  const clients: DeltaClient[] = [];
  const config: RelayConfigInput = {
    listen: '127.0.0.1:0',
    admin: null,
    authorities: Object.entries(authorities).map(([name, dir]) => ({ name, uris: [`file://${dir}`] })),
    defaultUpstream: opts.defaultUpstreamDir ? [`file://${opts.defaultUpstreamDir}`] : null,
    unsubscribeGraceMs: opts.grace ?? 0,
    nodeId: 'file-relay-test',
    logLevel: 'info',
  };
  const relay = await withTimeout(startRelay(config, { logger: log.logger }), 10_000, 'startRelay');
  const address = `127.0.0.1:${relay.port}`;
  let n = 0;
  try {
    await body({
      relay,
      address,
      log,
      client(clientOpts: DeltaClientOptions = {}): DeltaClient {
        const c = new DeltaClient(address, { nodeId: `file-client-${++n}`, ...clientOpts });
        clients.push(c);
        return c;
      },
    });
  } finally {
    for (const c of clients) c.close();
    await withTimeout(relay.stop(), 5000, 'relay.stop()').catch(() => undefined);
  }
}

/** A resource entry in the file format (typed JSON payload). */
export function entry(name: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, ...extra, resource: payload };
}

/** A small valid Listener payload. */
export function listener(name: string, port: number): Record<string, unknown> {
  return {
    '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener',
    name,
    address: { socket_address: { address: '0.0.0.0', port_value: port } },
  };
}

/** A small valid Cluster payload. */
export function cluster(name: string, connectTimeout = '1s'): Record<string, unknown> {
  return {
    '@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
    name,
    type: 'EDS',
    connect_timeout: connectTimeout,
    eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' } },
  };
}

/** `{resources: [...]}` as JSON text (valid YAML too). */
export function resourcesFile(...entries: Array<Record<string, unknown>>): string {
  return JSON.stringify({ resources: entries }, null, 2);
}
