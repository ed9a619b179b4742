/**
 * A test origin control plane: a real grpc-js server speaking delta ADS on
 * 127.0.0.1. It holds resources the test puts into it, answers subscriptions
 * the way a conforming xdstp server does (globs, empty globs, does-not-exist,
 * initial_resource_versions), pushes changes to the streams that cover them,
 * and records every request so tests can assert what the upstream was asked.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { deltaAdsServiceDefinition } from '../../src/proto/ads-service';
import {
  deltaRequestCodec,
  deltaResponseCodec,
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
  type Node,
  type Resource,
} from '../../src/proto/messages';
import { CLUSTER, LISTENER, isGlob, isXdstp, keyOf, subscriptionCovers } from './names';
import { DEFAULT_TIMEOUT_MS, sleep, waitUntil } from './wait';

/** Types on which an initial request with no names means the legacy wildcard. */
const LEGACY_WILDCARD_TYPES = new Set([LISTENER, CLUSTER]);

/** TLS for the origin's listener (PEM file contents). With `clientCa`, clients must present a certificate it signed. */
export interface OriginTls {
  cert: Buffer;
  key: Buffer;
  clientCa?: Buffer;
}

export interface OriginResourceOptions {
  /** Resource.ttl in seconds. */
  ttl?: number;
  /** Resource.cache_control.do_not_cache. */
  doNotCache?: boolean;
}

export interface OriginResource {
  typeUrl: string;
  /** The name exactly as the origin sends it. */
  name: string;
  version: string;
  payload: Buffer;
  ttl?: number;
  doNotCache?: boolean;
}

export interface RecordedRequest {
  /** Position in `origin.requests`. */
  index: number;
  streamId: number;
  /** Position within its stream (0 = the stream's first request). */
  seq: number;
  typeUrl: string;
  subscribe: string[];
  unsubscribe: string[];
  initialVersions: Record<string, string>;
  nonce: string;
  errorDetail?: { code?: number; message?: string };
  node?: Node;
  /** Set when the bytes did not decode (then the other fields are empty). */
  decodeError?: string;
  /** Encoded size of the request. */
  bytes: number;
}

export interface SentResponse {
  streamId: number;
  nonce: string;
  typeUrl: string;
  resources: Resource[];
  removed: string[];
}

export interface AckRecord {
  streamId: number;
  typeUrl: string;
  nonce: string;
  /** Present for a NACK. */
  message?: string;
}

interface StreamState {
  id: number;
  call: grpc.ServerDuplexStream<Buffer, Buffer>;
  open: boolean;
  requestCount: number;
  /** type URL → subscribed names, as the stream spelled them. */
  subs: Map<string, Set<string>>;
  /** type URL → resource key → version the stream holds (as far as we know). */
  held: Map<string, Map<string, string>>;
  /** Nonces sent and not yet ACKed/NACKed. */
  pending: Map<string, SentResponse>;
  nonceSeq: number;
  /**
   * type URL → resource key → version from initial_resource_versions not yet
   * matched by a subscription: a client may send its versions in one request
   * and subscribe the names in later ones (a split replay).
   */
  claimed: Map<string, Map<string, string>>;
}

/** Extra fields for a response made by `injectRaw`. */
export interface InjectExtras {
  /** removed_resource_names (field 8). */
  removedResourceNames?: string[];
  /** resource_errors (field 9). */
  resourceErrors?: Array<{ name: string; code: number; message: string }>;
}

export function makeResource(
  typeUrl: string,
  name: string,
  payload: Buffer | string | undefined,
  version: string,
  opts: OriginResourceOptions = {},
): Resource {
  const r: Resource = { name, version };
  if (payload !== undefined) {
    r.resource = { type_url: typeUrl, value: typeof payload === 'string' ? Buffer.from(payload) : payload };
  }
  if (opts.ttl !== undefined) r.ttl = { seconds: opts.ttl };
  if (opts.doNotCache) r.cache_control = { do_not_cache: true };
  return r;
}

