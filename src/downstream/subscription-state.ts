import type { CacheEntry, Variant } from '../cache/memory-cache';
import { CompactMap } from '../compact-map';
import type { FanOut, FanOutTarget } from '../engine/fan-out';
import { mayNameCollection, WILDCARD } from '../proto/xds-names';
import type { Subscription } from '../engine/subscription';
import { forEachSpelling, type Spellings, type WatchUpdate, type Watcher } from '../engine/subscription';
import type { SubscriptionPort } from '../engine/types';
import type { ResourceErrorInfo } from '../proto/resource-error';
import { AckLedger, type ClientView } from './ack-ledger';
import { TOLD_ABSENT, type OutgoingResponse, type Pending } from './outgoing';
import { rulesFor, type Protocol, type ProtocolRules } from './protocol-rules';
import { ReconnectClaims } from './reconnect-claims';
import { ClientOutbox } from './client-outbox';
import { FirstAnswerWait } from './first-answer-wait';
import { HeldCollections } from './held-collections';

/** One protocol's way of turning a client's pending changes into responses (delta, SotW). */
export interface ResponseBuilder {
  readonly protocol: Protocol;
  /** Responses for `pending` (several when it exceeds the size limit); shares encodings through `fan`. */
  build(state: SubscriptionState, pending: Pending, fan: FanOut | undefined): OutgoingResponse[];
}

/** The client stream a state belongs to. */
export interface StreamPort {
  readonly id: number;
  readonly supportsTtl: boolean;
  readonly identity: string | undefined;
  /** True while the client is not reading: responses are coalesced. */
  readonly blocked: boolean;
  send(state: SubscriptionState, response: OutgoingResponse): void;
  /** A subscription was refused for this client (logged once per stream by the stream). */
  refused(state: SubscriptionState, name: string, reason: string, message: string): void;
  /** Counts a response coalesced while the client was slow. */
  coalesced(): void;
  /** Something the client's status (synced / stale / NACKed) is judged from changed. */
  statusChanged?(state: SubscriptionState): void;
}

/** What a request's response_nonce did: ACKed or NACKed a response, answered none, or is ignored (stale). */
export type AckOutcome = 'ack' | 'nack' | 'none' | 'stale';

const ONLY_WILDCARD: readonly string[] = [WILDCARD];

/**
 * One client stream's state for one type URL. Every spelling the client used, its
 * collections, wildcard mode, coalescing while slow; what it was sent, holds
 * and answered is kept in its ACK ledger (ack-ledger.ts). The engine tells
 * it entry changes (it is the engine's Watcher); it turns them into pending
 * changes and, when a fan-out round ends, into responses through its
 * protocol's builder. Delta and SotW streams share it; where the protocols
 * read a request differently, its protocol's rules (protocol-rules.ts) decide.
 */
export class SubscriptionState implements Watcher, FanOutTarget {
  /** The client's spelling of each subscription → the engine's subscription (null: refused). Changed only through setName/deleteName. Usually one (a glob): a compact map. */
  readonly names = new CompactMap<string, Subscription | null>();
  /** How many of `names` are refused (null), kept as they change: status views read it without walking the names. */
  private refusedNames = 0;
  /**
   * Name → what the client currently has, for protocols that resend the whole
   * state of the world (SotW Listener/Cluster); undefined otherwise.
   */
  readonly world: Map<string, Variant> | undefined;
  /** What the client was sent, holds, ACKed and NACKed. */
  readonly ledger: AckLedger;
  /** Name as the client knows it → version last sent (or TOLD_ABSENT): the ledger's. */
  readonly held: Map<string, string>;
  private readonly rules: ProtocolRules;
  /** Subscribed through a request without names (legacy wildcard). */
  private byOmission = false;
  /** A request for this type has been applied / has named a resource (the legacy-wildcard rule reads both). */
  private requested = false;
  private named = false;
  /** Names a reconnecting client listed as held, not yet confirmed by a known collection. */
  private claims: ReconnectClaims | undefined;
  /** The collections (globs, the wildcard) this client subscribes. */
  private readonly collections: HeldCollections;
  /** The wildcard was subscribed and has not been answered yet. */
  private owesWildcardAnswer = false;
  /** This round's changes for the client, and what is held back while it is slow. */
  private readonly outbox: ClientOutbox<SubscriptionState>;
  /** The client-status tally's mark on this state (status-tally.ts): how it is counted, and whether it changed since. */
  statusMark = 0;
  constructor(
    readonly typeUrl: string,
    private readonly stream: StreamPort,
    private readonly engine: SubscriptionPort,
    private readonly builder: ResponseBuilder,
  ) {
    this.rules = rulesFor(builder.protocol);
    this.world = this.rules.sendsWholeWorld(typeUrl) ? new Map() : undefined;
    this.ledger = new AckLedger(builder.protocol === 'sotw');
    this.held = this.ledger.held;
    this.collections = new HeldCollections(typeUrl, engine, this.held);
    const wait = this.world ? new FirstAnswerWait(this.names, this.held, () => this.outbox.drainBacklog()) : undefined;
    this.outbox = new ClientOutbox(this, stream, builder, this.ledger, this.world, wait);
  }

