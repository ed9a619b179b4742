/**
 * A state-of-the-world ADS test client over real gRPC: it sends whole name
 * lists per type, records every response, and ACKs (or NACKs) each one the
 * way gRPC's clients do — with the full name list, the response's nonce and
 * the version it now holds.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { DeltaAdsClient, openSotwStream } from '../../src/proto/ads-service';
import { discoveryRequestCodec, discoveryResponseCodec, type DiscoveryRequest, type DiscoveryResponse } from '../../src/proto/messages';
import { DEFAULT_TIMEOUT_MS, waitUntil } from './wait';

export interface SotwClientOptions {
  nodeId?: string;
  /** ACK every accepted response automatically (default true). */
  autoAck?: boolean;
  /** Return an error message to NACK a response. */
  reject?: (resp: DiscoveryResponse) => string | undefined;
}

export class SotwClient {
  readonly events = new EventEmitter();
  readonly responses: DiscoveryResponse[] = [];
  readonly sent: DiscoveryRequest[] = [];
  status: { code: grpc.status; details: string } | undefined;
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  /** Per type: the names last asked for and the version last accepted. */
  private readonly names = new Map<string, string[]>();
  private readonly versions = new Map<string, string>();
  private firstSent = false;

  constructor(
    readonly target: string,
    private readonly opts: SotwClientOptions = {},
  ) {
    this.events.setMaxListeners(0);
    this.client = new DeltaAdsClient(target, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    this.call = openSotwStream(this.client);
    this.call.on('data', (b: Buffer) => this.onData(b));
    this.call.on('error', () => undefined);
    this.call.on('status', (s: grpc.StatusObject) => {
      this.status ??= { code: s.code, details: s.details };
      this.events.emit('change');
    });
  }

  /** Asks for exactly `names` of `typeUrl` (the whole list, as SotW requires). */
  request(typeUrl: string, names: string[], nonce = this.lastNonce(typeUrl)): void {
    this.names.set(typeUrl, names);
    this.send({ type_url: typeUrl, resource_names: names, version_info: this.versions.get(typeUrl) ?? '', response_nonce: nonce });
  }

  send(req: DiscoveryRequest): void {
    if (!this.firstSent) {
      req.node = { id: this.opts.nodeId ?? 'sotw-client' };
      this.firstSent = true;
    }
    this.sent.push(req);
    this.call.write(discoveryRequestCodec.encode(req));
  }

  /** Writes arbitrary bytes as one gRPC message (to test undecodable input). */
  sendRaw(bytes: Buffer): void {
    this.firstSent = true;
    this.sent.push({});
    this.call.write(bytes);
  }

  /** Resolves with the stream's final status. */
  waitForEnd(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<{ code: grpc.status; details: string }> {
    return waitUntil(this.events, () => this.status, { timeoutMs, what: 'the sotw stream to end' });
  }

  lastNonce(typeUrl: string): string {
    for (let i = this.responses.length - 1; i >= 0; i--) if (this.responses[i].type_url === typeUrl) return this.responses[i].nonce ?? '';
    return '';
  }

  private onData(bytes: Buffer): void {
    const resp = discoveryResponseCodec.decode(bytes);
    this.responses.push(resp);
    const typeUrl = resp.type_url ?? '';
    const rejection = this.opts.reject?.(resp);
    if (rejection === undefined) this.versions.set(typeUrl, resp.version_info ?? '');
    if (this.opts.autoAck ?? true) {
      const req: DiscoveryRequest = {
        type_url: typeUrl,
        resource_names: this.names.get(typeUrl) ?? [],
        version_info: this.versions.get(typeUrl) ?? '',
        response_nonce: resp.nonce ?? '',
      };
      if (rejection !== undefined) req.error_detail = { code: 3, message: rejection };
      this.send(req);
    }
    this.events.emit('change');
  }

  /** Responses of a type. */
  of(typeUrl: string): DiscoveryResponse[] {
    return this.responses.filter((r) => r.type_url === typeUrl);
  }

  /** Payload texts of a response's resources (the test origin's payloads are plain strings). */
  static payloads(resp: DiscoveryResponse): string[] {
    return (resp.resources ?? []).map((a) => Buffer.from(a.value).toString());
  }

  waitFor<T>(predicate: () => T | undefined | false | null, what = 'sotw client condition', timeoutMs = DEFAULT_TIMEOUT_MS): Promise<T> {
    return waitUntil(this.events, predicate, {
      timeoutMs,
      what,
      explain: () => this.responses.map((r) => `${r.type_url} v=${r.version_info} n=${r.nonce} [${SotwClient.payloads(r).join(', ')}]`).join('\n'),
      abort: () => (this.status ? `stream ended: ${this.status.code} ${this.status.details}` : undefined),
    });
  }

  /** Waits `ms` and fails if any response arrived meanwhile. */
  async expectNoResponse(ms = 300): Promise<void> {
    const n = this.responses.length;
    await new Promise((r) => setTimeout(r, ms));
    if (this.responses.length !== n) throw new Error(`expected no response, got ${this.responses.length - n}`);
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** Runs `fn` with a SotW client of `target`, closed when `fn` ends, however it ends. */
export async function withSotwClient<T>(target: string, fn: (client: SotwClient) => Promise<T>): Promise<T>;
export async function withSotwClient<T>(target: string, opts: SotwClientOptions, fn: (client: SotwClient) => Promise<T>): Promise<T>;
export async function withSotwClient<T>(
  target: string,
  optsOrFn: SotwClientOptions | ((client: SotwClient) => Promise<T>),
  maybeFn?: (client: SotwClient) => Promise<T>,
): Promise<T> {
  const [opts, fn] = typeof optsOrFn === 'function' ? [{}, optsOrFn] : [optsOrFn, maybeFn!];
  const client = new SotwClient(target, opts);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}
