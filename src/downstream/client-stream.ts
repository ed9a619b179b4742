import * as grpc from '@grpc/grpc-js';
import { makeVariant, type Variant } from '../cache/memory-cache';
import type { Hub } from '../hub/hub';
import { ClientView, type ClientPort, type OutgoingResponse } from '../hub/types';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { encodeDeltaResponse } from '../proto/delta-response';
import { deltaRequestCodec, type DeltaDiscoveryRequest, type Node } from '../proto/messages';
import { sendGoaway } from './goaway';

export const TTL_CLIENT_FEATURE = 'xds.config.supports-resource-ttl';

/** Types whose initial request without names means "everything" (legacy wildcard, LDS/CDS). */
const LEGACY_WILDCARD_TYPES = new Set([
  'type.googleapis.com/envoy.config.listener.v3.Listener',
  'type.googleapis.com/envoy.config.cluster.v3.Cluster',
]);

let nextStreamId = 1;

/** A held-back removal in a slow client's backlog. */
const REMOVED = null;

export interface ClientStreamOptions {
  hub: Hub;
  metrics: RelayMetrics;
  logger: Logger;
  hasDefaultUpstream: boolean;
  onClose(stream: ClientStream): void;
}

/**
 * One downstream delta-ADS stream: decodes requests into subscribe /
 * unsubscribe / ACK / NACK per type URL, and writes responses, coalescing
 * them (latest version per name wins) while the client is not reading.
 */
export class ClientStream implements ClientPort {
  readonly id = nextStreamId++;
  readonly peer: string;
  readonly openedAt = Date.now();
  node: Node | undefined;
  private supportsTtl = false;
  readonly views = new Map<string, ClientView>();
  private blocked = false;
  private backlog: Map<ClientView, Map<string, Variant | typeof REMOVED>> | undefined;
  private closed = false;
  nacks = 0;
  lastNonce = '';
  lastAckedNonce = '';

  constructor(
    private readonly call: grpc.ServerDuplexStream<Buffer, Buffer>,
    private readonly opts: ClientStreamOptions,
  ) {
    this.peer = call.getPeer();
    call.on('data', (bytes: Buffer) => this.onData(bytes));
    call.on('end', () => {
      this.close('client half-closed');
      call.end();
    });
    call.on('error', (err: Error) => this.close(`stream error: ${err.message}`));
    call.on('cancelled', () => this.close('cancelled'));
    call.on('close', () => this.close('closed'));
    call.on('drain', () => this.drain());
  }

  get nodeId(): string {
    return this.node?.id ?? '';
  }

  get isSlow(): boolean {
    return this.blocked;
  }

  /** Ends the stream with a status; the client's subscriptions are released. */
  fail(code: grpc.status, details: string): void {
    if (this.closed) return;
    this.opts.logger.warn({ client: this.id, peer: this.peer, node: this.nodeId, code: grpc.status[code], details }, 'ending client stream');
    this.close(details);
    // grpc-js turns an 'error' emitted on a server stream into the call's final status.
    this.call.emit('error', { code, details, metadata: new grpc.Metadata() });
  }

  /**
   * Sends the client away so it reconnects, to another relay (drain,
   * shutdown): GOAWAY on its connection, then the stream ends with
   * UNAVAILABLE, the status xDS clients retry on. Writes already queued are
   * flushed before the status.
   */
  goAway(reason: string): void {
    if (this.closed) return;
    this.close(reason);
    sendGoaway(this.call);
    this.call.emit('error', { code: grpc.status.UNAVAILABLE, details: `xdstp-relay: ${reason}`, metadata: new grpc.Metadata() });
  }

  push(view: ClientView, response: OutgoingResponse): void {
    if (this.closed) return;
    if (this.blocked) {
      this.coalesce(view, response);
      return;
    }
    this.write(response);
  }

  private write(response: OutgoingResponse): void {
    const { metrics } = this.opts;
    this.lastNonce = response.nonce;
    const counters = metrics.forType(response.typeUrl);
    counters.responses.inc();
    if (response.adds.length > 0) counters.resources.inc(response.adds.length);
    metrics.bytesSent.inc(response.bytes.length);
    if (!this.call.write(response.bytes)) this.blocked = true;
  }

  private coalesce(view: ClientView, response: OutgoingResponse): void {
    this.backlog ??= new Map();
    let names = this.backlog.get(view);
    if (!names) this.backlog.set(view, (names = new Map()));
    for (const v of response.adds) names.set(v.name, v);
    for (const n of response.removes) names.set(n, REMOVED);
    this.opts.metrics.coalescedUpdates.inc();
  }