  get identity(): string | undefined {
    return this.stream.identity;
  }

  get protocol(): Protocol {
    return this.builder.protocol;
  }

  /** Subscribed through a request without names (legacy wildcard); ends with an explicit unsubscribe of `*`. */
  get legacyWildcard(): boolean {
    return this.byOmission;
  }

  get nacks(): number {
    return this.ledger.nacks;
  }

  // --- client requests -----------------------------------------------------

  /**
   * What a request's response_nonce says (`nackMessage` set: a NACK) about
   * the responses sent, applied to the ledger: 'stale' when the protocol
   * ignores the whole request (see ProtocolRules.answerCounts).
   */
  acknowledge(nonce: string, nackMessage: string | undefined): AckOutcome {
    if (nonce === '') return 'none';
    if (!this.rules.answerCounts(nonce, this.ledger.lastNonce)) return 'stale';
    if (nackMessage !== undefined) {
      this.nack(nonce, nackMessage);
      return 'nack';
    }
    this.ack(nonce);
    return 'ack';
  }

  /**
   * The names a request subscribes (delta: its subscribe list, with
   * `unsubscribes` when it also unsubscribes some; SotW: its whole list),
   * read with the protocol's legacy-wildcard rule: a request naming nothing
   * may mean `*`.
   */
  requestedNames(names: readonly string[], unsubscribes = false): readonly string[] {
    const first = !this.requested;
    this.requested = true;
    if (names.length > 0) {
      this.named = true;
      return names;
    }
    if (unsubscribes || !this.rules.readsAsWildcard(this.typeUrl, first, this.named)) return names;
    this.byOmission = true;
    return ONLY_WILDCARD;
  }

  /** Versions a reconnecting client says it holds (delta initial_resource_versions); they count as held. */
  setInitialVersions(versions: ReadonlyMap<string, string>): void {
    if (versions.size === 0) return;
    const claims = (this.claims ??= new ReconnectClaims(this.typeUrl, this.engine, (n, entry, f) => this.claimAnswered(n, entry, f)));
    for (const [name, version] of versions) {
      this.held.set(name, version);
      claims.add(name);
    }
  }

