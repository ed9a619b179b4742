/**
 * A test-only state-of-the-world ADS server (StreamAggregatedResources over
 * real grpc-js on 127.0.0.1). It exists to check the real-client harness
 * without the relay: the relay's own upstream speaks delta only, so nothing of
 * the relay talks to this.
 *
 * Semantics, kept plain: per stream and type the client's latest name list
 * (an empty first list for Listener/Cluster is the legacy wildcard); a request
 * that changes the list is answered with every existing resource it names; a
 * request that only ACKs or NACKs is not answered; a request carrying an old
 * nonce is ignored. A change to a resource resends the type's subscribed
 * resources to each stream that names it (for Listener/Cluster: to each
 * stream of the type, as their full state). Each type has one version counter,
 * sent as `version_info`. Every request is recorded, so the tests can show
 * what the real client sends.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type { Any, Node } from '../../src/proto/messages';
import { CLUSTER, LISTENER } from './names';
import {
  sotwAdsServiceDefinition,
  sotwRequestCodec,
  sotwResponseCodec,
  type DiscoveryRequest,
} from './sotw-messages';
import { DEFAULT_TIMEOUT_MS, sleep, waitUntil } from './wait';

/** Types whose responses carry the full state of the world. */
const FULL_STATE_TYPES = new Set([LISTENER, CLUSTER]);

export interface SotwRecordedRequest {
  streamId: number;
  typeUrl: string;
  names: string[];
  versionInfo: string;
  nonce: string;
  errorDetail?: { code?: number; message?: string };
  node?: Node;
  /** True when the nonce was not the latest sent for the type (the request was ignored). */
  stale: boolean;
}

export interface SotwSentResponse {
  streamId: number;
  typeUrl: string;
  version: string;
  nonce: string;
  names: string[];
}

interface TypeState {
  /** null = legacy wildcard. */
  names: Set<string> | null;
  lastNonce: string;
}

interface Stream {
  id: number;
  call: grpc.ServerDuplexStream<Buffer, Buffer>;
  open: boolean;
  types: Map<string, TypeState>;
  nonceSeq: number;
}

export class SotwOrigin {
  readonly events = new EventEmitter();
  readonly requests: SotwRecordedRequest[] = [];
  readonly sent: SotwSentResponse[] = [];

  private server: grpc.Server | null = null;
  private boundPort = 0;
  private nextStreamId = 1;
  private readonly streams = new Map<number, Stream>();
  /** type URL → name → payload. */
  private readonly store = new Map<string, Map<string, Buffer>>();
  private readonly versions = new Map<string, number>();

  private constructor(readonly label: string) {
    this.events.setMaxListeners(0);
  }

  static async start(opts: { label?: string } = {}): Promise<SotwOrigin> {
    const origin = new SotwOrigin(opts.label ?? 'sotw-origin');
    await origin.listen(0);
    return origin;
  }

  private async listen(port: number): Promise<void> {
    // Right after a stop the port may take a moment to become bindable again.
    for (let attempt = 0; ; attempt++) {
      const server = new grpc.Server();
      server.addService(sotwAdsServiceDefinition, {
        StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.onStream(call),
      });
      try {
        this.boundPort = await new Promise<number>((resolve, reject) =>
          server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
        );
        this.server = server;
        this.changed();
        return;
      } catch (err) {
        server.forceShutdown();
        if (port === 0 || attempt >= 50) throw err;
        await sleep(50);
      }
    }
  }

  get address(): string {
    return `127.0.0.1:${this.boundPort}`;
  }

  get streamCount(): number {
    let n = 0;
    for (const s of this.streams.values()) if (s.open) n++;
    return n;
  }

  stop(): void {
    for (const s of this.streams.values()) s.open = false;
    this.server?.forceShutdown();
    this.server = null;
    this.changed();
  }

  /** Stop (streams are cut, like a crash) and listen again on the same port; resources are kept. */
  async restart(): Promise<void> {
    this.stop();
    await this.listen(this.boundPort);
  }

  /** The `version_info` responses of a type currently carry ('' before the first change). */
  versionOf(typeUrl: string): string {
    const v = this.versions.get(typeUrl);
    return v === undefined ? '' : String(v);
  }

  /** Create or replace a resource; bumps its type's version and pushes to the streams that want it. */
  setResource(typeUrl: string, name: string, payload: Buffer): void {
    this.typeStore(typeUrl).set(name, payload);
    this.bump(typeUrl);
    this.push(typeUrl, name);
  }

  removeResource(typeUrl: string, name: string): void {
    if (!this.typeStore(typeUrl).delete(name)) throw new Error(`${this.label} has no ${typeUrl} ${name}`);
    this.bump(typeUrl);
    // Only full-state types can tell a client about a deletion.
    if (FULL_STATE_TYPES.has(typeUrl)) this.push(typeUrl, name);
  }

  /** Requests of a type, in arrival order. */
  requestsOf(typeUrl: string): SotwRecordedRequest[] {
    return this.requests.filter((r) => r.typeUrl === typeUrl);
  }

  waitFor<T>(predicate: () => T | undefined | false | null, what = 'SotW origin condition', timeoutMs = DEFAULT_TIMEOUT_MS): Promise<T> {
    return waitUntil(this.events, predicate, { timeoutMs, what: `[${this.label}] ${what}`, explain: () => this.describe() });
  }

