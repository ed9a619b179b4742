import type { ClientStatusTally } from './status-tally';
import * as grpc from '@grpc/grpc-js';
import type * as http2 from 'node:http2';
import type { SubscriptionEngine } from '../engine/engine';
import { FanOut } from '../engine/fan-out';
import type { Logger } from '../log';
import { WarnLimiter, type WarnBudget } from '../log-limit';
import type { RelayMetrics } from '../metrics';
import type { Node } from '../proto/messages';
import { RequestError, type ErrorDetail } from '../proto/requests';
import { TTL_CLIENT_FEATURE } from '../proto/xds-names';
import type { StreamLimits } from '../security/limits';
import type { TokenBudget } from '../security/token-bucket';
import { readRequestFrames, type PartialRequest, type RequestFrameSink } from './framing';
import { detachRequestReader, http2StreamOf, releaseCallMetadata, unfinishedBytes } from './grpc-call-internals';
import { sendGoaway } from './goaway';
import type { RequestScheduler, ScheduledWork } from './request-scheduler';
import type { OutgoingResponse } from './outgoing';
import type { Protocol } from './protocol-rules';
import type { Severity } from './status-source';
import { SubscriptionState, type ResponseBuilder, type StreamPort } from './subscription-state';

export interface AdsStreamOptions {
  engine: SubscriptionEngine;
  builder: ResponseBuilder;
  metrics: RelayMetrics;
  logger: Logger;
  /**
   * The client's address (address:port) from the HTTP/2 session its stream
   * came on, read more cheaply than grpc-js's `getPeer()` (the connection
   * guard's); undefined, or absent: the call's getPeer().
   */
  peerOf?(session: http2.Http2Session | undefined): string | undefined;
  /** The client's identity from its connection (verified certificate), or from its node id where policy allows. */
  identify?(call: grpc.ServerDuplexStream<Buffer, Buffer>, nodeId: string | undefined): string | undefined;
  /** What one stream may cost (names, subscriptions, change rate); absent = unbounded. */
  limits?: StreamLimits;
  /** The subscription-change bucket's rule (--subscription-rate / --subscription-burst), one for every stream; present with `limits`. */
  changeBudget?: TokenBudget;
  /** Relay-wide, for warnings every stream can cause once (its ending), so many streams cannot flood the log either. */
  relayWarnings?: WarnLimiter;
  /** A stream's own repeated warnings (refusals, NACKs) are summarized at most this often (default 10 s). */
  logRepeatIntervalMs?: number;
  /** Relay-wide cap on the warn lines the streams' own warnings write. */
  warnBudget?: WarnBudget;
  /** Fair turns for large requests and for streams with work waiting (request-scheduler.ts). */
  scheduler: RequestScheduler;
  /** Where this stream's states report status changes (absent in tests that need no status figures). */
  statusTally?: ClientStatusTally;
  onClose(stream: AdsStream): void;
}

/**
 * A request up to this size is applied as it arrives, when nothing waits for a
 * turn (its stream's or anyone's); a larger one, or any while streams wait,
 * waits for a turn. Under load the event loop's reading of sockets then does
 * no request work: an upstream update is read and sent on without waiting for
 * every request that arrived beside it.
 */
const INLINE_REQUEST_BYTES = 16 * 1024;
/** Names of one subscribe list applied per turn: a few milliseconds of work. */
export const SUBSCRIBE_SLICE = 256;
/** A stream with this many requests waiting stops being read (HTTP/2 flow control holds its client back). */
const PAUSE_AT_WAITING = 4;

type ServerCall = grpc.ServerDuplexStream<Buffer, Buffer>;

/**
 * The stream an open call belongs to, and the HTTP/2 stream whose requests
 * the relay reads itself, for the listeners every stream shares
 * (AdsStream.onCall…, onRequestFrame): a property under a symbol of the
 * relay's own on each of them. A weak map did the same with an entry per
 * stream in a table that grows by tens of thousands in a reconnect storm,
 * and work for the garbage collector's ephemeron pass on every collection.
 */