  /**
   * Subscribes `names`. A newly named resource is sent even if the client
   * already holds it (docs/subscription-semantics.md), unless it listed it in `initial` (the
   * reconnect's initial_resource_versions). A name the client already
   * subscribes is asked for again: it is sent again (every member, for a
   * collection), a refused one is answered again. `distinct` says the
   * caller already dropped repeated names (a large request is deduplicated
   * once as a whole, then subscribed a slice at a time).
   */
  subscribe(names: readonly string[], fan: FanOut, initial?: ReadonlyMap<string, string>, distinct = false): void {
    this.stream.statusChanged?.(this);
    const seen = names.length > 1 && !distinct ? new Set<string>() : undefined;
    for (const name of names) {
      if (seen) {
        if (seen.has(name)) continue;
        seen.add(name);
      }
      const existing = this.names.get(name);
      if (existing === null) {
        this.resend(name);
        this.answerRefused(name, fan);
        continue;
      }
      if (existing !== undefined) {
        this.forgetHeld(existing, name);
        if (name === WILDCARD) this.owesWildcardAnswer = true;
        this.engine.answer(this, existing, name, fan);
        continue;
      }
      // A newly named resource is sent even if held, unless the reconnect listed it.
      const heldBefore = this.held.get(name);
      if (!initial?.has(name)) this.resend(name);
      if (name === WILDCARD) this.owesWildcardAnswer = true;
      // What the client held before a collection's join: the join itself offers its members.
      const heldBeforeJoin = this.held.size > 0 && mayNameCollection(name) ? [...this.held.keys()] : undefined;
      const joined = this.engine.subscribe(this, name, fan);
      if (!('key' in joined)) {
        if (name === WILDCARD) this.owesWildcardAnswer = false;
        if (heldBefore !== undefined && !initial?.has(name)) this.held.set(name, heldBefore);
        this.refuse(name, joined.reason, joined.message, fan);
        continue;
      }
      this.setName(joined.sharedSpelling(name), joined);
      if (joined.isCollection) {
        this.collections.add(joined.key);
        if (heldBeforeJoin) this.resendHeldMembers(joined, name, fan, initial, heldBeforeJoin);
        if (!joined.answered) this.checkClaims(joined, fan);
      }
    }
  }

  /**
   * `name` is refused for this client (unroutable, denied, over a limit): it
   * is answered as not existing and stays refused until unsubscribed.
   */
  refuse(name: string, reason: string, message: string, fan: FanOut): void {
    this.stream.statusChanged?.(this);
    this.setName(name, null);
    this.stream.refused(this, name, reason, message);
    this.answerRefused(name, fan);
  }

  /**
   * Unsubscribes `names`; a name still covered by one of the client's
   * collections is answered again. A state of the world that a newly listed
   * name was still waiting for goes out now: dropping the name does not take
   * back the list change it answers.
   */
  unsubscribe(names: readonly string[], fan: FanOut): void {
    this.stream.statusChanged?.(this);
    for (const name of names) {
      const sub = this.names.get(name);
      if (sub === undefined) continue;
      if (sub && this.outbox.awaitsAnswer(name, sub)) this.outbox.pendingFor(fan).forced = true;
      this.deleteName(name);
      if (name === WILDCARD) {
        this.byOmission = false;
        this.owesWildcardAnswer = false;
      }
      if (sub === null) {
        this.dropHeld(name);
        continue;
      }
      this.engine.leave(this, sub, name);
      if (sub.isCollection) {
        this.collections.drop(sub.key);
        // The client drops what it held through the collection. Judged from
        // what it holds, not from the cache: leaving may just have evicted the
        // members, and a client told them again later must get them again.
        for (const held of this.collections.heldThrough(sub.key)) {
          if (this.names.has(held) || this.collections.covers(held)) continue;
          this.dropHeld(held);
        }
        this.dropHeld(name);
      } else if (this.rules.answersDroppedCoveredName) {
        this.dropHeld(name);
        this.answerStillCovered(name, fan);
      } else if (!this.collections.coversUnderOwnName(name)) {
        // No answer (state of the world); what a collection still covers stays held through it.
        this.dropHeld(name);
      }
    }
  }

  /** How many of the names the client asked for the relay refused. */
  get refusedCount(): number {
    return this.refusedNames;
  }

  private setName(name: string, sub: Subscription | null): void {
    if (this.names.get(name) === null) this.refusedNames--;
    if (sub === null) this.refusedNames++;
    this.names.set(name, sub);
  }

  private deleteName(name: string): void {
    if (this.names.get(name) === null) this.refusedNames--;
    this.names.delete(name);
  }

  /** The stream is gone: leave every subscription. */
  close(): void {
    this.claims?.cancel();
    for (const [name, sub] of this.names) if (sub) this.engine.leave(this, sub, name);
    this.names.clear();
    this.refusedNames = 0;
    this.collections.clear();
    this.outbox.close();
  }