  /** Assert that no request of `typeUrl` arrives within `ms`. */
  async expectNoRequest(typeUrl: string, ms: number): Promise<void> {
    const before = this.requests.length;
    await sleep(ms);
    const extra = this.requests.slice(before).filter((r) => r.typeUrl === typeUrl);
    if (extra.length > 0) throw new Error(`[${this.label}] expected no ${typeUrl} request, got:\n${extra.map(fmtSotwRequest).join('\n')}`);
  }

  describe(): string {
    const lines = [`[${this.label}] ${this.requests.length} requests, ${this.streamCount} open streams:`];
    for (const r of this.requests.slice(-30)) lines.push('  ' + fmtSotwRequest(r));
    return lines.join('\n');
  }

  // ------------------------------------------------------------------ streams

  private onStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const s: Stream = { id: this.nextStreamId++, call, open: true, types: new Map(), nonceSeq: 0 };
    this.streams.set(s.id, s);
    const close = (): void => {
      if (!s.open) return;
      s.open = false;
      this.changed();
    };
    call.on('data', (bytes: Buffer) => this.onRequest(s, bytes));
    call.on('end', () => {
      close();
      call.end();
    });
    call.on('cancelled', close);
    call.on('error', close);
    call.on('close', close);
    this.changed();
  }

  private onRequest(s: Stream, bytes: Buffer): void {
    if (!s.open) return;
    let req: DiscoveryRequest;
    try {
      req = sotwRequestCodec.decode(bytes);
    } catch (err) {
      s.open = false;
      s.call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: `undecodable DiscoveryRequest: ${(err as Error).message}` });
      this.changed();
      return;
    }
    const typeUrl = req.type_url ?? '';
    const nonce = req.response_nonce ?? '';
    const names = [...(req.resource_names ?? [])];
    const state = s.types.get(typeUrl);
    const stale = state !== undefined && nonce !== '' && nonce !== state.lastNonce;
    const errorDetail = req.error_detail && (req.error_detail.code || req.error_detail.message) ? { ...req.error_detail } : undefined;
    this.requests.push({
      streamId: s.id,
      typeUrl,
      names,
      versionInfo: req.version_info ?? '',
      nonce,
      stale,
      ...(errorDetail ? { errorDetail } : {}),
      ...(req.node ? { node: req.node } : {}),
    });
    if (!stale) {
      let changed: boolean;
      if (state === undefined) {
        const wildcard = names.length === 0 && FULL_STATE_TYPES.has(typeUrl);
        s.types.set(typeUrl, { names: wildcard ? null : new Set(names), lastNonce: '' });
        changed = true;
      } else {
        const before = state.names;
        const after = new Set(names);
        changed = before === null ? false : before.size !== after.size || [...after].some((n) => !before.has(n));
        if (before !== null) state.names = after;
      }
      if (changed) this.respond(s, typeUrl);
    }
    this.changed();
  }

  private push(typeUrl: string, name: string): void {
    for (const s of this.streams.values()) {
      if (!s.open) continue;
      const state = s.types.get(typeUrl);
      if (!state) continue;
      if (FULL_STATE_TYPES.has(typeUrl) || state.names === null || state.names.has(name)) this.respond(s, typeUrl);
    }
  }

  private respond(s: Stream, typeUrl: string): void {
    const state = s.types.get(typeUrl)!;
    const store = this.typeStore(typeUrl);
    const wanted = state.names === null ? [...store.keys()] : [...state.names].filter((n) => store.has(n));
    // An empty answer says something only for full-state types (everything is gone).
    if (wanted.length === 0 && !FULL_STATE_TYPES.has(typeUrl)) return;
    const resources: Any[] = wanted.map((n) => ({ type_url: typeUrl, value: store.get(n)! }));
    const nonce = `${this.label}-${s.id}-${++s.nonceSeq}`;
    const version = this.versionOf(typeUrl);
    state.lastNonce = nonce;
    this.sent.push({ streamId: s.id, typeUrl, version, nonce, names: wanted });
    s.call.write(sotwResponseCodec.encode({ version_info: version, resources, type_url: typeUrl, nonce }));
    this.changed();
  }

  private bump(typeUrl: string): void {
    this.versions.set(typeUrl, (this.versions.get(typeUrl) ?? 0) + 1);
  }

  private typeStore(typeUrl: string): Map<string, Buffer> {
    let m = this.store.get(typeUrl);
    if (!m) this.store.set(typeUrl, (m = new Map()));
    return m;
  }

  private changed(): void {
    this.events.emit('change');
  }
}

export function fmtSotwRequest(r: SotwRecordedRequest): string {
  const parts = [`s${r.streamId}`, r.typeUrl.split('.').pop() ?? '', `[${r.names.join(' ')}]`, `v=${JSON.stringify(r.versionInfo)}`];
  if (r.nonce) parts.push(`${r.errorDetail ? 'NACK' : 'ACK'} ${r.nonce}`);
  if (r.errorDetail) parts.push(`code=${r.errorDetail.code ?? 0} "${r.errorDetail.message ?? ''}"`);
  if (r.stale) parts.push('(stale nonce, ignored)');
  if (r.node) parts.push(`node=${r.node.id ?? ''}`);
  return parts.join(' ');
}
