/**
 * A test delta-ADS client over real grpc-js. It behaves like a well-mannered
 * Envoy (node on the first request only, ACKs every response unless told
 * otherwise, tracks what it holds) and records everything it sees so tests can
 * assert exactly what a client received.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { DeltaAdsClient, openDeltaStream } from '../../src/proto/ads-service';
import {
  deltaRequestCodec,
  deltaResponseCodec,
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
  type Node,
  type Resource,
} from '../../src/proto/messages';
import { DEFAULT_TIMEOUT_MS, sleep, waitUntil } from './wait';

export interface DeltaClientOptions {
  nodeId?: string;
  clientFeatures?: string[];
  /** Extra node fields (merged over id/client_features). */
  node?: Node;
  /** ACK every accepted response automatically (default true). */
  autoAck?: boolean;
  /**
   * Decide to NACK a response: return an error message to reject it (it is
   * then not applied to `held`), undefined to accept it.
   */
  reject?: (resp: DeltaDiscoveryResponse) => string | undefined;
  /** TLS: channel credentials (default plaintext) and extra channel options (e.g. a target name override). */
  credentials?: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
}

export interface EndStatus {
  code: grpc.status;
  details: string;
}

export interface RemovedRecord {
  typeUrl: string;
  name: string;
  nonce: string;
}

export class DeltaClient {
  readonly events = new EventEmitter();
  /** Every response received, decoded, in arrival order. */
  readonly responses: DeltaDiscoveryResponse[] = [];
  /** Encoded size of every response, in arrival order. */
  readonly responseSizes: Array<{ typeUrl: string; bytes: number }> = [];
  /** Every request sent (decoded form; raw sends are recorded as `{}`). */
  readonly sent: DeltaDiscoveryRequest[] = [];
  /** Every name that arrived in removed_resources of an accepted response. */
  readonly removed: RemovedRecord[] = [];
  /** Protocol problems an Envoy would NACK or choke on (see XDSTP.md). */
  readonly violations: string[] = [];
  /** Nonces this client NACKed. */
  readonly nacked: string[] = [];
  /** Set once the call ended. */
  status: EndStatus | undefined;
  readonly ended: Promise<EndStatus>;

  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  private readonly heldMap = new Map<string, Map<string, string>>();
  private readonly lastResource = new Map<string, Map<string, Resource>>();
  private cursor = 0;
  private firstSent = false;
  private closed = false;
  private paused = false;
  private readonly autoAck: boolean;