  /**
   * The protocol rule for a name the client stopped asking for while one of
   * its collections (a glob, or the wildcard) still covers it, where the
   * protocol answers that (ProtocolRules.answersDroppedCoveredName): the
   * client cannot know whether to keep it, so it is sent again if it exists,
   * else reported removed. Under another spelling the client dropped only
   * that spelling: the member it holds under its own name stays as it is
   * (also when it rejected it).
   */
  private answerStillCovered(name: string, fan: FanOut): void {
    if (!this.collections.covers(name)) return;
    const key = this.engine.heldKey(this.typeUrl, name);
    const entry = key ? this.engine.current(key.key) : undefined;
    if (entry) {
      if (entry.name === name) this.resend(name);
      this.outbox.offer(entry.name, entry.variant(entry.name, false), fan);
    } else {
      this.outbox.queueRemove(name, fan);
    }
  }

  /** Re-subscribing means "send it again": forget what the client was sent under `spelling`. */
  private forgetHeld(sub: Subscription, spelling: string): void {
    this.resend(spelling);
    if (sub.isCollection) for (const name of this.collections.heldThrough(sub.key)) this.resend(name);
  }

  /**
   * A newly subscribed collection is sent whole, also the members the client
   * holds already through another subscription (or rejected there) — unless
   * a reconnecting client listed them.
   */
  private resendHeldMembers(
    coll: Subscription,
    spelling: string,
    fan: FanOut,
    initial: ReadonlyMap<string, string> | undefined,
    heldBefore: readonly string[],
  ): void {
    let again = false;
    for (const member of heldBefore) {
      const k = this.engine.heldKey(this.typeUrl, member);
      // Members under the name they are sent with (not another spelling subscribed by itself).
      if (k?.collection !== coll.key || k.name !== member || !this.held.has(member)) continue;
      // Only what the cache can send now: a miss was already asked upstream by the join.
      if (initial?.has(member) || !this.engine.current(k.key)) continue;
      this.resend(member);
      again = true;
    }
    if (again) this.engine.answer(this, coll, spelling, fan);
  }

  /** "Send it again": the client counts as not holding `name`; a copy already queued this round is then replaced, not repeated. */
  private resend(name: string): void {
    if (this.held.delete(name)) this.outbox.unsettle();
  }

  /** The client stopped subscribing anything that covers `name`: it drops it, and nothing still queued for it goes out. */
  private dropHeld(name: string): void {
    this.held.delete(name);
    // Nor is it a name the reconnecting client claims to hold any more.
    if (this.claims) this.claimSettled(name);
    this.world?.delete(name);
    this.outbox.drop(name);
  }

  /** A refused name: removed for a resource or glob; the wildcard still gets its (empty) first answer. */
  private answerRefused(name: string, fan: FanOut): void {
    if (name === WILDCARD) {
      this.forceAnswer(fan);
      return;
    }
    this.outbox.tellAbsent(name, fan);
  }

  /** ACK of the response with `nonce` (and of every earlier one). */
  ack(nonce: string): void {
    if (this.ledger.ack(nonce)) this.stream.statusChanged?.(this);
  }

  /** NACK of the response with `nonce`: the client keeps its previous state; the rejected versions are not sent again. */
  nack(nonce: string, details: string): void {
    this.stream.statusChanged?.(this);
    this.ledger.nack(nonce, details);
  }

  /**
   * The version the client holds of `name` as far as it has ACKed ('' for none), and whether a change is on its way.
   * `inFlight`: namesInFlight() collected once, for a caller asking about many names (else each asks the queue).
   */
  clientView(name: string, inFlight?: ReadonlySet<string>): ClientView {
    const answered = this.ledger.answered(name);
    if (answered) return answered;
    // A first delivery records no prior (see AckLedger.notePrior): find it among what is on its way.
    if (inFlight ? inFlight.has(name) : this.outbox.holdsBack(name) || this.ledger.inFlight(name)) return { version: undefined, pending: true };
    return { version: this.held.get(name), pending: false };
  }

