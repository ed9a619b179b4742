import type { CacheEntry, Variant } from '../cache/memory-cache';
import type { FanOut, FanOutTarget } from '../hub/fan-out';
import { WILDCARD } from '../proto/xds-names';
import type { Subscription } from '../hub/subscription';
import { forEachSpelling, type Spellings, type WatchUpdate, type Watcher } from '../hub/subscription';
import type { SubscriptionPort } from '../hub/types';
import type { ResourceErrorInfo } from '../proto/resource-error';
import { ClaimCheck } from './claim-check';

/** Marker stored in `held` for a name the client has been told does not exist. */
export const TOLD_ABSENT = '\u0000absent';

/** An encoded response and what it tells the client; shared by every client that gets the same bytes. */
export interface OutgoingResponse {
  readonly typeUrl: string;
  readonly nonce: string;
  readonly bytes: Buffer;
  readonly adds: readonly Variant[];
  readonly removes: readonly string[];
}

/** What one flush is about to tell the client. */
export interface Pending {
  adds: Variant[];
  removes: string[];
  errors: ResourceErrorInfo[];
  /** Send a response even if it is empty (the first answer to a wildcard). */
  forced: boolean;
  /**
   * A name may stand in it more than once (added and removed, or added twice
   * after "send it again"): it is settled against what the client will hold
   * before it is sent. Never set on the common paths (a change, a first sync).
   */
  mixed?: boolean;
}

/** One protocol's way of turning a client's pending changes into responses (delta, SotW). */
export interface ResponseBuilder {
  readonly protocol: 'delta' | 'sotw';
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

/** A NACK the client sent: what it rejected, why and when. */
export interface Rejected {
  version: string;
  details: string;
  at: number;
  /** What the client kept instead (undefined: nothing). */
  kept: string | undefined;
}

const NO_NAMES: readonly string[] = [];

/** Whether a subscribed name can be a collection (the wildcard, or a glob: its last path segment is `*`). */
function mayNameCollection(name: string): boolean {
  return name === WILDCARD || name.endsWith('/*') || name.includes('/*?');
}
/**
 * How long a state of the world waits for the upstream to answer what the
 * client newly lists before it is sent with what is known so far (the
 * upstream cannot always say which response answers a collection).
 */
export const FIRST_ANSWER_WAIT_MS = 1000;
const NO_ERRORS: readonly ResourceErrorInfo[] = [];

/**
 * One client stream's state for one type URL — the only place that knows the
 * per-client protocol rules. Every spelling the client used, the versions it
 * holds, wildcard mode, ACK/NACK, coalescing while slow. The engine tells it
 * entry changes (it is the engine's Watcher); it turns them into pending
 * changes and, when a fan-out round ends, into responses through its
 * protocol's builder. Delta and SotW streams share it unchanged.
 */
export class SubscriptionState implements Watcher, FanOutTarget {
  /** The client's spelling of each subscription → the engine's subscription (null: refused). */
  readonly names = new Map<string, Subscription | null>();
  /** Name as the client knows it → version last sent (or TOLD_ABSENT). */
  readonly held = new Map<string, string>();
  /**
   * Name → what the client currently has, for protocols that resend the whole
   * state of the world (SotW Listener/Cluster); undefined otherwise.
   */
  readonly world: Map<string, Variant> | undefined;
  /** Subscribed through an initial request without names (legacy wildcard). */
  legacyWildcard = false;
  /** Responses sent and not yet ACKed or NACKed, oldest first. */
  readonly unacked: OutgoingResponse[] = [];
  /** Names whose last sent version the client NACKed. */
  rejected: Map<string, Rejected> | undefined;
  /**
   * Name → what the client held before changes it has not ACKed yet (sent,
   * or held back while it is slow); `held` is what it will hold. Empty once
   * the client has ACKed everything.
   */
  private prior: Map<string, string | undefined> | undefined;
  /**
   * SotW only: name → nonce (= version_info) of the sent response that
   * carries its latest change, and → version_info of the ACKed response that
   * last changed it — the version a SotW client reports for a resource.
   */
  private changedIn: Map<string, string> | undefined;
  private ackedIn: Map<string, string> | undefined;
  nacks = 0;
  /** The last response's nonce (SotW requests must carry it to count). */
  lastNonce = '';
  /** Names a reconnecting client listed as held, not yet confirmed by a known collection. */
  private initialNames: Set<string> | undefined;
  /** Collection keys (globs, the wildcard) this client subscribes → how many of its spellings name each. */
  private readonly collections = new Map<string, number>();
  /** Listed glob members whose existence is being asked upstream (see ClaimCheck). */
  private claimChecks: Map<string, ClaimCheck> | undefined;
  /** The wildcard was subscribed and has not been answered yet. */
  private owesWildcardAnswer = false;
  private pending: Pending | undefined;
  /**
   * Names the client was left holding at a version other than the relay's
   * (fleet mode, upstream away: see `keepHeld`), the only way a name is behind
   * with nothing on its way. Candidates for status views, pruned by them.
   */
  private keptBehind: Set<string> | undefined;
  /**
   * State-of-the-world clients: the state is held back (in `backlog`) until
   * the upstream has answered what the client newly lists — what the cache
   * knows of a collection may be only part, and a state of the world without
   * a resource the client held (it may be reconnecting) says it was removed.
   */
  private heldForAnswer = false;
  /** Collections no longer waited for (the wait ran out). */
  private waitedFor: WeakSet<Subscription> | undefined;
  private answerTimer: NodeJS.Timeout | undefined;
  private backlog: Map<string, Variant | null> | undefined;
  private backlogErrors: ResourceErrorInfo[] | undefined;

