/**
 * A real `@grpc/grpc-js-xds` client in a child process, driven from a test.
 *
 *   const client = await GrpcXdsClient.start(legacyBootstrap(relay.address));
 *   await client.callUntil('xds:///my-service', 'A');   // an RPC answered by backend A
 *   const held = await client.csds();                   // what the client holds, from its own CSDS
 *   await client.stop();
 *
 * The bootstrap goes to the child in env GRPC_XDS_BOOTSTRAP_CONFIG. The child
 * (test/support/grpc-xds-child.ts) makes the RPCs and serves the client's
 * CSDS (gRFC A40) on 127.0.0.1; this side queries that CSDS service over real
 * gRPC and decodes the answer with the Envoy protos. Every child is killed on
 * stop() and, as a backstop, exits by itself when its stdin closes or its
 * lifetime runs out.
 *
 * grpc-js-xds speaks only state-of-the-world ADS (StreamAggregatedResources);
 * nothing in the bootstrap selects it. Its timers are fixed in the library:
 * the does-not-exist timer is 15 s and cannot be shortened.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { envoyTypes } from '../../src/typed-json/envoy-types';
import type { ChildEvent, ChildReply, ChildRequest } from './grpc-xds-child';
import { sleep, waitUntil } from './wait';

/** dist/test/support/grpc-xds-client.js → dist/test/support/grpc-xds-child.js */
export const CHILD_PATH = path.join(__dirname, 'grpc-xds-child.js');

export const CSDS_FETCH_PATH = '/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus';
const CLIENT_STATUS_RESPONSE = 'type.googleapis.com/envoy.service.status.v3.ClientStatusResponse';

// ------------------------------------------------------------------ bootstrap

export interface XdsServerEntry {
  server_uri: string;
  channel_creds: Array<{ type: string }>;
  server_features: string[];
}

/** The JSON gRPC reads from GRPC_XDS_BOOTSTRAP_CONFIG (the fields these tests use). */
export interface GrpcBootstrap {
  xds_servers: XdsServerEntry[];
  node: { id: string; cluster?: string; locality: Record<string, string> };
  authorities?: Record<string, { xds_servers?: XdsServerEntry[]; client_listener_resource_name_template?: string }>;
  client_default_listener_resource_name_template?: string;
}

export interface BootstrapOptions {
  /** node.id (default `grpc-xds-test`). */
  nodeId?: string;
  /**
   * server_features of the relay's entry. grpc-js-xds knows only
   * `ignore_resource_deletion`; none is needed for ADS, which is the only
   * protocol gRPC speaks. Default none.
   */
  serverFeatures?: string[];
}

function serverEntry(address: string, opts: BootstrapOptions): XdsServerEntry {
  return { server_uri: address, channel_creds: [{ type: 'insecure' }], server_features: [...(opts.serverFeatures ?? [])] };
}

function node(opts: BootstrapOptions): GrpcBootstrap['node'] {
  // grpc-js-xds rejects a bootstrap whose node has no `locality` object.
  return { id: opts.nodeId ?? 'grpc-xds-test', cluster: 'grpc-xds-tests', locality: {} };
}

/** Legacy form: the relay (`HOST:PORT`) is the xDS server; `xds:///my-service` asks for Listener `my-service`. */
export function legacyBootstrap(relayAddress: string, opts: BootstrapOptions = {}): GrpcBootstrap {
  return { xds_servers: [serverEntry(relayAddress, opts)], node: node(opts) };
}

/**
 * Federation form (gRFC A47): an `authorities` entry whose server is the
 * relay, and a default listener template under that authority, so
 * `xds:///my-service` asks for `xdstp://AUTHORITY/envoy.config.listener.v3.Listener/my-service`
 * (and `xds://AUTHORITY/my-service` for the same name through the authority's
 * own template). Every xdstp name the chain refers to must be under an
 * authority listed here; top-level xds_servers is still required by the format.
 */
export function federationBootstrap(relayAddress: string, authority: string, opts: BootstrapOptions = {}): GrpcBootstrap {
  const template = `xdstp://${authority}/envoy.config.listener.v3.Listener/%s`;
  return {
    xds_servers: [serverEntry(relayAddress, opts)],
    node: node(opts),
    authorities: {
      [authority]: { xds_servers: [serverEntry(relayAddress, opts)], client_listener_resource_name_template: template },
    },
    client_default_listener_resource_name_template: template,
  };
}

// ----------------------------------------------------------------------- CSDS