const ADS_STREAM = Symbol('xdstp-relay ADS stream');
type Tagged<T> = T & { [ADS_STREAM]?: AdsStream };
/** requestMax of a stream whose requests grpc-js reads. */
const READ_BY_GRPC = -2;

const NO_STATES: readonly SubscriptionState[] = [];
/** The response headers and the trailers carry no metadata of the relay's own (read, never changed, by grpc-js). */
const NO_METADATA = new grpc.Metadata();

let nextStreamId = 1;
/**
 * The peer of the stream opened last: streams multiplexed on one connection
 * arrive in runs and share its string rather than each keeping the copy
 * grpc-js makes per call (~60 bytes per idle stream).
 */
let lastPeer = '';
/** Whether grpc-js lets a cut-off request be noticed (asked of the first stream). */
let truncationChecked = false;

/**
 * One downstream ADS stream, either protocol: the gRPC call's lifecycle,
 * writes with back-pressure, and one SubscriptionState per type URL. The
 * protocol subclasses only decode requests and apply their rules.
 */
export abstract class AdsStream implements StreamPort, ScheduledWork, RequestFrameSink {
  readonly id = nextStreamId++;
  readonly peer: string;
  readonly openedAt = Date.now();
  abstract readonly protocol: Protocol;
  node: Node | undefined;
  supportsTtl = false;
  identity: string | undefined;
  /** One state per type URL, in the order of each type's first request: a list (a stream asks for few types), made on the first. */
  private typeStates: SubscriptionState[] | undefined;
  blocked = false;
  private closed = false;
  /** Warnings this stream's input causes (refused names, NACKs): bounded by time, not by input. Made on the first. */
  private warningLimiter: WarnLimiter | undefined;
  /** This stream's subscription-change bucket, as the level `opts.changeBudget` reads (0: full). */
  private changeLevel = 0;
  lastNonce = '';
  lastAckedNonce = '';
  /** Requests that arrived while earlier work of this stream was waiting, in order; none (most of a stream's life): no list. */
  private waitingRequests: Buffer[] | undefined;
  /** The rest of a request being applied in slices; it runs before the next waiting request. */
  private continuation: (() => boolean) | undefined;
  /** This stream is in the scheduler's queue. */
  private queued = false;
  private paused = false;
  /** The HTTP/2 stream under the call, which framed responses are written to directly (proto/message-frame.ts); undefined: through the call. */
  private readonly h2: http2.ServerHttp2Stream | undefined;
  /** The largest request accepted when the relay reads the HTTP/2 stream itself (-1: any); READ_BY_GRPC: grpc-js reads it. */
  private readonly requestMax: number = READ_BY_GRPC;
  /** A request split across DATA frames, as far as it has arrived (the relay reading the stream). */
  private partial: PartialRequest | undefined;

  constructor(
    protected readonly call: grpc.ServerDuplexStream<Buffer, Buffer>,
    protected readonly opts: AdsStreamOptions,
  ) {
    this.h2 = http2StreamOf(call);
    const peer = opts.peerOf?.(this.h2?.session) ?? call.getPeer();
    this.peer = peer === lastPeer ? lastPeer : (lastPeer = peer);
    this.identity = opts.identify?.(call, undefined);
    releaseCallMetadata(call, NO_METADATA);
    (call as Tagged<ServerCall>)[ADS_STREAM] = this;
    const reader = detachRequestReader(call);
    if (reader) {
      this.requestMax = reader.maxBytes;
      (reader.h2 as Tagged<http2.ServerHttp2Stream>)[ADS_STREAM] = this;
      // grpc-js holds the stream paused until the call is read (the 'data' listener below): then it flows here.
      reader.h2.on('data', AdsStream.onRequestFrame);
    }
    call.on('data', AdsStream.onCallData);
    call.on('end', AdsStream.onCallEnd);
    call.on('error', AdsStream.onCallError);
    call.on('cancelled', AdsStream.onCallCancelled);
    call.on('close', AdsStream.onCallClose);
    call.on('drain', AdsStream.onCallDrain);
    if (!truncationChecked) {
      truncationChecked = true;
      if (unfinishedBytes(call) === undefined) opts.logger.warn('this @grpc/grpc-js hides its message decoder: a request cut off by the end of a stream is not detected');
    }
  }

