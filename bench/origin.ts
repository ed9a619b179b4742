/**
 * The benchmark's origin control plane: a grpc-js delta-ADS server on
 * 127.0.0.1 that serves xdstp singletons and globs of one type, pushes changes
 * to the streams that cover them (one response per stream per change batch),
 * and counts every request so a scenario can say exactly what the relay asked
 * upstream. Lean on purpose: resources are pre-encoded once per version.
 */
import * as grpc from '@grpc/grpc-js';
import { deltaAdsServiceDefinition } from '../src/proto/ads-service';
import { encodeDeltaResponse } from '../src/proto/delta-response';
import { deltaRequestCodec, type DeltaDiscoveryRequest } from '../src/proto/messages';
import { lenField, stringField } from '../src/proto/wire';
import { canonicalUrl, canonicalUrn, globKeyOf, parseUrl, parseUrn } from '../src/xdstp';
import { TYPE_URL } from './lib/names';

export interface OriginCounters {
  streams: number;
  requests: number;
  /** Requests that carry subscribe or unsubscribe names. */
  subscribeRequests: number;
  acks: number;
  nacks: number;
  /** Names listed in resource_names_subscribe, over all requests. */
  namesSubscribed: number;
  namesUnsubscribed: number;
  responses: number;
  resourcesSent: number;
}

interface Res {
  name: string;
  key: string;
  glob: string;
  version: string;
  bytes: Buffer;
}

interface OStream {
  id: number;
  call: grpc.ServerDuplexStream<Buffer, Buffer>;
  open: boolean;
  subs: Set<string>;
  held: Map<string, string>;
  seq: number;
}

const fillers = new Map<number, Buffer>();

/** An opaque payload of `size` bytes (base-36 text, so it never contains the version marker). */
export function payloadOf(size: number): Buffer {
  let b = fillers.get(size);
  if (!b) {
    const chars = 'abcdefghijklmnopqrstuvwxyz0123456789';
    b = Buffer.alloc(size);
    let x = 12345;
    for (let i = 0; i < size; i++) {
      x = (x * 1103515245 + 12345) & 0x7fffffff;
      b[i] = chars.charCodeAt(x % chars.length);
    }
    fillers.set(size, b);
  }
  return b;
}

/**
 * The payload of `size` bytes with `version` written over its start: a
 * state-of-the-world response carries only the payload `Any`, so a SotW
 * client reads the stamp (`@@T<µs>;r<round>;`) from there. Same size as the
 * plain payload, so stamped and plain resources cost the same to carry.
 */
export function stampedPayloadOf(size: number, version: string): Buffer {
  const b = Buffer.from(payloadOf(size));
  b.write(version, 0, 'latin1');
  return b;
}

/** An encoded envoy `Resource` {version, resource: Any{type_url, value}, name}. */
export function encodeResource(name: string, version: string, payload: Buffer, typeUrl = TYPE_URL): Buffer {
  const any = Buffer.concat([stringField(1, typeUrl), lenField(2, payload)]);
  return Buffer.concat([stringField(1, version), lenField(2, any), stringField(3, name)]);
}

export class BenchOrigin {
  readonly counters: OriginCounters = {
    streams: 0,
    requests: 0,
    subscribeRequests: 0,
    acks: 0,
    nacks: 0,
    namesSubscribed: 0,
    namesUnsubscribed: 0,
    responses: 0,
    resourcesSent: 0,
  };
  private readonly resources = new Map<string, Res>();
  private readonly globs = new Map<string, Set<string>>();
  private readonly streams = new Set<OStream>();
  private nextId = 1;
  private boundPort = 0;

  private constructor(
    private readonly server: grpc.Server,
    readonly payloadBytes: number,
    /** Also stamp each payload with its version (for SotW clients; delta clients would then see every stamp twice). */
    readonly stampPayload: boolean,
  ) {}

  static async start(opts: { payloadBytes?: number; stampPayload?: boolean } = {}): Promise<BenchOrigin> {
    const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
    const origin = new BenchOrigin(server, opts.payloadBytes ?? 1024, opts.stampPayload ?? false);
    server.addService(deltaAdsServiceDefinition, {
      DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => origin.onStream(call),
    });
    origin.boundPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
    return origin;
  }

  get port(): number {
    return this.boundPort;
  }

  get resourceCount(): number {
    return this.resources.size;
  }

  /** Union of the keys subscribed on open streams. */
  subscribedKeys(): Set<string> {
    const out = new Set<string>();
    for (const s of this.streams) if (s.open) for (const k of s.subs) out.add(k);
    return out;
  }

  versionOf(name: string): string | undefined {
    return this.resources.get(canonicalUrn(name))?.version;
  }

  snapshot(): OriginCounters {
    return { ...this.counters };
  }