/** One resource as the client's CSDS reports it. */
export interface CsdsResource {
  /** Full type URL (`type.googleapis.com/…`); grpc-js-xds itself reports it without the prefix. */
  typeUrl: string;
  name: string;
  /** `version_info` of the response that last changed the resource ('' when never received). */
  version: string;
  /** REQUESTED, ACKED, NACKED, DOES_NOT_EXIST, … */
  status: string;
  /** For NACKED: why, and the rejected version. */
  error?: { details: string; version: string };
  /** The accepted resource as Envoy typed JSON (ACKED only). */
  config?: Record<string, unknown>;
}

type Json = Record<string, unknown>;

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function fullTypeUrl(t: string): string {
  return t.includes('/') ? t : `type.googleapis.com/${t}`;
}

/** ClientStatusResponse JSON → one entry per resource (every ClientConfig's generic_xds_configs). */
export function csdsResources(response: Json): CsdsResource[] {
  const out: CsdsResource[] = [];
  for (const config of (response.config as Json[] | undefined) ?? []) {
    for (const g of (config.generic_xds_configs as Json[] | undefined) ?? []) {
      const r: CsdsResource = {
        typeUrl: fullTypeUrl(str(g.type_url)),
        name: str(g.name),
        version: str(g.version_info),
        status: str(g.client_status) || 'UNKNOWN',
      };
      const err = g.error_state as Json | undefined;
      if (err) r.error = { details: str(err.details), version: str(err.version_info) };
      if (g.xds_config && typeof g.xds_config === 'object') r.config = g.xds_config as Json;
      out.push(r);
    }
  }
  return out;
}

export function fmtCsds(resources: readonly CsdsResource[]): string {
  if (resources.length === 0) return '  (no resources)';
  return resources
    .map((r) => `  ${r.typeUrl.split('.').pop()} ${r.name} v=${JSON.stringify(r.version)} ${r.status}${r.error ? ` (${r.error.details})` : ''}`)
    .join('\n');
}

// ---------------------------------------------------------------------- calls

export type CallResult = { ok: true; backend: string } | { ok: false; code: number; details: string };

export interface CallOptions {
  /** Deadline of the RPC (default 2000 ms). */
  timeoutMs?: number;
  /** Queue the RPC through transient failures instead of failing fast (default false). */
  waitForReady?: boolean;
}

export interface GrpcXdsClientOptions {
  /** Shown in failure messages. */
  label?: string;
  /** Extra environment for the child (e.g. GRPC_TRACE=xds_client,xds_resolver to see more in `stderr`). */
  env?: Record<string, string>;
  /** The child exits by itself after this long (default 120 s). */
  lifetimeMs?: number;
  /** How long the child may take to come up (default 10 s). */
  startTimeoutMs?: number;
}

const STDERR_LINES_KEPT = 500;

export class GrpcXdsClient {
  readonly events = new EventEmitter();
  /** The child's stderr (grpc-js logs and the xds_client trace), last lines. */
  readonly stderr: string[] = [];
  /** Every "ADS stream ended. code=… details=…" the client traced, in order. */
  readonly adsStreamEnds: string[] = [];
  exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  private readonly replies = new Map<number, (r: ChildReply) => void>();
  private nextId = 1;
  private csdsClient: grpc.Client | undefined;
  private csdsPort = 0;
  private fatal: string | undefined;
  /** The CSDS port from the child's ready line. */
  private readyEvent: number | undefined;

  private constructor(
    private readonly proc: ChildProcess,
    readonly bootstrap: GrpcBootstrap,
    readonly label: string,
  ) {
    this.events.setMaxListeners(0);
  }