  /**
   * Every name with a change on its way (held back, or sent and not ACKed:
   * newest response first), possibly with repeats. Status views look for one
   * the client still subscribes instead of asking clientView for each name.
   */
  *namesInFlight(): Generator<string> {
    yield* this.outbox.namesHeldBack();
    yield* this.ledger.namesInFlight();
  }

  // --- what the engine tells (Watcher) --------------------------------------

  update(sub: Subscription, spellings: Spellings, update: WatchUpdate, fan: FanOut): boolean {
    switch (update.kind) {
      case 'changed':
        return sub.isCollection
          ? this.memberChanged(spellings, update.entry, update.keepHeld, fan)
          : this.singletonChanged(spellings, update.entry, update.keepHeld, fan);
      case 'does-not-exist':
        if (!sub.isCollection) this.singletonAbsent(spellings, update.keepHeld, fan);
        else if (update.member !== undefined) this.memberGone(update.member, fan);
        else this.collectionEmpty(sub, spellings, update.keepHeld, fan);
        return true;
      case 'error':
        this.errorReported(sub, spellings, update.name, update.error, fan);
        return true;
      case 'heartbeat':
        this.heartbeat(spellings, update.entry, fan);
        return true;
      case 'complete':
        this.collectionComplete(sub, update.members, fan);
        return true;
      case 'withdrawn':
        this.withdrawn(sub, spellings, update.members, fan);
        return true;
    }
  }

  /**
   * The singleton's content, under each spelling the client used. (No
   * closure per call here or in memberChanged: they run for every change and
   * every client it reaches.)
   */
  private singletonChanged(spellings: Spellings, entry: CacheEntry, keepHeld: boolean, fan: FanOut): boolean {
    if (typeof spellings === 'string') return this.singletonChangedAs(spellings, entry, keepHeld, fan);
    let kept = true;
    for (const s of spellings) if (!this.singletonChangedAs(s, entry, keepHeld, fan)) kept = false;
    return kept;
  }

  /** singletonChanged under one spelling; false when the client keeps another version. */
  private singletonChangedAs(s: string, entry: CacheEntry, keepHeld: boolean, fan: FanOut): boolean {
    if (keepHeld && this.holdsOther(s, entry.version)) {
      this.ledger.keptBehind(s);
      this.stream.statusChanged?.(this);
      return false;
    }
    this.outbox.offer(s, entry.variant(s, this.stream.supportsTtl), fan);
    return true;
  }

  /** A member of a collection, under its canonical name. */
  private memberChanged(spellings: Spellings, entry: CacheEntry, keepHeld: boolean, fan: FanOut): boolean {
    if (keepHeld && this.holdsOther(entry.name, entry.version)) {
      this.ledger.keptBehind(entry.name);
      this.stream.statusChanged?.(this);
      return false;
    }
    // The collection is no longer empty.
    if (typeof spellings === 'string') this.forgetToldAbsent(spellings);
    else for (const s of spellings) this.forgetToldAbsent(s);
    this.owesWildcardAnswer = false;
    if (this.claims) this.claimSettled(entry.name);
    this.outbox.offer(entry.name, entry.variant(entry.name, false), fan);
    return true;
  }

  private forgetToldAbsent(name: string): void {
    if (this.held.get(name) === TOLD_ABSENT) this.held.delete(name);
  }

  private singletonAbsent(spellings: Spellings, keepHeld: boolean, fan: FanOut): void {
    forEachSpelling(spellings, (s) => {
      if (!(keepHeld && this.holdsOther(s))) this.outbox.tellAbsent(s, fan);
    });
  }

  private memberGone(name: string, fan: FanOut): void {
    // A name the client also subscribes by itself hears about it through that subscription.
    if (this.names.has(name)) return;
    this.outbox.retract(name, fan);
  }

  private collectionEmpty(sub: Subscription, spellings: Spellings, keepHeld: boolean, fan: FanOut): void {
    // Fleet mode, upstream away: the client may hold members from another relay.
    if (keepHeld && this.held.size > 0) return;
    if (sub.kind === 'wildcard') {
      if (this.owesWildcardAnswer) this.forceAnswer(fan);
      return;
    }
    // An empty glob is said with the glob's own name in removed_resources.
    forEachSpelling(spellings, (s) => this.outbox.tellAbsent(s, fan));
  }