  /** The client caught up: send each type's backlog as one response. */
  private drain(): void {
    this.blocked = false;
    const backlog = this.backlog;
    if (!backlog) return;
    this.backlog = undefined;
    for (const [view, names] of backlog) {
      if (this.closed) return;
      if (this.blocked) {
        // Still slow: keep the rest for the next drain.
        this.backlog ??= new Map();
        this.backlog.set(view, names);
        continue;
      }
      const adds: Variant[] = [];
      const removes: string[] = [];
      for (const [name, v] of names) {
        if (v === REMOVED) removes.push(name);
        else adds.push(makeVariant(v.name, v.version, v.bytes));
      }
      const nonce = this.opts.hub.nextNonce();
      const bytes = encodeDeltaResponse(view.typeUrl, adds.map((a) => a.bytes), removes, nonce);
      this.write({ typeUrl: view.typeUrl, nonce, bytes, adds, removes });
    }
  }

  private onData(bytes: Buffer): void {
    if (this.closed) return;
    let req: DeltaDiscoveryRequest;
    try {
      req = deltaRequestCodec.decode(bytes);
    } catch (err) {
      this.opts.metrics.badRequests.inc({ reason: 'undecodable' });
      this.fail(grpc.status.INVALID_ARGUMENT, `undecodable DeltaDiscoveryRequest: ${(err as Error).message}`);
      return;
    }
    try {
      this.handle(req);
    } catch (err) {
      this.opts.logger.error({ client: this.id, err }, 'failed to handle client request');
      this.fail(grpc.status.INTERNAL, 'internal error while handling the request');
    }
  }

  private handle(req: DeltaDiscoveryRequest): void {
    const { hub, metrics, logger } = this.opts;
    if (!this.node && req.node) {
      this.node = req.node;
      this.supportsTtl = (req.node.client_features ?? []).includes(TTL_CLIENT_FEATURE);
      logger.info({ client: this.id, peer: this.peer, node: this.nodeId, ttl: this.supportsTtl }, 'client stream opened');
    }
    const typeUrl = req.type_url ?? '';
    if (typeUrl === '') {
      metrics.badRequests.inc({ reason: 'missing_type_url' });
      this.fail(grpc.status.INVALID_ARGUMENT, 'DeltaDiscoveryRequest.type_url is required on the aggregated (ADS) stream');
      return;
    }
    let view = this.views.get(typeUrl);
    const first = view === undefined;
    if (!view) {
      view = new ClientView(this, typeUrl, this.supportsTtl);
      this.views.set(typeUrl, view);
    }
    if (req.response_nonce) {
      if (req.error_detail) {
        this.nacks++;
        metrics.nacks.inc({ type: metrics.typeLabel(typeUrl) });
        logger.warn(
          { client: this.id, node: this.nodeId, typeUrl, nonce: req.response_nonce, error: req.error_detail.message ?? '' },
          'client NACK',
        );
      } else {
        this.lastAckedNonce = req.response_nonce;
      }
    }
    let subscribe = req.resource_names_subscribe ?? [];
    // Copied only when legacy wildcard handling appends to it; a plain ACK allocates nothing here.
    let unsubscribe = req.resource_names_unsubscribe ?? [];
    const initial = first ? req.initial_resource_versions : undefined;
    if (first && subscribe.length === 0 && LEGACY_WILDCARD_TYPES.has(typeUrl) && this.opts.hasDefaultUpstream) {
      view.implicitWildcard = true;
      subscribe = ['*'];
    } else if (view.implicitWildcard && subscribe.length > 0 && !subscribe.includes('*')) {
      // Naming resources explicitly ends legacy wildcard mode.
      view.implicitWildcard = false;
      unsubscribe = [...unsubscribe, '*'];
    }
    if (unsubscribe.length > 0) hub.unsubscribe(view, unsubscribe);
    if (initial && Object.keys(initial).length > 0) hub.setInitialVersions(view, initial);
    if (subscribe.length > 0 || initial) hub.subscribe(view, subscribe, initial ? Object.keys(initial) : undefined);
  }

  private close(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.backlog = undefined;
    for (const view of this.views.values()) this.opts.hub.dropView(view);
    this.opts.logger.info({ client: this.id, peer: this.peer, node: this.nodeId, why }, 'client stream closed');
    this.opts.onClose(this);
  }
}