  /** Spawn the child with `bootstrap` and wait until its CSDS server is up. */
  static async start(bootstrap: GrpcBootstrap, opts: GrpcXdsClientOptions = {}): Promise<GrpcXdsClient> {
    const env: NodeJS.ProcessEnv = { ...process.env };
    // A bootstrap file named by GRPC_XDS_BOOTSTRAP would win over the _CONFIG variable.
    delete env.GRPC_XDS_BOOTSTRAP;
    const proc = spawn(process.execPath, [CHILD_PATH], {
      env: {
        ...env,
        // The xds_client trace says why the ADS stream ended; describe() shows those lines on failure.
        GRPC_TRACE: 'xds_client',
        GRPC_VERBOSITY: 'DEBUG',
        // Federation (xdstp names, `authorities`) is on by default in grpc-js-xds 1.14, behind this switch in older releases.
        GRPC_EXPERIMENTAL_XDS_FEDERATION: 'true',
        GRPC_XDS_BOOTSTRAP_CONFIG: JSON.stringify(bootstrap),
        GRPC_XDS_CHILD_LIFETIME_MS: String(opts.lifetimeMs ?? 120_000),
        ...(opts.env ?? {}),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const client = new GrpcXdsClient(proc, bootstrap, opts.label ?? bootstrap.node.id);
    client.listen();
    try {
      const ready = await waitUntil(client.events, () => client.readyEvent, {
        timeoutMs: opts.startTimeoutMs ?? 10_000,
        what: `[${client.label}] grpc-xds child ready`,
        explain: () => client.describe(),
        abort: () => client.gone(),
      });
      client.csdsPort = ready;
      client.csdsClient = new grpc.Client(`127.0.0.1:${ready}`, grpc.credentials.createInsecure());
      return client;
    } catch (err) {
      await client.stop();
      throw err;
    }
  }

  /** Why the child can no longer answer, or undefined while it can. */
  private gone(): string | undefined {
    if (this.fatal) return `child failed: ${this.fatal}`;
    if (this.exited) return `child exited (${this.exited.code ?? this.exited.signal})`;
    return undefined;
  }

  private listen(): void {
    let out = '';
    this.proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      let nl: number;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        this.onLine(line);
      }
    });
    let err = '';
    this.proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
      const lines = err.split('\n');
      err = lines.pop() ?? '';
      this.stderr.push(...lines);
      for (const l of lines) {
        const m = /ADS stream ended\. (.*)$/.exec(l);
        if (m) this.adsStreamEnds.push(m[1]!);
      }
      if (this.stderr.length > STDERR_LINES_KEPT) this.stderr.splice(0, this.stderr.length - STDERR_LINES_KEPT);
    });
    // A write after the child died must not crash the test process.
    this.proc.stdin!.on('error', () => undefined);
    this.proc.on('exit', (code, signal) => {
      this.exited = { code, signal };
      const why = this.gone()!;
      for (const [id, resolve] of this.replies) resolve({ id, ok: false, code: grpc.status.UNAVAILABLE, details: why });
      this.replies.clear();
      this.events.emit('change');
    });
  }

  private onLine(line: string): void {
    if (line.trim() === '') return;
    let msg: ChildReply | ChildEvent;
    try {
      msg = JSON.parse(line) as ChildReply | ChildEvent;
    } catch {
      this.stderr.push(`(stdout) ${line}`);
      return;
    }
    if ('event' in msg) {
      if (msg.event === 'ready') this.readyEvent = msg.csdsPort;
      else this.fatal = msg.message;
    } else {
      const resolve = this.replies.get(msg.id);
      this.replies.delete(msg.id);
      resolve?.(msg);
    }
    this.events.emit('change');
  }

  private command(cmd: ChildRequest, replyTimeoutMs: number): Promise<ChildReply> {
    const gone = this.gone();
    if (gone) return Promise.resolve({ id: 0, ok: false, code: grpc.status.UNAVAILABLE, details: gone });
    const id = this.nextId++;
    return new Promise<ChildReply>((resolve) => {
      const timer = setTimeout(() => {
        this.replies.delete(id);
        resolve({ id, ok: false, code: grpc.status.DEADLINE_EXCEEDED, details: `child did not answer ${cmd.op} within ${replyTimeoutMs} ms` });
      }, replyTimeoutMs);
      this.replies.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      this.proc.stdin!.write(JSON.stringify({ ...cmd, id }) + '\n');
    });
  }

  // --------------------------------------------------------------------- API

  /** One unary RPC to `target` (`xds:///my-service`, `xds://AUTHORITY/my-service`): which backend answered, or the error. */
  async call(target: string, opts: CallOptions = {}): Promise<CallResult> {
    const timeoutMs = opts.timeoutMs ?? 2000;
    const r = await this.command({ op: 'call', target, timeoutMs, waitForReady: opts.waitForReady ?? false }, timeoutMs + 2000);
    return r.ok ? { ok: true, backend: r.backend ?? '' } : { ok: false, code: r.code, details: r.details };
  }

  /**
   * Repeat RPCs (each with a short deadline) until one is answered by
   * `backend`; returns every result seen. Fails with those results when
   * `timeoutMs` runs out.
   */
  async callUntil(target: string, backend: string, timeoutMs = 10_000): Promise<CallResult[]> {
    const deadline = Date.now() + timeoutMs;
    const seen: CallResult[] = [];
    for (;;) {
      const left = deadline - Date.now();
      const r = await this.call(target, { timeoutMs: Math.max(100, Math.min(1000, left)) });
      seen.push(r);
      if (r.ok && r.backend === backend) return seen;
      const gone = this.gone();
      if (gone || Date.now() >= deadline) {
        throw new Error(
          `[${this.label}] no RPC to ${target} reached backend ${backend} within ${timeoutMs} ms` +
            (gone ? ` (${gone})` : '') +
            `; last results:\n${summarize(seen)}\n${this.describe()}`,
        );
      }
      if (!r.ok) await sleep(50);
    }
  }

  /** Close the channel of `target` (grpc-js-xds then cancels its watches). */
  async closeChannel(target: string): Promise<void> {
    const r = await this.command({ op: 'close', target }, 2000);
    if (!r.ok) throw new Error(`[${this.label}] closing ${target}: ${r.details}`);
  }

  /** What the client holds right now, from its own CSDS service. */
  async csds(timeoutMs = 2000): Promise<CsdsResource[]> {
    const client = this.csdsClient;
    if (!client) throw new Error(`[${this.label}] child not started`);
    const bytes = await new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(
        CSDS_FETCH_PATH,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(0), // an empty ClientStatusRequest
        new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err: grpc.ServiceError | null, value?: Buffer) => (err ? reject(new Error(`[${this.label}] CSDS: ${err.message}`)) : resolve(value!)),
      ),
    );
    return csdsResources(envoyTypes().decodeAny(CLIENT_STATUS_RESPONSE, bytes));
  }

  /** Poll CSDS until `predicate` holds; fails with the last answer. */
  async csdsUntil(predicate: (resources: CsdsResource[]) => boolean, what: string, timeoutMs = 10_000): Promise<CsdsResource[]> {
    const deadline = Date.now() + timeoutMs;
    let last: CsdsResource[] = [];
    for (;;) {
      last = await this.csds();
      if (predicate(last)) return last;
      const gone = this.gone();
      if (gone || Date.now() >= deadline) {
        throw new Error(`[${this.label}] CSDS never showed ${what} within ${timeoutMs} ms${gone ? ` (${gone})` : ''}; last:\n${fmtCsds(last)}`);
      }
      await sleep(50);
    }
  }

  /** The CSDS entry of one resource (after a fresh query), or undefined. */
  async csdsEntry(typeUrl: string, name: string): Promise<CsdsResource | undefined> {
    return (await this.csds()).find((r) => r.typeUrl === typeUrl && r.name === name);
  }

  get csdsAddress(): string {
    return `127.0.0.1:${this.csdsPort}`;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  describe(): string {
    // Trace lines start with "D "; anything else is a warning or error worth showing.
    const other = this.stderr.filter((l) => !l.startsWith('D ')).slice(-10);
    const ends = this.adsStreamEnds.slice(-3);
    return (
      `[${this.label}] child pid ${this.proc.pid ?? '?'}${this.exited ? `, exited ${this.exited.code ?? this.exited.signal}` : ''}` +
      (this.fatal ? `, failed: ${this.fatal}` : '') +
      (ends.length ? `\n  ADS stream ended (${this.adsStreamEnds.length}×), last:\n${ends.map((l) => `    ${l}`).join('\n')}` : '') +
      (other.length ? `\n  stderr:\n${other.map((l) => `    ${l}`).join('\n')}` : '')
    );
  }

  /** Kill the child (SIGTERM, then SIGKILL) and wait for it to exit. */
  async stop(): Promise<void> {
    this.csdsClient?.close();
    this.csdsClient = undefined;
    if (this.exited) return;
    this.proc.stdin?.end();
    this.proc.kill('SIGTERM');
    try {
      await waitUntil(this.events, () => this.exited !== undefined, { timeoutMs: 2000, what: 'grpc-xds child exit' });
    } catch {
      this.proc.kill('SIGKILL');
      await waitUntil(this.events, () => this.exited !== undefined, { timeoutMs: 2000, what: 'grpc-xds child exit after SIGKILL' }).catch(() => undefined);
    }
  }
}

function summarize(results: readonly CallResult[]): string {
  const counts = new Map<string, number>();
  for (const r of results) {
    const k = r.ok ? `backend ${r.backend}` : `error ${r.code} ${r.details}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `  ${n} × ${k}`).join('\n');
}

/** True when CSDS shows every one of `expected` ACKED. */
export function allAcked(resources: readonly CsdsResource[], expected: ReadonlyArray<{ typeUrl: string; name: string }>): boolean {
  return expected.every(({ typeUrl, name }) => resources.some((r) => r.typeUrl === typeUrl && r.name === name && r.status === 'ACKED'));
}