export class TestOrigin {
  readonly events = new EventEmitter();
  /** Every request received, in arrival order, across all streams. */
  readonly requests: RecordedRequest[] = [];
  /** Every response sent. */
  readonly sent: SentResponse[] = [];
  readonly acks: AckRecord[] = [];
  readonly nacks: AckRecord[] = [];
  /** Total streams ever opened (grows across restarts). */
  totalStreams = 0;
  /** When each stream was opened (Date.now()), in order. */
  readonly streamOpenTimes: number[] = [];
  /**
   * Names (canonical keys) this control plane cannot take: a request that
   * subscribes one ends its stream with INTERNAL before anything of that
   * request is answered, as a control plane with a validation bug would.
   */
  readonly poisonNames = new Set<string>();
  /** End every new stream at once with UNAVAILABLE (accepts, then fails). */
  failNewStreams = false;
  /** Per stream, the verified client certificate's subject CN (TLS origins with a client CA), in arrival order. */
  readonly clientCertificates: (string | undefined)[] = [];

  private server: grpc.Server | null = null;
  private readonly streams = new Map<number, StreamState>();
  /** type URL → key → resource. */
  private readonly store = new Map<string, Map<string, OriginResource>>();
  private nextStreamId = 1;
  private boundPort = 0;

  private constructor(
    readonly label: string,
    private readonly tls?: OriginTls,
  ) {
    this.events.setMaxListeners(0);
  }

  static async start(opts: { port?: number; label?: string; tls?: OriginTls } = {}): Promise<TestOrigin> {
    const origin = new TestOrigin(opts.label ?? 'origin', opts.tls);
    await origin.listen(opts.port ?? 0);
    return origin;
  }

  get port(): number {
    return this.boundPort;
  }

  get address(): string {
    return `127.0.0.1:${this.boundPort}`;
  }

  /** `grpc://127.0.0.1:PORT`, or `grpcs://…` for a TLS origin. */
  get uri(): string {
    return `${this.tls ? 'grpcs' : 'grpc'}://127.0.0.1:${this.boundPort}`;
  }

  /** Streams currently open. */
  get streamCount(): number {
    let n = 0;
    for (const s of this.streams.values()) if (s.open) n++;
    return n;
  }

  get running(): boolean {
    return this.server !== null;
  }

  // ---------------------------------------------------------------- lifecycle

  private async listen(port: number): Promise<void> {
    let lastErr: Error | undefined;
    // After a restart the port may take a moment to become bindable again.
    for (let attempt = 0; attempt < 50; attempt++) {
      const server = new grpc.Server();
      server.addService(deltaAdsServiceDefinition, {
        DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.onStream(call),
      });
      try {
        this.boundPort = await new Promise<number>((resolve, reject) =>
          server.bindAsync(`127.0.0.1:${port}`, this.credentials(), (err, p) =>
            err ? reject(err) : resolve(p),
          ),
        );
        this.server = server;
        this.changed();
        return;
      } catch (err) {
        lastErr = err as Error;
        server.forceShutdown();
        if (port === 0) break;
        await sleep(50);
      }
    }
    throw lastErr ?? new Error('bind failed');
  }

  private credentials(): grpc.ServerCredentials {
    if (!this.tls) return grpc.ServerCredentials.createInsecure();
    const { cert, key, clientCa } = this.tls;
    return grpc.ServerCredentials.createSsl(clientCa ?? null, [{ cert_chain: cert, private_key: key }], clientCa !== undefined);
  }