  constructor(
    readonly target: string,
    private readonly opts: DeltaClientOptions = {},
  ) {
    this.events.setMaxListeners(0);
    this.autoAck = opts.autoAck ?? true;
    // A private subchannel pool: every DeltaClient is its own connection, like
    // separate Envoys (a shared HTTP/2 connection would couple flow control).
    this.client = new DeltaAdsClient(target, opts.credentials ?? grpc.credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
      ...opts.channelOptions,
    });
    this.call = openDeltaStream(this.client);
    let resolveEnded!: (s: EndStatus) => void;
    this.ended = new Promise((r) => (resolveEnded = r));
    this.call.on('data', (bytes: Buffer) => this.onData(bytes));
    this.call.on('error', () => {
      /* reported through 'status' */
    });
    this.call.on('status', (s: grpc.StatusObject) => {
      if (this.status) return;
      this.status = { code: s.code, details: s.details };
      resolveEnded(this.status);
      this.changed();
    });
  }

  // --------------------------------------------------------------- requests

  subscribe(typeUrl: string, names: string[], opts: { initialVersions?: Record<string, string> } = {}): void {
    const req: DeltaDiscoveryRequest = { type_url: typeUrl, resource_names_subscribe: names };
    if (opts.initialVersions) {
      req.initial_resource_versions = opts.initialVersions;
      // What a reconnecting client claims to hold, it holds.
      const held = this.heldOf(typeUrl);
      for (const [n, v] of Object.entries(opts.initialVersions)) if (!held.has(n)) held.set(n, v);
    }
    this.send(req);
  }

  unsubscribe(typeUrl: string, names: string[]): void {
    this.send({ type_url: typeUrl, resource_names_unsubscribe: names });
  }

  ack(typeUrl: string, nonce: string): void {
    this.send({ type_url: typeUrl, response_nonce: nonce });
  }

  nack(typeUrl: string, nonce: string, message: string): void {
    this.nacked.push(nonce);
    this.send({ type_url: typeUrl, response_nonce: nonce, error_detail: { code: 3, message } });
  }

  /** Send any request; the stream's first request gets `node` added. */
  send(req: DeltaDiscoveryRequest): void {
    if (!this.firstSent && req.node === undefined) {
      req = { node: this.node(), ...req };
    }
    this.firstSent = true;
    this.sent.push(req);
    this.write(deltaRequestCodec.encode(req));
  }

  /** Write arbitrary bytes as one gRPC message (to test undecodable input). */
  sendRaw(bytes: Buffer): void {
    this.firstSent = true;
    this.sent.push({});
    this.write(bytes);
  }

  private write(bytes: Buffer): void {
    if (this.closed || this.status) return;
    this.call.write(bytes);
  }

  private node(): Node {
    return {
      id: this.opts.nodeId ?? 'test-client',
      cluster: 'test',
      user_agent_name: 'xdstp-relay-tests',
      ...(this.opts.clientFeatures ? { client_features: this.opts.clientFeatures } : {}),
      ...(this.opts.node ?? {}),
    };
  }

  /** Resolve once the channel is connected (the stream's headers can then go out at once). */
  waitForReady(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(err) : resolve())),
    );
  }

  // -------------------------------------------------------------- responses

  private onData(bytes: Buffer): void {
    let resp: DeltaDiscoveryResponse;
    try {
      resp = deltaResponseCodec.decode(bytes);
    } catch (err) {
      this.violations.push(`undecodable response: ${(err as Error).message}`);
      this.changed();
      return;
    }
    this.responses.push(resp);
    this.responseSizes.push({ typeUrl: resp.type_url ?? '', bytes: bytes.length });
    this.check(resp);
    const typeUrl = resp.type_url ?? '';
    const nonce = resp.nonce ?? '';
    const rejection = this.opts.reject?.(resp);
    if (rejection !== undefined) {
      this.nack(typeUrl, nonce, rejection);
    } else {
      const held = this.heldOf(typeUrl);
      const last = this.lastOf(typeUrl);
      for (const r of resp.resources ?? []) {
        held.set(r.name ?? '', r.version ?? '');
        if (r.resource) last.set(r.name ?? '', r);
      }
      for (const n of resp.removed_resources ?? []) {
        held.delete(n);
        last.delete(n);
        this.removed.push({ typeUrl, name: n, nonce });
      }
      if (this.autoAck) this.ack(typeUrl, nonce);
    }
    this.changed();
  }

  /** Things Envoy would reject in a response. */
  private check(resp: DeltaDiscoveryResponse): void {
    const typeUrl = resp.type_url ?? '';
    const where = `response ${resp.nonce ?? '(no nonce)'}`;
    if (!typeUrl) this.violations.push(`${where}: no type_url`);
    if (!resp.nonce) this.violations.push(`${where}: no nonce`);
    const names = new Set<string>();
    for (const r of resp.resources ?? []) {
      const n = r.name ?? '';
      if (names.has(n)) this.violations.push(`${where}: duplicate resource ${n}`);
      names.add(n);
      if (r.resource && r.resource.type_url !== typeUrl) {
        this.violations.push(`${where}: ${n} has Any type ${r.resource.type_url}, response type ${typeUrl}`);
      }
    }
    for (const n of resp.removed_resources ?? []) {
      if (names.has(n)) this.violations.push(`${where}: ${n} both added and removed`);
    }
  }

  /** What the client holds of a type: name → version, after applying accepted responses. */
  /** Drops names from what the client holds, as Envoy does with what it unsubscribes (the server does not confirm it). */
  forget(typeUrl: string, names: Iterable<string>): void {
    const held = this.heldOf(typeUrl);
    for (const n of names) held.delete(n);
  }

  held(typeUrl: string): Map<string, string> {
    return new Map(this.heldOf(typeUrl));
  }

  /** The last accepted full Resource (with payload) of a name. */
  resource(typeUrl: string, name: string): Resource | undefined {
    return this.lastOf(typeUrl).get(name);
  }

  /** Every Resource entry ever received for a name (accepted or not), in order. */
  received(typeUrl: string, name?: string): Resource[] {
    const out: Resource[] = [];
    for (const resp of this.responses) {
      if (resp.type_url !== typeUrl) continue;
      for (const r of resp.resources ?? []) if (name === undefined || r.name === name) out.push(r);
    }
    return out;
  }

  /** Every name received in removed_resources of a type. */
  removedNames(typeUrl: string): string[] {
    const out: string[] = [];
    for (const resp of this.responses) {
      if (resp.type_url !== typeUrl) continue;
      out.push(...(resp.removed_resources ?? []));
    }
    return out;
  }

  /** The next response not yet returned by nextResponse. */
  async nextResponse(opts: { timeoutMs?: number } = {}): Promise<DeltaDiscoveryResponse> {
    await this.waitFor(() => this.responses.length > this.cursor, 'a response', opts.timeoutMs);
    return this.responses[this.cursor++]!;
  }

  /** Wait until `predicate()` is truthy; fails early if the stream ends first. */
  waitFor<T>(predicate: () => T | undefined | false | null, what = 'client condition', timeoutMs = DEFAULT_TIMEOUT_MS): Promise<T> {
    return waitUntil(this.events, predicate, {
      timeoutMs,
      what: `[client ${this.opts.nodeId ?? ''}] ${what}`,
      explain: () => this.describe(),
      abort: () => (this.status ? `stream ended: ${this.status.code} ${this.status.details}` : undefined),
    });
  }

  waitForVersion(typeUrl: string, name: string, version: string, timeoutMs?: number): Promise<true> {
    return this.waitFor(() => this.heldOf(typeUrl).get(name) === version, `${name}@${version}`, timeoutMs);
  }

  waitForRemoved(typeUrl: string, name: string, timeoutMs?: number): Promise<true> {
    return this.waitFor(
      () => this.removed.some((r) => r.typeUrl === typeUrl && r.name === name),
      `removal of ${name}`,
      timeoutMs,
    );
  }

  /** Wait for the call to end and return its status. */
  async waitForEnd(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<EndStatus> {
    await waitUntil(this.events, () => this.status !== undefined, {
      timeoutMs,
      what: `[client ${this.opts.nodeId ?? ''}] stream end`,
      explain: () => this.describe(),
    });
    return this.status!;
  }

  /** Assert that nothing arrives within `ms` (short absence windows only). */
  async expectNoResponse(ms = 300): Promise<void> {
    const before = this.responses.length;
    await sleep(ms);
    if (this.responses.length > before) {
      throw new Error(
        `[client ${this.opts.nodeId ?? ''}] expected no response, got:\n` +
          this.responses.slice(before).map(fmtResponse).join('\n'),
      );
    }
  }

  /** Stop reading from the stream (HTTP/2 flow control then pushes back on the server). */
  pause(): void {
    this.paused = true;
    this.call.pause();
  }

  resume(): void {
    this.paused = false;
    this.call.resume();
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Half-close the request side (the server may still answer). */
  end(): void {
    if (!this.closed) this.call.end();
  }

  /** Cancel the call and close the channel (a client going away). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.call.cancel();
    } catch {
      /* ignore */
    }
    this.client.close();
  }

  describe(): string {
    const lines = [
      `[client ${this.opts.nodeId ?? ''}] ${this.responses.length} responses` +
        (this.status ? `, ended ${this.status.code} ${this.status.details}` : ''),
    ];
    for (const r of this.responses.slice(-20)) lines.push('  ' + fmtResponse(r));
    if (this.violations.length) lines.push(`  violations: ${this.violations.join('; ')}`);
    return lines.join('\n');
  }

  private heldOf(typeUrl: string): Map<string, string> {
    let m = this.heldMap.get(typeUrl);
    if (!m) this.heldMap.set(typeUrl, (m = new Map()));
    return m;
  }

  private lastOf(typeUrl: string): Map<string, Resource> {
    let m = this.lastResource.get(typeUrl);
    if (!m) this.lastResource.set(typeUrl, (m = new Map()));
    return m;
  }

  private changed(): void {
    this.events.emit('change');
  }
}

export function fmtResponse(r: DeltaDiscoveryResponse): string {
  const parts = [`${r.nonce ?? ''}`, (r.type_url ?? '').split('.').pop() ?? ''];
  for (const x of r.resources ?? []) {
    parts.push(`+${x.name}@${x.version}${x.resource ? '' : '(hb)'}${x.ttl ? `(ttl ${x.ttl.seconds}s)` : ''}`);
  }
  for (const n of r.removed_resources ?? []) parts.push(`-${n}`);
  return parts.join(' ');
}
