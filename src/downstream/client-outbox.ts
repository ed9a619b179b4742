import type { Variant } from '../cache/memory-cache';
import type { FanOut, FanOutTarget } from '../engine/fan-out';
import type { Subscription } from '../engine/subscription';
import type { ResourceErrorInfo } from '../proto/resource-error';
import type { AckLedger } from './ack-ledger';
import type { FirstAnswerWait } from './first-answer-wait';
import { TOLD_ABSENT, type OutgoingResponse, type Pending } from './outgoing';

/** The stream the outbox sends on, as the per-client state's StreamPort offers it. */
export interface OutboxStream<Client> {
  /** True while the client is not reading: responses are coalesced. */
  readonly blocked: boolean;
  send(client: Client, response: OutgoingResponse): void;
  coalesced(): void;
  statusChanged?(client: Client): void;
}

/** The protocol's response builder, as the per-client state's ResponseBuilder offers it. */
export interface OutboxBuilder<Client> {
  build(client: Client, pending: Pending, fan: FanOut | undefined): OutgoingResponse[];
}

const NO_NAMES: readonly string[] = [];
const NO_ERRORS: readonly ResourceErrorInfo[] = [];

/**
 * What one client is about to be told, for one type URL: the changes queued
 * in the current fan-out round, settled against what the client will hold
 * (the ledger's `held`) and, when the round ends, encoded by the protocol's
 * builder and sent — or held back, while the client is slow (the latest
 * change per name wins) or while a state of the world waits for the
 * upstream's first answer (first-answer-wait.ts). `Client` is the
 * per-client state it belongs to, handed to the stream and the builder.
 */
export class ClientOutbox<Client extends FanOutTarget> {
  private pending: Pending | undefined;
  /** The round last told of this client's pending changes. */
  private pendingRound: FanOut | undefined;
  private backlog: Map<string, Variant | null> | undefined;
  private backlogErrors: ResourceErrorInfo[] | undefined;
  private readonly held: Map<string, string>;

  constructor(
    private readonly client: Client,
    private readonly stream: OutboxStream<Client>,
    private readonly builder: OutboxBuilder<Client>,
    private readonly ledger: AckLedger,
    /** Name → what the client has, for full-state responses (see SubscriptionState.world). */
    private readonly world: Map<string, Variant> | undefined,
    /** For full-state responses: holds the state back until the upstream answered. */
    private readonly wait: FirstAnswerWait | undefined,
  ) {
    this.held = ledger.held;
  }

  // --- this round's changes ------------------------------------------------------

  /** This round's pending changes (the client takes part in the round's flush). */
  pendingFor(fan: FanOut): Pending {
    // Each round touched once, not once per change (rounds reach tens of thousands of clients).
    if (this.pendingRound !== fan) {
      this.pendingRound = fan;
      fan.touch(this.client);
    }
    return (this.pending ??= { adds: [], removes: NO_NAMES as string[], errors: NO_ERRORS as ResourceErrorInfo[], forced: false });
  }

  /** This round's resource errors, to add to. */
  errorsFor(fan: FanOut): ResourceErrorInfo[] {
    const p = this.pendingFor(fan);
    if (p.errors === NO_ERRORS) p.errors = [];
    return p.errors;
  }

  /** Queues `variant` unless the client already holds that version. */
  offer(name: string, variant: Variant, fan: FanOut): void {
    const held = this.held.get(name);
    if (held === variant.version) return;
    this.ledger.notePrior(name, held);
    this.held.set(name, variant.version);
    this.world?.set(name, variant);
    const p = this.pendingFor(fan);
    if (p.removes.length > 0) p.mixed = true;
    p.adds.push(variant);
  }

  /** Does-not-exist: said once, until the client holds it again. */
  tellAbsent(name: string, fan: FanOut): void {
    const held = this.held.get(name);
    if (held === TOLD_ABSENT) return;
    this.ledger.notePrior(name, held);
    this.held.set(name, TOLD_ABSENT);
    this.world?.delete(name);
    this.queueRemove(name, fan);
  }

  /** A collection member went away: tell the client if it holds it. */
  retract(name: string, fan: FanOut): void {
    const held = this.held.get(name);
    if (held === undefined || held === TOLD_ABSENT) return;
    this.ledger.notePrior(name, held);
    this.held.delete(name);
    this.world?.delete(name);
    this.queueRemove(name, fan);
  }

  /** The client no longer holds `name` under this round's terms ("send it again"): what is queued is settled before it is sent. */
  unsettle(): void {
    if (this.pending) this.pending.mixed = true;
  }

