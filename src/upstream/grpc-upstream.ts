import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log';
import type { RelayMetrics, UpstreamRequestKind } from '../metrics';
import { openDeltaStream } from '../proto/ads-service';
import { encodeDeltaAck } from '../proto/delta-request';
import { deltaRequestCodec, type DeltaDiscoveryRequest, type Node } from '../proto/messages';
import { mayNameCollection } from '../proto/xds-names';
import { insecureChannel, type ChannelSetup } from '../security/tls';
import { Backoff } from './backoff';
import { awaitReady, openClient } from './grpc-connect';
import { PoisonBisect, type NamePair } from './poison-bisect';
import { RejectedNames } from './rejected-names';
import { splitSubscriptionChange, type SubscriptionChange } from './request-split';
import { checkDeltaResponse } from './response-check';
import { ServerHistory } from './server-history';
import { byType, SubscriptionLedger } from './subscription-ledger';
import type { UpstreamPort, UpstreamServerStatus, UpstreamSink } from './types';

export type UpstreamState = 'idle' | 'connecting' | 'ready' | 'backoff' | 'closed';

/** google.rpc.Code INVALID_ARGUMENT: the code of the relay's NACKs. */
const NACK_CODE = 3;

/**
 * How a stream ends when the server or the connection goes away (a restart,
 * a reset, GOAWAY, a deadline): no evidence against what it was asked.
 */
const GONE_AWAY_CODES: ReadonlySet<number> = new Set([
  grpc.status.OK,
  grpc.status.CANCELLED,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.UNAVAILABLE,
]);

export interface GrpcUpstreamOptions {
  authority: string | null;
  /** `host:port` targets in failover order. */
  targets: string[];
  node: Node;
  sink: UpstreamSink;
  logger: Logger;
  metrics: RelayMetrics;
  /**
   * Minimum spacing of subscription requests per stream. A change after a
   * quiet period goes out at once; changes within the window ride together,
   * so a reconnect storm of N clients costs a handful of requests, not N.
   */
  batchMs?: number;
  connectTimeoutMs?: number;
  backoff?: Backoff;
  /** Largest DeltaDiscoveryRequest sent (the relay's --max-response-bytes); larger changes are split. */
  maxRequestBytes: number;
  /**
   * How long a stream must stay up after a subscription request for the
   * request to count as accepted (default 1000 ms). A stream that ends sooner
   * makes its names suspects (see poison-bisect.ts).
   */
  settleMs?: number;
  /** How long a rejected (poison) name is answered as rejected without asking the control plane again (default 5 min). */
  rejectedRetryMs?: number;
  /** Credentials and channel options per target (upstream/upstream-channels.ts); default plaintext. */
  channelFor?: (target: string) => ChannelSetup;
}

type Stream = grpc.ClientDuplexStream<Buffer, Buffer>;

/**
 * One authority's delta-ADS stream, all type URLs multiplexed, to the first
 * reachable server of its list. Keeps the desired subscription set and
 * replays it (with cached versions) on every new stream; checks every
 * response before the sink sees it (NACKing the bad ones), keeps every
 * request within `maxRequestBytes`, and finds and drops names that make the
 * control plane end the stream (poison-bisect.ts).
 */
export class GrpcUpstream implements UpstreamPort {
  readonly authority: string | null;
  readonly label: string;
  private state: UpstreamState = 'idle';
  /** Names wanted per type URL, and the changes not yet written. */
  private readonly ledger = new SubscriptionLedger();
  /** Poison names, until they may be asked upstream again; rejections owed to names subscribed again meanwhile. */
  private readonly rejected = new RejectedNames();
  private readonly bisect: PoisonBisect;
  private flushTimer: NodeJS.Timeout | undefined;
  /** Collections (globs, the wildcard) subscribed on the current stream → when their subscription first went out on it. */
  private readonly collectionsAsked = new Map<string, bigint>();
  private retryTimer: NodeJS.Timeout | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private rejectionTimer: NodeJS.Immediate | undefined;
  private client: grpc.Client | undefined;
  private stream: Stream | undefined;
  private nodeSent = false;
  /** Type URLs this stream has subscribed something of (a type's first request must name something). */
  private typesOpened = new Set<string>();
  /** The current stream has delivered a response: only then does the backoff start over. */
  private streamAnswered = false;
  private outage = false;
  private lastFlushAt = 0;
  private currentTarget = '';
  /** Per server: its last failure, last stream opened, last response (for /debug/upstreams). */
  private readonly history = new ServerHistory();
  private readonly backoff: Backoff;
  private readonly batchMs: number;
  private readonly connectTimeoutMs: number;
  private readonly maxRequestBytes: number;
  private readonly rejectedRetryMs: number;