  /** The collection's content is known: members the reconnecting client listed and that are not in it are gone. */
  private collectionComplete(sub: Subscription, members: readonly CacheEntry[], fan: FanOut): void {
    // A state of the world held back for this answer goes out with this round.
    this.outbox.releaseWithRound(fan);
    if (sub.kind === 'wildcard' && this.owesWildcardAnswer) this.forceAnswer(fan);
    const gone = this.claims?.settleMembersOf(sub, members, this.names);
    if (this.claims?.empty) this.claims = undefined;
    if (gone) for (const name of gone) this.outbox.retract(name, fan);
  }

  /** Members of `coll` the reconnecting client listed and the relay does not hold are asked upstream (see ReconnectClaims.check). */
  private checkClaims(coll: Subscription, fan: FanOut): void {
    this.claims?.check(coll, this.identity, this.names, fan);
  }

  /** A listed member's fate is known: it is no longer a claim to reconcile. */
  private claimSettled(name: string): boolean {
    const claims = this.claims;
    if (!claims?.settle(name)) return false;
    if (claims.empty) this.claims = undefined;
    return true;
  }

  private claimAnswered(name: string, entry: CacheEntry | undefined, fan: FanOut): void {
    if (!this.claimSettled(name)) return;
    if (this.names.has(name) || !this.collections.covers(name)) return;
    if (entry) this.outbox.offer(name, entry.variant(name, false), fan);
    else this.outbox.retract(name, fan);
  }

  private errorReported(sub: Subscription, spellings: Spellings, name: string, error: ResourceErrorInfo, fan: FanOut): void {
    const errors = this.outbox.errorsFor(fan);
    // Under the name the client knows: a member's canonical name, or each spelling of a singleton.
    const as = (n: string): ResourceErrorInfo => (n === error.name ? error : { ...error, name: n });
    if (sub.isCollection) errors.push(as(name));
    else forEachSpelling(spellings, (s) => errors.push(as(s)));
  }

  private heartbeat(spellings: Spellings, beat: CacheEntry, fan: FanOut): void {
    if (!this.stream.supportsTtl) return;
    forEachSpelling(spellings, (s) => {
      if (this.held.get(s) === beat.version) this.outbox.pendingFor(fan).adds.push(beat.variant(s, true));
    });
  }

  /** The engine dropped these spellings: they stay refused, and what they covered is taken back. */
  private withdrawn(sub: Subscription, spellings: Spellings, members: readonly CacheEntry[], fan: FanOut): void {
    forEachSpelling(spellings, (s) => {
      if (this.names.get(s) !== sub) return;
      this.setName(s, null);
      if (sub.isCollection) {
        this.collections.drop(sub.key);
      } else {
        this.world?.delete(s);
        this.outbox.tellAbsent(s, fan);
      }
    });
    if (!sub.isCollection) return;
    for (const m of members) if (!this.names.has(m.name)) this.outbox.retract(m.name, fan);
    if (sub.kind === 'glob') forEachSpelling(spellings, (s) => this.outbox.tellAbsent(s, fan));
  }

  // --- pending changes ---------------------------------------------------------

  /** The client holds `name` at a version other than `version` (or, without one, at any version). */
  private holdsOther(name: string, version?: string): boolean {
    const held = this.held.get(name);
    return held !== undefined && held !== TOLD_ABSENT && held !== version;
  }

  private forceAnswer(fan: FanOut): void {
    this.owesWildcardAnswer = false;
    this.outbox.pendingFor(fan).forced = true;
  }

  // --- sending -------------------------------------------------------------------

  /** End of a fan-out round: send what is pending, or hold it back while the client is slow. */
  flush(fan: FanOut | undefined): void {
    this.outbox.flush(fan);
  }

  /** The client is reading again: send the backlog as one response (or several, by size). */
  drainBacklog(): void {
    this.outbox.drainBacklog();
  }
}