  /** Stop listening and kill every stream (resources are kept). */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    // Like a crash: connections are torn down, clients see UNAVAILABLE.
    for (const s of this.streams.values()) s.open = false;
    server.forceShutdown();
    this.changed();
  }

  /** Stop, then listen again on the same port; resources are kept. */
  async restart(): Promise<void> {
    const port = this.boundPort;
    await this.stop();
    await this.listen(port);
  }

  // ------------------------------------------------------------- resource API

  /** Create or update a resource and push it to every stream that covers it. */
  setResource(
    typeUrl: string,
    name: string,
    payload: Buffer | string,
    version: string,
    opts: OriginResourceOptions = {},
  ): void {
    const res: OriginResource = {
      typeUrl,
      name,
      version,
      payload: typeof payload === 'string' ? Buffer.from(payload) : payload,
      ...(opts.ttl !== undefined ? { ttl: opts.ttl } : {}),
      ...(opts.doNotCache ? { doNotCache: true } : {}),
    };
    this.typeStore(typeUrl).set(keyOf(name), res);
    const key = keyOf(name);
    for (const s of this.openStreams()) {
      if (!this.covers(s, typeUrl, name)) continue;
      const held = this.heldOf(s, typeUrl);
      if (held.get(key) === version) continue;
      held.set(key, version);
      this.send(s, typeUrl, [this.encodeResource(res)], []);
    }
  }

  /** Delete a resource; tell every covering stream, and report globs that became empty. */
  removeResource(typeUrl: string, name: string): void {
    const key = keyOf(name);
    const res = this.typeStore(typeUrl).get(key);
    if (!res) throw new Error(`origin has no ${typeUrl} ${name}`);
    this.typeStore(typeUrl).delete(key);
    for (const s of this.openStreams()) {
      const subs = s.subs.get(typeUrl);
      if (!subs) continue;
      const removed: string[] = [];
      for (const sub of subs) {
        if (!subscriptionCovers(sub, res.name)) continue;
        if (!removed.includes(res.name)) removed.push(res.name);
        if (isGlob(sub) && this.membersOf(typeUrl, sub).length === 0) removed.push(sub);
      }
      if (removed.length === 0) continue;
      this.heldOf(s, typeUrl).delete(key);
      this.send(s, typeUrl, [], removed);
    }
  }

  /** Send a TTL heartbeat (version, no payload) to every stream covering the resource. */
  heartbeat(typeUrl: string, name: string): void {
    const res = this.typeStore(typeUrl).get(keyOf(name));
    if (!res) throw new Error(`origin has no ${typeUrl} ${name}`);
    const hb = makeResource(typeUrl, res.name, undefined, res.version, {
      ...(res.ttl !== undefined ? { ttl: res.ttl } : {}),
    });
    for (const s of this.openStreams()) {
      if (this.covers(s, typeUrl, res.name)) this.send(s, typeUrl, [hb], []);
    }
  }

  /** Send arbitrary resources/removals of a type to every open stream, regardless of subscriptions. */
  injectRaw(typeUrl: string, resources: Resource[], removed: string[] = [], extras: InjectExtras = {}): void {
    for (const s of this.openStreams()) this.send(s, typeUrl, resources, removed, extras);
  }

  /**
   * Write pre-encoded response bytes to every open stream (for responses no
   * encoder would produce). `nonce` is what the bytes carry; it is awaited as
   * pending like any other response.
   */
  injectEncoded(typeUrl: string, nonce: string, bytes: Buffer): void {
    for (const s of this.openStreams()) {
      const sent: SentResponse = { streamId: s.id, nonce, typeUrl, resources: [], removed: [] };
      s.pending.set(nonce, sent);
      this.sent.push(sent);
      try {
        s.call.write(bytes);
      } catch {
        s.open = false;
      }
    }
    this.changed();
  }

  getResource(typeUrl: string, name: string): OriginResource | undefined {
    return this.typeStore(typeUrl).get(keyOf(name));
  }

  // ------------------------------------------------------------ observations

  /** Union of current subscriptions across open streams (spelled as the client sent them). */
  subscribedNames(typeUrl?: string): Set<string> {
    const out = new Set<string>();
    for (const s of this.openStreams()) {
      for (const [t, subs] of s.subs) {
        if (typeUrl !== undefined && t !== typeUrl) continue;
        for (const n of subs) out.add(n);
      }
    }
    return out;
  }

  /** Like subscribedNames, canonicalised. */
  subscribedKeys(typeUrl?: string): Set<string> {
    return new Set([...this.subscribedNames(typeUrl)].map(keyOf));
  }

  /** How many times `name` (canonically) was in resource_names_subscribe, over all streams. */
  subscribeCount(name: string, since = 0): number {
    const key = keyOf(name);
    let n = 0;
    for (const r of this.requests.slice(since)) for (const x of r.subscribe) if (keyOf(x) === key) n++;
    return n;
  }

  unsubscribeCount(name: string, since = 0): number {
    const key = keyOf(name);
    let n = 0;
    for (const r of this.requests.slice(since)) for (const x of r.unsubscribe) if (keyOf(x) === key) n++;
    return n;
  }

  /** Requests that subscribe to or unsubscribe from something. */
  subscriptionRequests(since = 0): RecordedRequest[] {
    return this.requests.slice(since).filter((r) => r.subscribe.length > 0 || r.unsubscribe.length > 0);
  }

  /** Every name ever in resource_names_subscribe (raw spelling). */
  everSubscribed(): string[] {
    return this.requests.flatMap((r) => r.subscribe);
  }

  /** Requests of one stream, in order. */
  streamRequests(streamId: number): RecordedRequest[] {
    return this.requests.filter((r) => r.streamId === streamId);
  }

  /** Ids of streams ever opened, in order. */
  streamIds(): number[] {
    return [...this.streams.keys()];
  }

  /** True when every response sent on open streams has been ACKed or NACKed. */
  settled(): boolean {
    for (const s of this.openStreams()) if (s.pending.size > 0) return false;
    return true;
  }

  waitFor<T>(predicate: () => T | undefined | false | null, what = 'origin condition', timeoutMs = DEFAULT_TIMEOUT_MS): Promise<T> {
    return waitUntil(this.events, predicate, {
      timeoutMs,
      what: `[${this.label}] ${what}`,
      explain: () => this.describe(),
    });
  }

  /** Wait until the relay has ACKed/NACKed everything the origin sent. */
  waitSettled(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<true> {
    return this.waitFor(() => this.settled(), 'every response ACKed', timeoutMs);
  }

  /** Assert that no request arrives within `ms` (short absence windows only). */
  async expectNoRequest(ms = 300, filter: (r: RecordedRequest) => boolean = () => true): Promise<void> {
    const before = this.requests.length;
    await sleep(ms);
    const extra = this.requests.slice(before).filter(filter);
    if (extra.length > 0) {
      throw new Error(`[${this.label}] expected no upstream request, got:\n${extra.map(fmtRequest).join('\n')}`);
    }
  }

  describe(): string {
    const lines = [`[${this.label}] ${this.requests.length} requests, ${this.streamCount} open streams:`];
    for (const r of this.requests.slice(-30)) lines.push('  ' + fmtRequest(r));
    return lines.join('\n');
  }

  // ---------------------------------------------------------------- streams

  private onStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const s: StreamState = {
      id: this.nextStreamId++,
      call,
      open: true,
      requestCount: 0,
      subs: new Map(),
      held: new Map(),
      pending: new Map(),
      nonceSeq: 0,
      claimed: new Map(),
    };
    this.streams.set(s.id, s);
    this.totalStreams++;
    this.streamOpenTimes.push(Date.now());
    const cn: unknown = call.getAuthContext().sslPeerCertificate?.subject?.CN;
    this.clientCertificates.push(typeof cn === 'string' ? cn : undefined);
    const close = (): void => {
      if (!s.open) return;
      s.open = false;
      this.changed();
    };
    call.on('data', (bytes: Buffer) => this.onRequest(s, bytes));
    call.on('end', () => {
      close();
      try {
        call.end();
      } catch {
        /* ignore */
      }
    });
    call.on('cancelled', close);
    call.on('error', close);
    call.on('close', close);
    if (this.failNewStreams) {
      s.open = false;
      call_error(call, grpc.status.UNAVAILABLE, 'test origin: failing every stream');
    }
    this.changed();
  }

  private onRequest(s: StreamState, bytes: Buffer): void {
    if (!s.open) return;
    let req: DeltaDiscoveryRequest;
    try {
      req = deltaRequestCodec.decode(bytes);
    } catch (err) {
      this.requests.push({
        index: this.requests.length,
        streamId: s.id,
        seq: s.requestCount++,
        typeUrl: '',
        subscribe: [],
        unsubscribe: [],
        initialVersions: {},
        nonce: '',
        decodeError: (err as Error).message,
        bytes: bytes.length,
      });
      s.open = false;
      call_error(s.call, grpc.status.INVALID_ARGUMENT, 'undecodable DeltaDiscoveryRequest');
      this.changed();
      return;
    }
    const typeUrl = req.type_url ?? '';
    const rec: RecordedRequest = {
      index: this.requests.length,
      streamId: s.id,
      seq: s.requestCount++,
      typeUrl,
      subscribe: [...(req.resource_names_subscribe ?? [])],
      unsubscribe: [...(req.resource_names_unsubscribe ?? [])],
      initialVersions: { ...(req.initial_resource_versions ?? {}) },
      nonce: req.response_nonce ?? '',
      ...(req.error_detail ? { errorDetail: { ...req.error_detail } } : {}),
      ...(req.node ? { node: req.node } : {}),
      bytes: bytes.length,
    };
    this.requests.push(rec);

    const poison = rec.subscribe.find((n) => this.poisonNames.has(keyOf(n)));
    if (poison !== undefined) {
      s.open = false;
      call_error(s.call, grpc.status.INTERNAL, `test origin cannot take ${poison}`);
      this.changed();
      return;
    }

    if (rec.nonce) {
      s.pending.delete(rec.nonce);
      const ack: AckRecord = { streamId: s.id, typeUrl, nonce: rec.nonce };
      if (req.error_detail && (req.error_detail.message || req.error_detail.code)) {
        this.nacks.push({ ...ack, message: req.error_detail.message ?? '' });
      } else {
        this.acks.push(ack);
      }
    }

    if (typeUrl === '') {
      s.open = false;
      call_error(s.call, grpc.status.INVALID_ARGUMENT, 'type_url is required');
      this.changed();
      return;
    }

    const firstForType = !s.subs.has(typeUrl);
    const subs = this.subsOf(s, typeUrl);
    const held = this.heldOf(s, typeUrl);
    const initial = new Map<string, { spelled: string; version: string }>();
    let claimed = s.claimed.get(typeUrl);
    if (!claimed) s.claimed.set(typeUrl, (claimed = new Map()));
    for (const [n, v] of Object.entries(rec.initialVersions)) {
      initial.set(keyOf(n), { spelled: n, version: v });
      claimed.set(keyOf(n), v);
      held.set(keyOf(n), v);
    }
    let subscribe = rec.subscribe;
    if (firstForType && subscribe.length === 0 && LEGACY_WILDCARD_TYPES.has(typeUrl)) subscribe = ['*'];

    for (const u of rec.unsubscribe) subs.delete(u);
    if (rec.unsubscribe.length > 0) {
      for (const k of [...held.keys()]) {
        const r = this.typeStore(typeUrl).get(k);
        const name = r?.name ?? k;
        if (![...subs].some((sub) => subscriptionCovers(sub, name))) held.delete(k);
      }
    }

    const toSend = new Map<string, OriginResource>();
    const removed: string[] = [];
    const addRemoved = (n: string): void => {
      if (!removed.includes(n)) removed.push(n);
    };
    for (const sub of subscribe) {
      subs.add(sub);
      const members = this.membersOf(typeUrl, sub);
      if (members.length === 0) {
        // A singleton that does not exist, or an empty glob; the legacy
        // wildcard with nothing in it gets an empty response below.
        if (sub !== '*') addRemoved(sub);
        continue;
      }
      for (const m of members) {
        const k = keyOf(m.name);
        const claim = claimed.get(k);
        claimed.delete(k);
        if (claim === m.version) continue;
        toSend.set(k, m);
      }
    }
    // Names the client claims to hold that no longer exist.
    for (const [k, { spelled }] of initial) {
      if (!this.typeStore(typeUrl).has(k)) {
        addRemoved(spelled);
        held.delete(k);
      }
    }
    for (const [k, m] of toSend) held.set(k, m.version);
    // A conforming server answers a new wildcard subscription even when it is empty.
    if (toSend.size > 0 || removed.length > 0 || subscribe.includes('*')) {
      this.send(s, typeUrl, [...toSend.values()].map((r) => this.encodeResource(r)), removed);
    }
    this.changed();
  }

  private send(s: StreamState, typeUrl: string, resources: Resource[], removed: string[], extras: InjectExtras = {}): void {
    const nonce = `${this.label}-${s.id}-${++s.nonceSeq}`;
    const resp: DeltaDiscoveryResponse = {
      type_url: typeUrl,
      nonce,
      resources,
      removed_resources: removed,
      system_version_info: String(s.nonceSeq),
    };
    if (extras.removedResourceNames) resp.removed_resource_names = extras.removedResourceNames.map((name) => ({ name }));
    if (extras.resourceErrors) {
      resp.resource_errors = extras.resourceErrors.map((e) => ({
        resource_name: { name: e.name },
        error_detail: { code: e.code, message: e.message },
      }));
    }
    const sent: SentResponse = { streamId: s.id, nonce, typeUrl, resources, removed };
    s.pending.set(nonce, sent);
    this.sent.push(sent);
    try {
      s.call.write(deltaResponseCodec.encode(resp));
    } catch {
      s.open = false;
    }
    this.changed();
  }

  // ---------------------------------------------------------------- helpers

  private encodeResource(r: OriginResource): Resource {
    return makeResource(r.typeUrl, r.name, r.payload, r.version, {
      ...(r.ttl !== undefined ? { ttl: r.ttl } : {}),
      ...(r.doNotCache ? { doNotCache: true } : {}),
    });
  }

  private membersOf(typeUrl: string, sub: string): OriginResource[] {
    // A plain name is one lookup: large subscription sets must not cost a scan per name.
    if (sub !== '*' && !isGlob(sub)) {
      const r = this.typeStore(typeUrl).get(keyOf(sub));
      return r && subscriptionCovers(sub, r.name) ? [r] : [];
    }
    return [...this.typeStore(typeUrl).values()].filter((r) => subscriptionCovers(sub, r.name));
  }

  private covers(s: StreamState, typeUrl: string, name: string): boolean {
    const subs = s.subs.get(typeUrl);
    if (!subs) return false;
    for (const sub of subs) if (subscriptionCovers(sub, name)) return true;
    return false;
  }

  private typeStore(typeUrl: string): Map<string, OriginResource> {
    let m = this.store.get(typeUrl);
    if (!m) this.store.set(typeUrl, (m = new Map()));
    return m;
  }

  private subsOf(s: StreamState, typeUrl: string): Set<string> {
    let m = s.subs.get(typeUrl);
    if (!m) s.subs.set(typeUrl, (m = new Set()));
    return m;
  }

  private heldOf(s: StreamState, typeUrl: string): Map<string, string> {
    let m = s.held.get(typeUrl);
    if (!m) s.held.set(typeUrl, (m = new Map()));
    return m;
  }

  private openStreams(): StreamState[] {
    return [...this.streams.values()].filter((s) => s.open);
  }

  private changed(): void {
    this.events.emit('change');
  }
}

function call_error(call: grpc.ServerDuplexStream<Buffer, Buffer>, code: grpc.status, details: string): void {
  try {
    call.emit('error', { code, details });
  } catch {
    /* ignore */
  }
}

export function fmtRequest(r: RecordedRequest): string {
  const parts = [`#${r.index} s${r.streamId}.${r.seq}`, r.typeUrl.split('.').pop() ?? ''];
  if (r.decodeError) parts.push(`UNDECODABLE(${r.decodeError})`);
  if (r.node) parts.push(`node=${r.node.id ?? ''}`);
  if (r.subscribe.length) parts.push(`+[${r.subscribe.join(' ')}]`);
  if (r.unsubscribe.length) parts.push(`-[${r.unsubscribe.join(' ')}]`);
  if (Object.keys(r.initialVersions).length) parts.push(`initial=${JSON.stringify(r.initialVersions)}`);
  if (r.nonce) parts.push(`${r.errorDetail ? 'NACK' : 'ACK'} ${r.nonce}`);
  if (r.errorDetail) parts.push(`"${r.errorDetail.message ?? ''}"`);
  return parts.join(' ');
}

export { isXdstp };