  constructor(private readonly opts: GrpcUpstreamOptions) {
    this.authority = opts.authority;
    this.label = opts.authority ?? '(default)';
    this.backoff = opts.backoff ?? new Backoff();
    this.batchMs = opts.batchMs ?? 100;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 2000;
    this.maxRequestBytes = opts.maxRequestBytes;
    this.rejectedRetryMs = opts.rejectedRetryMs ?? 5 * 60_000;
    this.bisect = new PoisonBisect({
      settleMs: opts.settleMs ?? 1000,
      isDesired: (typeUrl, name) => this.ledger.has(typeUrl, name),
    });
    opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  get connected(): boolean {
    return this.state === 'ready';
  }

  get status(): {
    state: UpstreamState;
    target: string;
    types: Record<string, number>;
    suspectNames: number;
    rejectedNames: number;
    servers: UpstreamServerStatus[];
  } {
    const servers = this.history.status(this.opts.targets, this.currentTarget, this.state);
    return {
      state: this.state,
      target: this.currentTarget,
      types: this.ledger.counts(),
      suspectNames: this.bisect.heldCount,
      rejectedNames: this.rejected.size,
      servers,
    };
  }

  start(): void {
    if (this.state === 'idle') void this.connectRound();
  }

  subscriptionCount(): number {
    return this.ledger.size;
  }

  subscribe(typeUrl: string, name: string): void {
    if (this.rejected.isRejected(typeUrl, name, Date.now())) {
      this.reportRejectedLater(typeUrl, name);
      return;
    }
    this.ledger.subscribe(typeUrl, name);
    this.scheduleFlush();
  }

  unsubscribe(typeUrl: string, name: string): boolean {
    // A rejected name was dropped already: the control plane never took it.
    if (!this.ledger.unsubscribe(typeUrl, name)) return false;
    this.bisect.forget(typeUrl, name);
    this.scheduleFlush();
    return this.state !== 'closed';
  }

  refetch(typeUrl: string, name: string): void {
    if (this.ledger.refetch(typeUrl, name)) this.scheduleFlush();
  }

  canAnswer(typeUrl: string, name: string, receivedAt: bigint): boolean {
    const askedAt = this.collectionsAsked.get(askedKey(typeUrl, name));
    return askedAt !== undefined && askedAt < receivedAt;
  }

  close(): void {
    this.state = 'closed';
    clearTimeout(this.flushTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.probeTimer);
    if (this.rejectionTimer) clearImmediate(this.rejectionTimer);
    this.stream?.cancel();
    this.client?.close();
    this.stream = undefined;
    this.client = undefined;
    this.opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  // A method, not a field read, because the state changes across awaits.
  private isClosed(): boolean {
    return this.state === 'closed';
  }

  // --- rejected (poison) names ---------------------------------------------

  /** Answered on a later turn: the engine is in the middle of its own subscribe call. */
  private reportRejectedLater(typeUrl: string, name: string): void {
    this.rejected.owe(typeUrl, name);
    this.rejectionTimer ??= setImmediate(() => {
      this.rejectionTimer = undefined;
      for (const [t, names] of this.rejected.takeOwed()) this.tellRejected(t, names);
    });
  }

  private reject(suspects: NamePair[]): void {
    const until = Date.now() + this.rejectedRetryMs;
    // A name the control plane has answered is not what upsets it: it stays
    // subscribed (it was not held back, so the next stream replays it).
    const pairs = suspects.filter((p) => !this.opts.sink.hasServed(p.typeUrl, p.name));
    if (pairs.length < suspects.length) {
      this.opts.logger.info({ authority: this.label, names: suspects.length - pairs.length }, 'upstream: suspect names it has served before are kept');
    }
    for (const [typeUrl, names] of byType(pairs)) {
      for (const name of names) {
        this.ledger.drop(typeUrl, name);
        this.rejected.reject(typeUrl, name, until);
      }
      this.opts.metrics.upstreamRejectedNames.inc({ authority: this.label }, names.length);
      this.opts.logger.warn(
        { authority: this.label, target: this.currentTarget, typeUrl, names, retryInMs: this.rejectedRetryMs },
        'upstream ends the stream whenever these names are subscribed; dropped them and answered their clients as removed',
      );
      this.tellRejected(typeUrl, names);
    }
  }

  private tellRejected(typeUrl: string, names: string[]): void {
    try {
      this.opts.sink.onRejectedNames(this, typeUrl, names);
    } catch (err) {
      this.opts.logger.error({ authority: this.label, err }, 'failed to apply rejected upstream names');
    }
  }

  // --- requests --------------------------------------------------------------

  private scheduleFlush(): void {
    if (this.flushTimer || this.state !== 'ready') return;
    const wait = this.lastFlushAt + this.batchMs - Date.now();
    // Even "at once" waits a tick, so one client request's changes travel together.
    this.flushTimer = setTimeout(() => this.runFlush(), Math.max(0, wait));
  }

  private runFlush(): void {
    this.flushTimer = undefined;
    this.lastFlushAt = Date.now();
    this.flush();
  }

  /**
   * Every subscription change since the last flush, per type URL. During a
   * poison search new names queue behind the names under test instead, so a
   * stream that ends can still be blamed on one group.
   */
  private flush(): void {
    if (this.state !== 'ready') return;
    if (this.bisect.active) this.bisect.enqueue(this.ledger.takeSubscribes());
    const sent: NamePair[] = [];
    const changes = this.ledger.takeChanges();
    for (const change of changes) {
      this.sendChange(change);
      for (const name of change.subscribe) sent.push({ typeUrl: change.typeUrl, name });
    }
    this.bisect.recordSent(sent, performance.now());
    this.pump();
    this.tellUnsubscribed(changes);
  }

  /** The sink learns which deferred unsubscribes have gone out (or were dropped with the stream that had the names). */
  private tellUnsubscribed(changes: readonly SubscriptionChange[]): void {
    for (const { typeUrl, unsubscribe } of changes) {
      if (!unsubscribe?.length) continue;
      try {
        this.opts.sink.onUnsubscribed(this, typeUrl, unsubscribe);
      } catch (err) {
        this.opts.logger.error({ authority: this.label, err }, 'failed to apply upstream unsubscribes');
      }
    }
  }

  /** Writes one subscription change as as many requests as the size limit needs. */
  private sendChange(change: SubscriptionChange): void {
    this.noteAsked(change);
    if (!this.typesOpened.has(change.typeUrl)) {
      // The stream never subscribed these names, so there is nothing to take
      // back; and a type's first request with no names would read upstream as
      // the legacy wildcard.
      if (change.subscribe.length === 0) return;
      if (change.unsubscribe?.length) change = { ...change, unsubscribe: [] };
      this.typesOpened.add(change.typeUrl);
    }
    const node = this.nodeSent ? undefined : this.opts.node;
    const requests = splitSubscriptionChange(change, this.maxRequestBytes, node);
    for (const req of requests) this.send(req, 'subscribe');
  }

  /** Collections subscribed on this stream from now on (the first time only: asking again continues it); those unsubscribed, no more. */
  private noteAsked(change: SubscriptionChange): void {
    const now = process.hrtime.bigint();
    for (const name of change.subscribe) {
      if (!mayNameCollection(name)) continue;
      const key = askedKey(change.typeUrl, name);
      if (!this.collectionsAsked.has(key)) this.collectionsAsked.set(key, now);
    }
    if (change.unsubscribe) for (const name of change.unsubscribe) this.collectionsAsked.delete(askedKey(change.typeUrl, name));
  }

  private send(req: DeltaDiscoveryRequest, kind: UpstreamRequestKind): void {
    if (!this.stream) return;
    if (!this.nodeSent) {
      req.node = this.opts.node;
      this.nodeSent = true;
    }
    this.sendEncoded(deltaRequestCodec.encode(req), kind);
  }

  /** ACKs an upstream response; the stream's first request carries the node, so an ACK almost never does. */
  private ack(typeUrl: string, nonce: string): void {
    if (this.nodeSent) this.sendEncoded(encodeDeltaAck(typeUrl, nonce), 'ack');
    else this.send({ type_url: typeUrl, response_nonce: nonce }, 'ack');
  }

  private sendEncoded(bytes: Buffer, kind: UpstreamRequestKind): void {
    if (!this.stream) return;
    this.stream.write(bytes);
    this.opts.metrics.upstreamRequests.inc({ authority: this.label, kind });
  }

  /** Subscribes `pairs` with the versions the cache holds. */
  private sendWithVersions(pairs: NamePair[]): void {
    for (const [typeUrl, subscribe] of byType(pairs)) {
      this.sendChange({ typeUrl, subscribe, initialVersions: this.opts.sink.versionsFor(typeUrl, subscribe) });
    }
  }

  /** Drives a poison search: sends the next probe once the stream has confirmed what it sent before. */
  private pump(): void {
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    if (!this.stream || !this.bisect.active) return;
    const now = performance.now();
    const probe = this.bisect.nextProbe(now);
    if (probe) {
      this.opts.logger.debug({ authority: this.label, names: probe.length, held: this.bisect.heldCount }, 'upstream: probing suspect names');
      this.sendWithVersions(probe);
    }
    const wakeAt = this.bisect.wakeAt();
    if (wakeAt !== undefined) {
      this.probeTimer = setTimeout(() => this.pump(), Math.max(0, Math.ceil(wakeAt - now)));
      this.probeTimer.unref();
    } else if (!this.bisect.active) {
      this.opts.logger.info({ authority: this.label }, 'upstream: suspect names all resubscribed');
      this.scheduleFlush();
    }
  }

  // --- connection ------------------------------------------------------------

  private setState(state: UpstreamState): void {
    if (this.state === state || this.state === 'closed') return;
    const was = this.state;
    this.state = state;
    this.opts.metrics.upstreamConnected.set({ authority: this.label }, state === 'ready' ? 1 : 0);
    const log = { authority: this.label, target: this.currentTarget, from: was, to: state };
    // Warn once per outage, not once per retry.
    if (state === 'backoff' && !this.outage) {
      this.outage = true;
      const error = this.history.lastError;
      this.opts.logger.warn({ ...log, error }, `upstream unavailable${error ? `: ${error.message}` : ''}`);
    } else if (state === 'ready') {
      this.outage = false;
      this.opts.logger.info(log, 'upstream connected');
    } else {
      this.opts.logger.debug(log, 'upstream state');
    }
  }

  /** Tries each server in order; backs off after a full round fails. */
  private async connectRound(): Promise<void> {
    for (const target of this.opts.targets) {
      if (this.state === 'closed') return;
      this.currentTarget = target;
      this.setState('connecting');
      const channel = (this.opts.channelFor ?? insecureChannel)(target);
      const client = openClient(target, channel);
      try {
        await awaitReady(client, this.connectTimeoutMs);
      } catch (err) {
        client.close();
        // No stream ever opened: the channel's own failure, reported as gRPC does (UNAVAILABLE).
        this.history.failed(target, grpc.status.UNAVAILABLE, `${target}: ${(err as Error).message}`, Date.now());
        this.opts.logger.debug({ authority: this.label, target, err: (err as Error).message }, 'upstream server unreachable');
        continue;
      }
      if (this.isClosed()) {
        client.close();
        return;
      }
      this.openStream(client);
      return;
    }
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.state === 'closed') return;
    this.setState('backoff');
    this.opts.metrics.upstreamReconnects.inc({ authority: this.label });
    this.retryTimer = setTimeout(() => void this.connectRound(), this.backoff.next());
    this.retryTimer.unref();
  }

  private openStream(client: grpc.Client): void {
    this.client = client;
    const stream = openDeltaStream(client);
    this.stream = stream;
    this.nodeSent = false;
    this.typesOpened.clear();
    this.streamAnswered = false;
    let ended = false;
    const onEnd = (code: number, why: string): void => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) {
        this.stream = undefined;
        this.client = undefined;
        client.close();
        if (this.state !== 'closed') this.streamEnded(code, why);
      }
    };
    stream.on('data', (bytes: Buffer) => this.onData(bytes));
    stream.on('error', (err: grpc.ServiceError) => onEnd(err.code, `${grpc.status[err.code] ?? err.code}: ${err.details ?? err.message}`));
    stream.on('status', (s: grpc.StatusObject) => onEnd(s.code, `${grpc.status[s.code]}: ${s.details}`));
    stream.on('end', () => onEnd(grpc.status.OK, 'closed by server'));
    this.history.connected(this.currentTarget, Date.now());
    this.setState('ready');
    // The new stream starts from nothing: replay the subscription set with the
    // versions we hold (names under suspicion wait for their probe).
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const pending = this.ledger.takeSubscribes();
    if (this.bisect.active) this.bisect.enqueue(pending);
    const dropped = this.ledger.clearPending();
    // Nothing is subscribed on a new stream until it is asked for there.
    this.collectionsAsked.clear();
    this.bisect.streamOpened();
    const replay = this.ledger.wanted().filter((p) => !this.bisect.holds(p.typeUrl, p.name));
    this.sendWithVersions(replay);
    this.bisect.recordSent(replay, performance.now());
    this.pump();
    this.tellUnsubscribed(dropped);
  }

  private streamEnded(code: number, why: string): void {
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    const wasSearching = this.bisect.active;
    this.history.failed(this.currentTarget, code, why, Date.now());
    const rejected = this.bisect.streamEnded(performance.now(), !GONE_AWAY_CODES.has(code));
    this.opts.logger.warn({ authority: this.label, target: this.currentTarget, why }, 'upstream stream ended');
    if (rejected.length > 0) this.reject(rejected);
    if (this.bisect.active && !wasSearching) {
      this.opts.logger.warn(
        { authority: this.label, target: this.currentTarget, suspectNames: this.bisect.heldCount },
        'upstream stream ended soon after a subscription request; resubscribing those names apart to find any the control plane cannot take',
      );
    }
    this.scheduleRetry();
  }

  private onData(bytes: Buffer): void {
    const receivedAt = process.hrtime.bigint();
    this.history.responded(this.currentTarget, Date.now());
    this.opts.metrics.upstreamResponses.inc({ authority: this.label });
    if (!this.streamAnswered) {
      // The control plane is serving: a later failure starts from the shortest backoff again.
      this.streamAnswered = true;
      this.backoff.reset();
    }
    const checked = checkDeltaResponse(bytes);
    if (!checked.ok) {
      this.opts.metrics.upstreamNacks.inc({ authority: this.label, reason: checked.reason });
      this.opts.logger.warn(
        { authority: this.label, target: this.currentTarget, typeUrl: checked.typeUrl, nonce: checked.nonce, reason: checked.reason, detail: checked.message },
        'upstream response rejected (NACKed); keeping the previous state',
      );
      if (checked.nonce && checked.typeUrl) {
        this.send(
          { type_url: checked.typeUrl, response_nonce: checked.nonce, error_detail: { code: NACK_CODE, message: checked.message } },
          'nack',
        );
      }
      return;
    }
    try {
      this.opts.sink.onResponse(this, {
        typeUrl: checked.typeUrl,
        resources: checked.resources,
        removed: checked.removed,
        errors: checked.errors,
        receivedAt,
      });
    } catch (err) {
      this.opts.logger.error({ authority: this.label, err }, 'failed to apply upstream response');
    }
    // ACK what passed the checks (the engine applies it in turn, a large update in slices): the relay keeps serving the last good state either way.
    if (checked.nonce) this.ack(checked.typeUrl, checked.nonce);
  }
}

function askedKey(typeUrl: string, name: string): string {
  return `${typeUrl}\n${name}`;
}