  constructor(
    readonly typeUrl: string,
    private readonly stream: StreamPort,
    private readonly engine: SubscriptionPort,
    private readonly builder: ResponseBuilder,
    keepsWorld: boolean,
  ) {
    this.world = keepsWorld ? new Map() : undefined;
  }

  get identity(): string | undefined {
    return this.stream.identity;
  }

  get protocol(): 'delta' | 'sotw' {
    return this.builder.protocol;
  }

  // --- client requests -----------------------------------------------------

  /** Versions a reconnecting client says it holds (delta initial_resource_versions); they count as held. */
  setInitialVersions(versions: ReadonlyMap<string, string>): void {
    if (versions.size === 0) return;
    this.initialNames ??= new Set();
    for (const [name, version] of versions) {
      this.held.set(name, version);
      this.initialNames.add(name);
    }
  }

  /**
   * Subscribes `names`. A newly named resource is sent even if the client
   * already holds it (spec 001), unless it listed it in `initial` (the
   * reconnect's initial_resource_versions). A name the client already
   * subscribes is asked for again: it is sent again (every member, for a
   * collection), a refused one is answered again.
   */
  subscribe(names: readonly string[], fan: FanOut, initial?: ReadonlyMap<string, string>): void {
    this.stream.statusChanged?.(this);
    const seen = names.length > 1 ? new Set<string>() : undefined;
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
      this.names.set(name, joined);
      if (joined.isCollection) {
        this.collections.set(joined.key, (this.collections.get(joined.key) ?? 0) + 1);
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
    this.names.set(name, null);
    this.stream.refused(this, name, reason, message);
    this.answerRefused(name, fan);
  }

  /** Unsubscribes `names`; a name still covered by one of the client's collections is answered again. */
  unsubscribe(names: readonly string[], fan: FanOut): void {
    this.stream.statusChanged?.(this);
    for (const name of names) {
      const sub = this.names.get(name);
      if (sub === undefined) continue;
      this.names.delete(name);
      if (name === WILDCARD) {
        this.legacyWildcard = false;
        this.owesWildcardAnswer = false;
      }
      if (sub === null) {
        this.dropHeld(name);
        continue;
      }
      this.engine.leave(this, sub, name);
      if (sub.isCollection) {
        this.dropCollection(sub.key);
        // The client drops what it held through the collection. Judged from
        // what it holds, not from the cache: leaving may just have evicted the
        // members, and a client told them again later must get them again.
        for (const held of this.heldThrough(sub.key)) {
          if (this.names.has(held) || this.covered(held)) continue;
          this.dropHeld(held);
        }
        this.dropHeld(name);
      } else {
        this.dropHeld(name);
        this.answerStillCovered(name, fan);
      }
    }
  }

  /** The stream is gone: leave every subscription. */
  close(): void {
    if (this.claimChecks) for (const check of this.claimChecks.values()) check.cancel();
    this.claimChecks = undefined;
    clearTimeout(this.answerTimer);
    this.answerTimer = undefined;
    for (const [name, sub] of this.names) if (sub) this.engine.leave(this, sub, name);
    this.names.clear();
    this.collections.clear();
    this.pending = undefined;
    this.backlog = undefined;
  }

  /**
   * The protocol rule for a name the client stopped asking for while one of
   * its collections (a glob, or the wildcard) still covers it: the client
   * cannot know whether to keep it, so it is sent again if it exists, else
   * reported removed. Under another spelling the client dropped only that
   * spelling: the member it holds under its own name stays as it is (also
   * when it rejected it).
   */
  private answerStillCovered(name: string, fan: FanOut): void {
    if (!this.covered(name)) return;
    const key = this.engine.heldKey(this.typeUrl, name);
    const entry = key ? this.engine.current(key.key) : undefined;
    if (entry) {
      if (entry.name === name) this.resend(name);
      this.offer(entry.name, entry.variant(entry.name, false), fan);
    } else if (!this.world) {
      // A state of the world has no word for "removed": the client dropped
      // the name from its list and holds nothing under it.
      this.queueRemove(name, fan);
    }
  }

  /** Whether one of this client's collections (a glob, or the wildcard) covers resource `name`. */
  private covered(name: string): boolean {
    if (this.collections.size === 0) return false;
    const key = this.engine.heldKey(this.typeUrl, name);
    return key !== undefined && this.collections.has(key.collection);
  }

  private dropCollection(key: string): void {
    const n = (this.collections.get(key) ?? 0) - 1;
    if (n > 0) this.collections.set(key, n);
    else this.collections.delete(key);
  }

  /**
   * Names the client holds as members of collection `key`: under the name a
   * member is sent with (not another spelling it subscribed by itself). A
   * snapshot: callers change `held`.
   */
  private heldThrough(key: string): string[] {
    const out: string[] = [];
    for (const name of this.held.keys()) {
      const k = this.engine.heldKey(this.typeUrl, name);
      if (k?.collection === key && k.name === name) out.push(name);
    }
    return out;
  }

  /** Re-subscribing means "send it again": forget what the client was sent under `spelling`. */
  private forgetHeld(sub: Subscription, spelling: string): void {
    this.resend(spelling);
    if (sub.isCollection) for (const name of this.heldThrough(sub.key)) this.resend(name);
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
    if (this.held.delete(name) && this.pending) this.pending.mixed = true;
  }

  /** The client stopped subscribing anything that covers `name`: it drops it, and nothing still queued for it goes out. */
  private dropHeld(name: string): void {
    this.held.delete(name);
    // Nor is it a name the reconnecting client claims to hold any more.
    if (this.initialNames) this.claimSettled(name);
    this.world?.delete(name);
    this.backlog?.delete(name);
    if (this.pending) this.pending.mixed = true;
  }

  /** A refused name: removed for a resource or glob; the wildcard still gets its (empty) first answer. */
  private answerRefused(name: string, fan: FanOut): void {
    if (name === WILDCARD) {
      this.forceAnswer(fan);
      return;
    }
    this.tellAbsent(name, fan);
  }

  /** ACK of the response with `nonce` (and of every earlier one). */
  ack(nonce: string): void {
    const last = this.unackedIndex(nonce);
    if (last < 0) return;
    this.stream.statusChanged?.(this);
    // Plain ACKs are the hottest request: no allocation when nothing was rejected or is awaited.
    const tracking = (this.prior !== undefined && this.prior.size > 0) || this.rejected !== undefined || this.changedIn !== undefined;
    if (tracking) for (let i = 0; i <= last; i++) this.settled(this.unacked[i]);
    if (this.rejected?.size === 0) this.rejected = undefined;
    this.dropUnacked(last);
  }

  /** What an ACKed response tells about the client: it now holds what the response carried. */
  private settled(r: OutgoingResponse): void {
    for (const v of r.adds) {
      this.rejected?.delete(v.name);
      if (this.held.get(v.name) === v.version) this.prior?.delete(v.name);
      if (this.changedIn?.get(v.name) === r.nonce) {
        this.changedIn.delete(v.name);
        (this.ackedIn ??= new Map()).set(v.name, r.nonce);
      }
    }
    for (const n of r.removes) {
      const held = this.held.get(n);
      if (held === undefined || held === TOLD_ABSENT) this.prior?.delete(n);
    }
  }

  /** NACK of the response with `nonce`: the client keeps its previous state; the rejected versions are not sent again. */
  nack(nonce: string, details: string): void {
    this.stream.statusChanged?.(this);
    this.nacks++;
    const last = this.unackedIndex(nonce);
    if (last < 0) return;
    for (let i = 0; i < last; i++) this.settled(this.unacked[i]);
    const at = Date.now();
    this.rejected ??= new Map();
    for (const v of this.unacked[last].adds) {
      this.rejected.set(v.name, { version: v.version, details, at, kept: this.prior?.get(v.name) });
      this.prior?.delete(v.name);
    }
    this.dropUnacked(last);
  }

  private unackedIndex(nonce: string): number {
    const q = this.unacked;
    // Almost always the newest response (clients answer in order).
    if (q.length > 0 && q[q.length - 1].nonce === nonce) return q.length - 1;
    return q.findIndex((r) => r.nonce === nonce);
  }

  private dropUnacked(last: number): void {
    if (last === this.unacked.length - 1) this.unacked.length = 0;
    else this.unacked.splice(0, last + 1);
  }

  /**
   * The version the client holds of `name` as far as it has ACKed ('' for none), and whether a change is on its way.
   * `inFlight`: namesInFlight() collected once, for a caller asking about many names (else each asks the queue).
   */
  clientView(name: string, inFlight?: ReadonlySet<string>): { version: string | undefined; pending: boolean } {
    const rejected = this.rejected?.get(name);
    if (rejected) return { version: rejected.kept, pending: false };
    if (this.prior?.has(name)) return { version: this.prior.get(name), pending: true };
    // A first delivery records no prior (see notePrior): find it among what is on its way.
    if (inFlight ? inFlight.has(name) : this.inFlight(name)) return { version: undefined, pending: true };
    return { version: this.held.get(name), pending: false };
  }

  /** Whether a change for `name` is held back (slow client) or sent and not yet ACKed. For status views, not the hot path. */
  private inFlight(name: string): boolean {
    if (this.backlog?.has(name)) return true;
    for (const r of this.unacked) {
      if (r.removes.includes(name)) return true;
      for (const v of r.adds) if (v.name === name) return true;
    }
    return false;
  }

  /**
   * Every name with a change on its way (held back, or sent and not ACKed:
   * newest response first), possibly with repeats. Status views look for one
   * the client still subscribes instead of asking clientView for each name.
   */
  *namesInFlight(): Generator<string> {
    if (this.backlog) yield* this.backlog.keys();
    for (let i = this.unacked.length - 1; i >= 0; i--) {
      const r = this.unacked[i];
      for (const v of r.adds) yield v.name;
      yield* r.removes;
    }
    if (this.prior) yield* this.prior.keys();
  }

  /** Names that may be behind with nothing on their way (see keptBehind). */
  behindCandidates(): readonly string[] {
    return this.keptBehind ? [...this.keptBehind] : NO_NAMES;
  }

  /** A status view found `name` no longer behind: it becomes a candidate again only through keepHeld. */
  notBehind(name: string): void {
    this.keptBehind?.delete(name);
    if (this.keptBehind?.size === 0) this.keptBehind = undefined;
  }

  /** SotW: the version_info of the ACKed response that last changed `name` (undefined for delta or none). */
  responseVersion(name: string): string | undefined {
    return this.ackedIn?.get(name);
  }

  /**
   * Remembers what the client held of `name` before a change it has not ACKed
   * yet. Nothing is recorded when it held nothing: a first sync (a reconnect
   * storm, a new client) then costs no map, and status views find such names
   * among the responses in flight instead.
   */
  private notePrior(name: string): void {
    const before = this.held.get(name);
    if (before === undefined) return;
    const prior = (this.prior ??= new Map());
    if (!prior.has(name)) prior.set(name, before);
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

  /** The singleton's content, under each spelling the client used. */
  private singletonChanged(spellings: Spellings, entry: CacheEntry, keepHeld: boolean, fan: FanOut): boolean {
    let kept = true;
    forEachSpelling(spellings, (s) => {
      if (keepHeld && this.holdsOther(s, entry.version)) {
        kept = false;
        (this.keptBehind ??= new Set()).add(s);
        this.stream.statusChanged?.(this);
      } else this.offer(s, entry.variant(s, this.stream.supportsTtl), fan);
    });
    return kept;
  }

  /** A member of a collection, under its canonical name. */
  private memberChanged(spellings: Spellings, entry: CacheEntry, keepHeld: boolean, fan: FanOut): boolean {
    if (keepHeld && this.holdsOther(entry.name, entry.version)) {
      (this.keptBehind ??= new Set()).add(entry.name);
      this.stream.statusChanged?.(this);
      return false;
    }
    // The collection is no longer empty.
    forEachSpelling(spellings, (s) => {
      if (this.held.get(s) === TOLD_ABSENT) this.held.delete(s);
    });
    this.owesWildcardAnswer = false;
    if (this.initialNames) this.claimSettled(entry.name);
    this.offer(entry.name, entry.variant(entry.name, false), fan);
    return true;
  }

  private singletonAbsent(spellings: Spellings, keepHeld: boolean, fan: FanOut): void {
    forEachSpelling(spellings, (s) => {
      if (!(keepHeld && this.holdsOther(s))) this.tellAbsent(s, fan);
    });
  }

  private memberGone(name: string, fan: FanOut): void {
    // A name the client also subscribes by itself hears about it through that subscription.
    if (this.names.has(name)) return;
    this.retract(name, fan);
  }

  private collectionEmpty(sub: Subscription, spellings: Spellings, keepHeld: boolean, fan: FanOut): void {
    // Fleet mode, upstream away: the client may hold members from another relay.
    if (keepHeld && this.held.size > 0) return;
    if (sub.kind === 'wildcard') {
      if (this.owesWildcardAnswer) this.forceAnswer(fan);
      return;
    }
    // An empty glob is said with the glob's own name in removed_resources.
    forEachSpelling(spellings, (s) => this.tellAbsent(s, fan));
  }

  /** The collection's content is known: members the reconnecting client listed and that are not in it are gone. */
  private collectionComplete(sub: Subscription, members: readonly CacheEntry[], fan: FanOut): void {
    // A state of the world held back for this answer goes out with this round.
    if (this.heldForAnswer) this.pendingFor(fan).forced = true;
    if (sub.kind === 'wildcard' && this.owesWildcardAnswer) this.forceAnswer(fan);
    const initial = this.initialNames;
    if (!initial) return;
    let present: Set<string> | undefined;
    for (const name of [...initial]) {
      const key = this.engine.heldKey(this.typeUrl, name);
      if (!key || key.collection !== sub.key) continue;
      this.claimSettled(name);
      present ??= new Set(members.map((m) => m.key));
      if (!this.names.has(name) && !present.has(key.key)) this.retract(name, fan);
    }
  }

  /**
   * Members of `coll` the reconnecting client listed that the relay does not
   * hold: until the collection's content is known, each is asked upstream by
   * itself, so a member deleted while the client was away is reported gone
   * even when no response can be told apart as the collection's answer.
   */
  private checkClaims(coll: Subscription, fan: FanOut): void {
    const initial = this.initialNames;
    if (!initial) return;
    for (const name of initial) {
      if (this.names.has(name) || this.claimChecks?.has(name)) continue;
      const key = this.engine.heldKey(this.typeUrl, name);
      if (!key || key.collection !== coll.key || this.engine.current(key.key)) continue;
      const check = new ClaimCheck(this.typeUrl, this.identity, this.engine, name, (n, entry, f) => this.claimAnswered(n, entry, f));
      (this.claimChecks ??= new Map()).set(name, check);
      if (!check.start(fan)) this.claimChecks.delete(name);
    }
  }

  /** A listed member's fate is known: it is no longer a claim to reconcile. */
  private claimSettled(name: string): void {
    const initial = this.initialNames;
    if (!initial?.delete(name)) return;
    if (initial.size === 0) this.initialNames = undefined;
    const check = this.claimChecks?.get(name);
    if (!check) return;
    this.claimChecks!.delete(name);
    check.cancel();
  }

  private claimAnswered(name: string, entry: CacheEntry | undefined, fan: FanOut): void {
    this.claimChecks?.delete(name);
    if (!this.initialNames?.has(name)) return;
    this.claimSettled(name);
    if (this.names.has(name) || !this.covered(name)) return;
    if (entry) this.offer(name, entry.variant(name, false), fan);
    else this.retract(name, fan);
  }

  private errorReported(sub: Subscription, spellings: Spellings, name: string, error: ResourceErrorInfo, fan: FanOut): void {
    const p = this.pendingFor(fan);
    if (p.errors === NO_ERRORS) p.errors = [];
    // Under the name the client knows: a member's canonical name, or each spelling of a singleton.
    const as = (n: string): ResourceErrorInfo => (n === error.name ? error : { ...error, name: n });
    if (sub.isCollection) p.errors.push(as(name));
    else forEachSpelling(spellings, (s) => p.errors.push(as(s)));
  }

  private heartbeat(spellings: Spellings, beat: CacheEntry, fan: FanOut): void {
    if (!this.stream.supportsTtl) return;
    forEachSpelling(spellings, (s) => {
      if (this.held.get(s) === beat.version) this.pendingFor(fan).adds.push(beat.variant(s, true));
    });
  }

  /** The engine dropped these spellings: they stay refused, and what they covered is taken back. */
  private withdrawn(sub: Subscription, spellings: Spellings, members: readonly CacheEntry[], fan: FanOut): void {
    forEachSpelling(spellings, (s) => {
      if (this.names.get(s) !== sub) return;
      this.names.set(s, null);
      if (sub.isCollection) {
        this.dropCollection(sub.key);
      } else {
        this.world?.delete(s);
        this.tellAbsent(s, fan);
      }
    });
    if (!sub.isCollection) return;
    for (const m of members) if (!this.names.has(m.name)) this.retract(m.name, fan);
    if (sub.kind === 'glob') forEachSpelling(spellings, (s) => this.tellAbsent(s, fan));
  }

  // --- pending changes -------------------------------------------------------

  /** The client holds `name` at a version other than `version` (or, without one, at any version). */
  private holdsOther(name: string, version?: string): boolean {
    const held = this.held.get(name);
    return held !== undefined && held !== TOLD_ABSENT && held !== version;
  }

  private pendingFor(fan: FanOut): Pending {
    fan.touch(this);
    return (this.pending ??= { adds: [], removes: NO_NAMES as string[], errors: NO_ERRORS as ResourceErrorInfo[], forced: false });
  }

  /** Queues `variant` unless the client already holds that version. */
  private offer(name: string, variant: Variant, fan: FanOut): void {
    if (this.held.get(name) === variant.version) return;
    this.notePrior(name);
    this.held.set(name, variant.version);
    this.world?.set(name, variant);
    const p = this.pendingFor(fan);
    if (p.removes.length > 0) p.mixed = true;
    p.adds.push(variant);
  }

  private queueRemove(name: string, fan: FanOut): void {
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
  private settlePending(p: Pending): void {
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

  /** Does-not-exist: said once, until the client holds it again. */
  private tellAbsent(name: string, fan: FanOut): void {
    if (this.held.get(name) === TOLD_ABSENT) return;
    this.notePrior(name);
    this.held.set(name, TOLD_ABSENT);
    this.world?.delete(name);
    this.queueRemove(name, fan);
  }

  /** A collection member went away: tell the client if it holds it. */
  private retract(name: string, fan: FanOut): void {
    const held = this.held.get(name);
    if (held === undefined || held === TOLD_ABSENT) return;
    this.notePrior(name);
    this.held.delete(name);
    this.world?.delete(name);
    this.queueRemove(name, fan);
  }

  private forceAnswer(fan: FanOut): void {
    this.owesWildcardAnswer = false;
    this.pendingFor(fan).forced = true;
  }

  // --- sending -----------------------------------------------------------------

  /** End of a fan-out round: send what is pending, or hold it back while the client is slow. */
  flush(fan: FanOut | undefined): void {
    const pending = this.pending;
    if (!pending) return;
    this.pending = undefined;
    if (pending.mixed) this.settlePending(pending);
    if (pending.adds.length === 0 && pending.removes.length === 0 && pending.errors.length === 0 && !pending.forced) return;
    if (this.world && this.awaitsFirstAnswer()) {
      this.holdForAnswer(pending);
      return;
    }
    if (this.heldForAnswer) {
      this.heldForAnswer = false;
      clearTimeout(this.answerTimer);
      this.answerTimer = undefined;
      this.addToBacklog(pending);
      this.drainBacklog();
      return;
    }
    if (this.stream.blocked || this.backlog) {
      this.coalesce(pending);
      return;
    }
    this.sendAll(this.builder.build(this, pending, fan), pending);
  }

  /**
   * Whether something the client lists was subscribed upstream and not
   * answered yet: a collection the upstream has not answered since it was
   * subscribed, or a name the client has not been sent (up to
   * FIRST_ANSWER_WAIT_MS: the upstream cannot always say which response
   * answers a collection). An upstream that is away answers nothing: the
   * cache's copy is all there is.
   */
  private awaitsFirstAnswer(): boolean {
    for (const [spelling, sub] of this.names) {
      if (sub && this.awaits(spelling, sub)) return true;
    }
    return false;
  }

  private awaits(spelling: string, sub: Subscription): boolean {
    if (!sub.upstream.connected || this.waitedFor?.has(sub)) return false;
    return sub.isCollection ? !sub.answered : !this.held.has(spelling);
  }

  private holdForAnswer(pending: Pending): void {
    this.heldForAnswer = true;
    this.addToBacklog(pending);
    this.answerTimer ??= setTimeout(() => this.stopWaiting(), FIRST_ANSWER_WAIT_MS);
    this.answerTimer.unref();
  }

  /** The wait ran out: the state goes out with what is known. */
  private stopWaiting(): void {
    this.answerTimer = undefined;
    for (const [spelling, sub] of this.names) if (sub && this.awaits(spelling, sub)) (this.waitedFor ??= new WeakSet()).add(sub);
    if (!this.heldForAnswer) return;
    this.heldForAnswer = false;
    this.drainBacklog();
  }

  private sendAll(responses: readonly OutgoingResponse[], pending: Pending): void {
    this.stream.statusChanged?.(this);
    if (this.builder.protocol === 'sotw' && pending.adds.length > 0) this.noteChanges(responses, pending);
    for (const r of responses) {
      this.unacked.push(r);
      this.lastNonce = r.nonce;
      this.stream.send(this, r);
    }
  }

  /** Slow client: the latest change per name wins. */
  private coalesce(pending: Pending): void {
    this.addToBacklog(pending);
    this.stream.statusChanged?.(this);
    this.stream.coalesced();
  }

  private addToBacklog(pending: Pending): void {
    const backlog = (this.backlog ??= new Map());
    for (const v of pending.adds) backlog.set(v.name, v);
    for (const n of pending.removes) backlog.set(n, null);
    if (pending.errors.length > 0) (this.backlogErrors ??= []).push(...pending.errors);
    if (pending.forced && backlog.size === 0) backlog.set('', null);
  }

  /** The client is reading again: send the backlog as one response (or several, by size). */
  drainBacklog(): void {
    const backlog = this.backlog;
    if (!backlog || this.stream.blocked || this.heldForAnswer) return;
    this.backlog = undefined;
    const pending: Pending = { adds: [], removes: [], errors: this.backlogErrors ?? [], forced: false };
    this.backlogErrors = undefined;
    for (const [name, v] of backlog) {
      if (name === '' && v === null) pending.forced = true;
      else if (v === null) pending.removes.push(name);
      else pending.adds.push(v);
    }
    this.sendAll(this.builder.build(this, pending, undefined), pending);
  }

  /** SotW: which response carries each changed name (a full-state response also repeats unchanged ones). */
  private noteChanges(responses: readonly OutgoingResponse[], pending: Pending): void {
    const changed = new Set<string>();
    for (const v of pending.adds) changed.add(v.name);
    const changedIn = (this.changedIn ??= new Map());
    for (const r of responses) for (const v of r.adds) if (changed.has(v.name)) changedIn.set(v.name, r.nonce);
  }
}