  /** Sets resources without telling anyone (initial population, before any subscriber). */
  put(names: readonly string[], version: string): void {
    for (const name of names) this.store(name, version);
  }

  /** Changes resources and pushes them: one response per covering stream. Returns the responses sent. */
  change(names: readonly string[], version: string): number {
    const changed = names.map((n) => this.store(n, version));
    let sent = 0;
    for (const s of this.streams) {
      if (!s.open) continue;
      const out: Buffer[] = [];
      for (const r of changed) {
        if (!s.subs.has(r.key) && !s.subs.has(r.glob)) continue;
        if (s.held.get(r.key) === r.version) continue;
        s.held.set(r.key, r.version);
        out.push(r.bytes);
      }
      if (out.length > 0) {
        this.send(s, out, []);
        sent++;
      }
    }
    return sent;
  }

  async stop(): Promise<void> {
    for (const s of this.streams) s.open = false;
    this.server.forceShutdown();
  }

  private store(name: string, version: string): Res {
    const key = canonicalUrn(name);
    let r = this.resources.get(key);
    const payload = this.stampPayload ? stampedPayloadOf(this.payloadBytes, version) : payloadOf(this.payloadBytes);
    const bytes = encodeResource(key, version, payload);
    if (r) {
      r.version = version;
      r.bytes = bytes;
    } else {
      const glob = globKeyOf(parseUrn(key));
      r = { name: key, key, glob, version, bytes };
      this.resources.set(key, r);
      let members = this.globs.get(glob);
      if (!members) this.globs.set(glob, (members = new Set()));
      members.add(key);
    }
    return r;
  }

  private onStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const s: OStream = { id: this.nextId++, call, open: true, subs: new Set(), held: new Map(), seq: 0 };
    this.streams.add(s);
    this.counters.streams++;
    const close = (): void => {
      s.open = false;
      this.streams.delete(s);
    };
    call.on('data', (bytes: Buffer) => this.onRequest(s, bytes));
    call.on('end', () => {
      close();
      call.end();
    });
    call.on('error', close);
    call.on('cancelled', close);
    call.on('close', close);
  }

  private onRequest(s: OStream, bytes: Buffer): void {
    let req: DeltaDiscoveryRequest;
    try {
      req = deltaRequestCodec.decode(bytes);
    } catch {
      return;
    }
    const c = this.counters;
    c.requests++;
    const sub = req.resource_names_subscribe ?? [];
    const unsub = req.resource_names_unsubscribe ?? [];
    if (req.response_nonce) {
      if (req.error_detail) c.nacks++;
      else c.acks++;
    }
    if (sub.length > 0 || unsub.length > 0) c.subscribeRequests++;
    c.namesSubscribed += sub.length;
    c.namesUnsubscribed += unsub.length;
    if (req.type_url !== TYPE_URL) return;
    for (const [n, v] of Object.entries(req.initial_resource_versions ?? {})) s.held.set(canonicalUrn(n), v);
    for (const n of unsub) this.forget(s, canonicalUrl(n));
    const out = new Map<string, Res>();
    const removed: string[] = [];
    for (const n of sub) {
      const key = canonicalUrl(n);
      s.subs.add(key);
      if (parseUrl(key).glob) {
        const members = this.globs.get(key);
        if (!members || members.size === 0) {
          removed.push(n);
          continue;
        }
        for (const m of members) {
          const r = this.resources.get(m)!;
          if (s.held.get(m) !== r.version) out.set(m, r);
        }
      } else {
        const r = this.resources.get(key);
        if (!r) removed.push(n);
        else if (s.held.get(key) !== r.version) out.set(key, r);
      }
    }
    for (const r of out.values()) s.held.set(r.key, r.version);
    if (out.size > 0 || removed.length > 0) this.send(s, [...out.values()].map((r) => r.bytes), removed);
  }

  /**
   * An unsubscribed name is one the client no longer holds (unless another of
   * its subscriptions still covers it): a later subscription to it must send it again.
   */
  private forget(s: OStream, key: string): void {
    s.subs.delete(key);
    const keys = parseUrl(key).glob ? [...(this.globs.get(key) ?? [])] : [key];
    for (const k of keys) {
      const r = this.resources.get(k);
      if (!s.subs.has(k) && !(r && s.subs.has(r.glob))) s.held.delete(k);
    }
  }

  private send(s: OStream, resources: Buffer[], removed: string[]): void {
    const bytes = encodeDeltaResponse(TYPE_URL, resources, removed, `o${s.id}-${++s.seq}`);
    this.counters.responses++;
    this.counters.resourcesSent += resources.length;
    try {
      s.call.write(bytes);
    } catch {
      s.open = false;
    }
  }
}
