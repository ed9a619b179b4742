/**
 * Talking to a relay's admin HTTP server from tests: GET/POST helpers, a
 * Prometheus text-format reader, and `withAdminRelay`, which starts origins
 * and an in-process relay with its admin server (and any config override).
 */
import type { RelayConfigInput } from '../../src/config';
import type { Logger } from '../../src/log';
import { startRelay, type RelayOptions, type RunningRelay } from '../../src/relay';
import { DeltaClient, type DeltaClientOptions } from './delta-client';
import { TestOrigin } from './origin';
import { sleep, withTimeout } from './wait';

export interface HttpReply {
  status: number;
  contentType: string;
  text: string;
  /** Parsed JSON body (undefined when the body is not JSON). */
  json: unknown;
}

export async function http(port: number, method: 'GET' | 'POST', path: string): Promise<HttpReply> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text, json };
}

/** One sample of the Prometheus text format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition (the subset prom-client writes). */
export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let lm: RegExpExecArray | null;
      while ((lm = re.exec(m[3])) !== null) labels[lm[1]] = lm[2].replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    const v = m[4];
    out.push({ name: m[1], labels, value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v) });
  }
  return out;
}

/** Sum of the samples of `name` whose labels include `labels` (0 when none). */
export function metricValue(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/**
 * Re-evaluates `check` until it returns a truthy value. For state that is only
 * observable over HTTP (no event to wait on); bounded, never a timing assertion.
 */
export async function pollUntil<T>(
  check: () => Promise<T | undefined | false | null>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await sleep(20);
  }
}

export interface AdminRelayOptions {
  authorities?: string[];
  config?: Partial<RelayConfigInput>;
  options?: RelayOptions;
}

export interface AdminRelayEnv {
  origin: TestOrigin;
  origins: Record<string, TestOrigin>;
  relay: RunningRelay;
  adminPort: number;
  address: string;
  client(opts?: DeltaClientOptions): DeltaClient;
  get(path: string): Promise<HttpReply>;
  post(path: string): Promise<HttpReply>;
  /** GET /metrics, parsed. */
  scrape(): Promise<Sample[]>;
  logger: Logger;
}

export async function withAdminRelay(opts: AdminRelayOptions, body: (env: AdminRelayEnv) => Promise<void>): Promise<void> {
  const origins: Record<string, TestOrigin> = {};
  const clients: DeltaClient[] = [];
  let relay: RunningRelay | undefined;
  try {
    for (const name of opts.authorities ?? ['a']) origins[name] = await TestOrigin.start({ label: `origin-${name}` });
    const config: RelayConfigInput = {
      listen: '127.0.0.1:0',
      admin: '127.0.0.1:0',
      authorities: Object.entries(origins).map(([name, o]) => ({ name, uris: [o.uri] })),
      defaultUpstream: null,
      unsubscribeGraceMs: 0,
      nodeId: 'relay-admin-test',
      logLevel: 'silent',
      ...opts.config,
    };
    relay = await withTimeout(startRelay(config, opts.options), 5000, 'startRelay');
    const adminPort = relay.adminPort;
    if (adminPort === null) throw new Error('admin server not started');
    const address = `127.0.0.1:${relay.port}`;
    let n = 0;
    const env: AdminRelayEnv = {
      origin: Object.values(origins)[0]!,
      origins,
      relay,
      adminPort,
      address,
      logger: relay.logger,
      client(clientOpts: DeltaClientOptions = {}): DeltaClient {
        const c = new DeltaClient(address, { nodeId: `client-${++n}`, ...clientOpts });
        clients.push(c);
        return c;
      },
      get: (path) => http(adminPort, 'GET', path),
      post: (path) => http(adminPort, 'POST', path),
      scrape: async () => parsePrometheus((await http(adminPort, 'GET', '/metrics')).text),
    };
    await body(env);
  } finally {
    for (const c of clients) c.close();
    if (relay) {
      await withTimeout(relay.stop(), 10_000, 'relay.stop()').catch((err: unknown) => {
        process.stderr.write(`warning: ${(err as Error).message}\n`);
      });
    }
    for (const o of Object.values(origins)) await o.stop();
  }
}