  /** The client dropped `name`: nothing still queued or held back for it goes out. */
  drop(name: string): void {
    this.backlog?.delete(name);
    if (this.pending) this.pending.mixed = true;
  }

  /** Whether a change for `name` is held back (slow client, or waiting for the upstream). */
  holdsBack(name: string): boolean {
    return this.backlog?.has(name) ?? false;
  }

  /** Names with a change held back. */
  *namesHeldBack(): Generator<string> {
    if (this.backlog) yield* this.backlog.keys();
  }

  /** Whether a state of the world is owed for newly listed `name` (its subscription `sub`): the upstream has not answered it yet. */
  awaitsAnswer(name: string, sub: Subscription): boolean {
    return this.wait?.awaits(name, sub) ?? false;
  }

  /** A state of the world held back for the upstream's answer goes out with this round. */
  releaseWithRound(fan: FanOut): void {
    if (this.wait?.waiting) this.pendingFor(fan).forced = true;
  }

  /** The stream ended: nothing more is sent. */
  close(): void {
    this.wait?.cancel();
    this.pending = undefined;
    this.pendingRound = undefined;
    this.backlog = undefined;
  }

  /** Queues a removal of `name`, leaving `held` as it is (the caller has settled it). */
  queueRemove(name: string, fan: FanOut): void {
    const p = this.pendingFor(fan);
    if (p.adds.length > 0 || p.removes.length > 0) p.mixed = true;
    if (p.removes === NO_NAMES) p.removes = [];
    p.removes.push(name);
  }

  /**
   * One response never names a resource twice, nor adds and removes it (Envoy
   * NACKs both): what the client will hold (`held`) is the last word — the
   * newest copy of what it holds, a removal of what it no longer has.
   */
  private settle(p: Pending): void {
    const adds = new Map<string, Variant>();
    for (const v of p.adds) if (this.held.get(v.name) === v.version) adds.set(v.name, v);
    p.adds = [...adds.values()];
    if (p.removes.length === 0) return;
    const removes = new Set<string>();
    for (const n of p.removes) {
      const held = this.held.get(n);
      if (!adds.has(n) && (held === undefined || held === TOLD_ABSENT)) removes.add(n);
    }
    p.removes = [...removes];
  }

  // --- sending -------------------------------------------------------------------

  /** End of a fan-out round: send what is pending, or hold it back while the client is slow. */
  flush(fan: FanOut | undefined): void {
    const pending = this.pending;
    this.pendingRound = undefined;
    if (!pending) return;
    this.pending = undefined;
    if (pending.mixed) this.settle(pending);
    if (pending.adds.length === 0 && pending.removes.length === 0 && pending.errors.length === 0 && !pending.forced) return;
    const wait = this.wait;
    if (wait) {
      if (wait.awaited()) {
        this.addToBacklog(pending);
        wait.hold();
        return;
      }
      if (wait.end()) {
        this.addToBacklog(pending);
        this.drainBacklog();
        return;
      }
    }
    if (this.stream.blocked || this.backlog) {
      this.coalesce(pending);
      return;
    }
    this.sendAll(this.builder.build(this.client, pending, fan), pending);
  }

  /** The client is reading again (or the first-answer wait ran out): send the backlog as one response (or several, by size). */
  drainBacklog(): void {
    const backlog = this.backlog;
    if (!backlog || this.stream.blocked || this.wait?.waiting) return;
    this.backlog = undefined;
    const pending: Pending = { adds: [], removes: [], errors: this.backlogErrors ?? [], forced: false };
    this.backlogErrors = undefined;
    for (const [name, v] of backlog) {
      if (name === '' && v === null) pending.forced = true;
      else if (v === null) pending.removes.push(name);
      else pending.adds.push(v);
    }
    this.sendAll(this.builder.build(this.client, pending, undefined), pending);
  }

  private sendAll(responses: readonly OutgoingResponse[], pending: Pending): void {
    this.stream.statusChanged?.(this.client);
    this.ledger.noteChanges(responses, pending.adds);
    for (const r of responses) {
      this.ledger.sent(r);
      this.stream.send(this.client, r);
    }
  }

  /** Slow client: the latest change per name wins. */
  private coalesce(pending: Pending): void {
    this.addToBacklog(pending);
    this.stream.statusChanged?.(this.client);
    this.stream.coalesced();
  }

  private addToBacklog(pending: Pending): void {
    const backlog = (this.backlog ??= new Map());
    for (const v of pending.adds) backlog.set(v.name, v);
    for (const n of pending.removes) backlog.set(n, null);
    if (pending.errors.length > 0) (this.backlogErrors ??= []).push(...pending.errors);
    if (pending.forced && backlog.size === 0) backlog.set('', null);
  }
}