  // The call's listeners: one function per event for every stream (an emitter
  // calls its listeners with itself as `this`), not closures made per stream.

  private static onCallData(this: Tagged<ServerCall>, bytes: Buffer): void {
    this[ADS_STREAM]?.onRequest(bytes);
  }

  private static onRequestFrame(this: Tagged<http2.ServerHttp2Stream>, chunk: Buffer): void {
    const stream = this[ADS_STREAM];
    if (stream && !stream.closed) stream.partial = readRequestFrames(chunk, stream.partial, stream.requestMax, stream);
  }

  private static onCallEnd(this: Tagged<ServerCall>): void {
    const stream = this[ADS_STREAM];
    // A message cut off by the client's end of stream is a malformed request, not a clean close.
    const missing = stream?.unfinishedRequestBytes();
    if (stream && missing) AdsStream.onTruncated(stream, missing);
    else stream?.close('client half-closed');
    this.end();
  }

  private static onCallError(this: Tagged<ServerCall>, err: Error): void {
    this[ADS_STREAM]?.close(`stream error: ${err.message}`);
  }

  private static onCallCancelled(this: Tagged<ServerCall>): void {
    this[ADS_STREAM]?.close('cancelled');
  }

  private static onCallClose(this: Tagged<ServerCall>): void {
    this[ADS_STREAM]?.close('closed');
  }

  private static onCallDrain(this: Tagged<ServerCall>): void {
    this[ADS_STREAM]?.onDrain();
  }

  private static onTruncated(stream: AdsStream, missing: number): void {
    stream.opts.metrics.badRequests.inc({ reason: 'truncated' });
    stream.fail(grpc.status.INVALID_ARGUMENT, `request message cut off by the end of the stream (${missing} bytes missing)`);
  }

  /** What this stream's requests are read from: held back (HTTP/2 flow control) while too many wait. */
  private get requestSource(): { pause(): void; resume(): void } | undefined {
    return this.requestMax === READ_BY_GRPC ? this.call : this.h2;
  }

  /** Bytes the request being received still lacks (0: none is); undefined when grpc-js reads the stream and hides its decoder. */
  private unfinishedRequestBytes(): number | undefined {
    if (this.requestMax === READ_BY_GRPC) return unfinishedBytes(this.call);
    return this.partial?.missing ?? 0;
  }

  // --- RequestFrameSink: requests read off the HTTP/2 stream -----------------

  get open(): boolean {
    return !this.closed;
  }

  onOversized(length: number, max: number): void {
    this.partial = undefined;
    // What grpc-js says of a message over its grpc.max_receive_message_length.
    this.fail(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs ${max})`);
  }

  private get warnings(): WarnLimiter {
    return (this.warningLimiter ??= new WarnLimiter(this.opts.logger, this.opts.logRepeatIntervalMs, { client: this.id, peer: this.peer }, this.opts.warnBudget));
  }

  /** The stream's state per type URL, in the order of each type's first request. */
  get states(): readonly SubscriptionState[] {
    return this.typeStates ?? NO_STATES;
  }

  get nodeId(): string {
    return this.node?.id ?? '';
  }

  get isSlow(): boolean {
    return this.blocked;
  }

  get nacks(): number {
    let n = 0;
    for (const s of this.states) n += s.nacks;
    return n;
  }

  /** Ends the stream with a status; the client's subscriptions are released. */
  fail(code: grpc.status, details: string): void {
    if (this.closed) return;
    const fields = { client: this.id, peer: this.peer, node: this.nodeId, code: grpc.status[code], details };
    if (this.opts.relayWarnings) this.opts.relayWarnings.warn(`stream ended: ${grpc.status[code]}`, fields, 'ending client stream');
    else this.opts.logger.warn(fields, 'ending client stream');
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

  // --- StreamPort -------------------------------------------------------------

  send(_state: SubscriptionState, response: OutgoingResponse): void {
    if (this.closed) return;
    const { metrics } = this.opts;
    const first = this.lastNonce === '';
    this.lastNonce = response.nonce;
    const tally = metrics.forType(response.typeUrl);
    tally.responses++;
    tally.resources += response.adds.length;
    metrics.tally.bytesSent += response.bytes.length;
    const h2 = this.h2;
    if (h2 === undefined) {
      if (!this.call.write(response.bytes)) this.blocked = true;
      return;
    }
    // The call's headers go first, through grpc-js (its own first write would send them).
    if (first) this.call.sendMetadata(NO_METADATA);
    // Ended or reset: the call is over, and its close is on its way.
    if (!h2.writable) return;
    if (!h2.write(response.framed) && !this.blocked) {
      this.blocked = true;
      h2.once('drain', () => this.onDrain());
    }
  }

  refused(state: SubscriptionState, name: string, reason: string, message: string): void {
    // The first per reason at warn, then a summary now and then; every one at debug.
    this.warnings.warn(
      `refused: ${reason}`,
      { client: this.id, node: this.nodeId, identity: this.identity, typeUrl: state.typeUrl, name, reason, detail: message },
      'subscription refused; answered as not existing',
    );
  }

  coalesced(): void {
    this.opts.metrics.coalescedUpdates.inc();
  }

  statusChanged(state: SubscriptionState): void {
    this.opts.statusTally?.changed(state);
  }

  /** This stream's status for one type as the client-status counts have it (constant time); undefined while it subscribes nothing there. */
  typeStatus(typeUrl: string): Severity | undefined {
    const state = this.stateOf(typeUrl);
    return state && this.opts.statusTally?.statusOf(state);
  }

  // --- requests -------------------------------------------------------------

  /** One whole request, from the HTTP/2 stream (RequestFrameSink) or from grpc-js: applied now, or when its turn comes. */
  onRequest(bytes: Buffer): void {
    if (this.closed) return;
    if (!this.queued && bytes.length <= INLINE_REQUEST_BYTES && this.opts.scheduler.waiting === 0) {
      this.apply(bytes);
      return;
    }
    // A request read off the HTTP/2 stream is a view of the socket read it came in, which can hold other
    // streams' frames too: one that waits is copied, so it keeps only its own bytes.
    const kept = bytes.byteLength * 2 < bytes.buffer.byteLength ? Buffer.from(bytes) : bytes;
    if (this.waitingRequests) this.waitingRequests.push(kept);
    else this.waitingRequests = [kept];
    if (this.waitingRequests.length >= PAUSE_AT_WAITING && !this.paused) {
      this.paused = true;
      this.requestSource?.pause();
    }
    this.takeTurn();
  }

  /** One slice of this stream's waiting work (ScheduledWork): the request in progress, else the next request. */
  runSlice(): boolean {
    if (!this.closed) {
      if (this.continuation) {
        const more = this.guarded(this.continuation);
        if (!more) this.continuation = undefined;
      } else {
        const next = this.waitingRequests?.shift();
        if (next) this.apply(next);
        if (this.paused && (this.waitingRequests?.length ?? 0) < PAUSE_AT_WAITING && !this.closed) {
          this.paused = false;
          this.requestSource?.resume();
        }
      }
    }
    this.queued = !this.closed && (this.continuation !== undefined || (this.waitingRequests?.length ?? 0) > 0);
    if (!this.queued) this.waitingRequests = undefined;
    return this.queued;
  }

  private takeTurn(): void {
    if (this.queued) return;
    this.queued = true;
    this.opts.scheduler.enqueue(this);
  }

  /**
   * Subscribes `names` a slice per turn when there are many, so one large
   * request does not hold up other clients: the first slice now (inside
   * `fan`), each further one in its own round. Duplicates count once.
   */
  protected subscribeInSlices(state: SubscriptionState, names: readonly string[], initial: ReadonlyMap<string, string> | undefined, fan: FanOut): void {
    const apply = (slice: readonly string[], round: FanOut, distinct: boolean): void => {
      const allowed = this.refuseTooLong(state, slice, round);
      if (allowed.length > 0) state.subscribe(allowed, round, initial, distinct);
    };
    if (names.length <= SUBSCRIBE_SLICE) {
      apply(names, fan, false);
      return;
    }
    const all = [...new Set(names)];
    apply(all.slice(0, SUBSCRIBE_SLICE), fan, true);
    let offset = SUBSCRIBE_SLICE;
    if (offset >= all.length) return;
    this.continuation = () => {
      const round = new FanOut();
      apply(all.slice(offset, offset + SUBSCRIBE_SLICE), round, true);
      round.finish();
      offset += SUBSCRIBE_SLICE;
      return offset < all.length;
    };
    this.takeTurn();
  }

  /** Decodes and applies one request (no closure: a client sends one per response it ACKs). */
  private apply(bytes: Buffer): void {
    try {
      this.handle(bytes);
    } catch (err) {
      this.failed(err);
    }
  }

  /** Runs a slice of request work; input the relay will not act on, or a failure, ends this stream only. */
  private guarded(work: () => boolean): boolean {
    try {
      return work();
    } catch (err) {
      this.failed(err);
      return false;
    }
  }

  /** Request work threw: the stream ends, INVALID_ARGUMENT for a bad request, INTERNAL for the relay's own failure. */
  private failed(err: unknown): void {
    if (err instanceof RequestError) {
      this.opts.metrics.badRequests.inc({ reason: 'undecodable' });
      this.fail(grpc.status.INVALID_ARGUMENT, err.message);
      return;
    }
    this.opts.logger.error({ client: this.id, err }, 'failed to handle client request');
    this.fail(grpc.status.INTERNAL, 'internal error while handling the request');
  }

  /** Decodes and applies one request. Throws RequestError for input the relay will not act on. */
  protected abstract handle(bytes: Buffer): void;

  /** The first request of a stream carries `node`; later ones may omit it. */
  protected noteNode(node: Node | undefined): void {
    if (this.node || !node) return;
    this.node = node;
    this.supportsTtl = this.protocol === 'delta' && (node.client_features ?? []).includes(TTL_CLIENT_FEATURE);
    this.identity = this.opts.identify?.(this.call, node.id) ?? this.identity;
    this.opts.logger.info(
      { client: this.id, peer: this.peer, node: this.nodeId, protocol: this.protocol, ttl: this.supportsTtl },
      'client stream opened',
    );
  }

  /** The policy changed (node ids may have become identities, or stopped being them). */
  reidentify(): void {
    this.identity = this.opts.identify?.(this.call, this.node?.id) ?? undefined;
  }

  /**
   * Request-level limits, checked before a request is applied: the rate of
   * subscription changes and the subscriptions the stream would hold. A
   * breach ends this stream only, with RESOURCE_EXHAUSTED. (A name that is
   * too long is refused alone: see refuseTooLong.)
   */
  protected withinLimits(changes: number, added: number): boolean {
    const limits = this.opts.limits;
    if (!limits) return true;
    const budget = this.opts.changeBudget;
    if (changes > 0 && budget) {
      const level = budget.take(this.changeLevel, changes, performance.now());
      if (Number.isNaN(level)) return this.exhausted('subscription_rate', `more than ${budget.ratePerSecond} subscription changes per second`);
      this.changeLevel = level;
    }
    if (added > 0) {
      let held = added;
      for (const s of this.states) held += s.names.size;
      if (held > limits.maxSubscriptionsPerStream) {
        return this.exhausted('subscriptions_per_stream', `more than ${limits.maxSubscriptionsPerStream} subscriptions on one stream`);
      }
    }
    return true;
  }

  /**
   * Names longer than --max-name-length are refused one by one, like a name
   * no upstream serves (answered as not existing, counted, logged); the
   * request's other names and the stream go on. Returns the names left.
   */
  protected refuseTooLong(state: SubscriptionState, names: readonly string[], fan: FanOut): readonly string[] {
    const max = this.opts.limits?.maxNameLength;
    if (max === undefined) return names;
    let kept: string[] | undefined;
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      // A UTF-16 unit is at most 3 UTF-8 bytes: most names need no byte count.
      if (name.length * 3 <= max || Buffer.byteLength(name) <= max) {
        kept?.push(name);
        continue;
      }
      kept ??= names.slice(0, i);
      this.opts.metrics.security.limitExceeded.inc({ limit: 'name_length' });
      state.refuse(name, 'name_length', `a resource name is longer than ${max} bytes`, fan);
    }
    return kept ?? names;
  }

  private exhausted(limit: string, why: string): false {
    this.opts.metrics.security.limitExceeded.inc({ limit });
    this.fail(grpc.status.RESOURCE_EXHAUSTED, `xdstp-relay: ${why}`);
    return false;
  }

  protected requireTypeUrl(typeUrl: string): boolean {
    if (typeUrl !== '') return true;
    this.opts.metrics.badRequests.inc({ reason: 'missing_type_url' });
    this.fail(grpc.status.INVALID_ARGUMENT, 'type_url is required on the aggregated (ADS) stream');
    return false;
  }

  /** The stream's state for `typeUrl`, made on its first request (see isNew). */
  protected stateFor(typeUrl: string): SubscriptionState {
    let state = this.stateOf(typeUrl);
    if (state) return state;
    state = new SubscriptionState(typeUrl, this, this.opts.engine, this.opts.builder);
    if (this.typeStates) this.typeStates.push(state);
    else this.typeStates = [state];
    return state;
  }

  /** The stream's state for `typeUrl`, if it has had a request. */
  protected stateOf(typeUrl: string): SubscriptionState | undefined {
    const states = this.typeStates;
    if (states) for (const state of states) if (state.typeUrl === typeUrl) return state;
    return undefined;
  }

  /**
   * Applies the ACK or NACK a request carries (its response_nonce, and
   * error_detail for a NACK) to the type's state; a NACK is counted and
   * logged. False when the protocol ignores the whole request as stale.
   */
  protected acknowledge(state: SubscriptionState, nonce: string, errorDetail: ErrorDetail | undefined): boolean {
    const outcome = state.acknowledge(nonce, errorDetail?.message);
    // Usually the last response's: keep the string already held rather than the request's copy.
    if (outcome === 'ack') this.lastAckedNonce = nonce === this.lastNonce ? this.lastNonce : nonce;
    else if (outcome === 'nack') {
      const { metrics } = this.opts;
      metrics.nacks.inc({ type: metrics.typeLabel(state.typeUrl) });
      const error = errorDetail?.message;
      this.warnings.warn('nack', { client: this.id, node: this.nodeId, typeUrl: state.typeUrl, nonce, error }, 'client NACK');
    }
    return outcome !== 'stale';
  }

  private onDrain(): void {
    this.blocked = false;
    for (const state of this.states) {
      if (this.closed || this.blocked) return;
      state.drainBacklog();
    }
  }

  private close(why: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const state of this.states) {
      state.close();
      this.opts.statusTally?.closed(state);
    }
    this.warningLimiter?.close();
    this.opts.logger.info({ client: this.id, peer: this.peer, node: this.nodeId, protocol: this.protocol, why }, 'client stream closed');
    this.opts.onClose(this);
  }
}
