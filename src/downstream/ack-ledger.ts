import type { Variant } from '../cache/memory-cache';
import { CompactMap } from '../compact-map';
import { TOLD_ABSENT, type OutgoingResponse } from './outgoing';

const NO_NAMES: readonly string[] = [];
const NO_RESPONSES: readonly OutgoingResponse[] = [];

/** A NACK the client sent: what it rejected, why and when. */
export interface Rejected {
  version: string;
  details: string;
  at: number;
  /** What the client kept instead (undefined: nothing). */
  kept: string | undefined;
}

/** What the client holds of a name as far as it has answered ('' or undefined for none), and whether a change is on its way. */
export interface ClientView {
  version: string | undefined;
  pending: boolean;
}

/**
 * One client stream's account, for one type URL, of what it was told and
 * what it answered: the version of each name it will hold once it has read
 * everything sent (`held`), what it held before changes it has not ACKed
 * yet, the responses in flight by nonce, the versions it NACKed and, for
 * state-of-the-world clients, which response last changed each name. The
 * per-client state (subscription-state.ts) decides what to send; the ledger
 * only records it and settles it when the client answers. No gRPC, no
 * timers: it is tested alone (test/ack-ledger.test.ts).
 */
export class AckLedger {
  /** Name as the client knows it → version last sent (or TOLD_ABSENT). */
  readonly held = new Map<string, string>();
  /** Responses sent and not yet ACKed or NACKed, oldest first; none (most of a stream's life): no list. */
  private awaitingAnswer: OutgoingResponse[] | undefined;
  private lastSent = '';
  private nackCount = 0;
  /** Names whose last sent version the client NACKed. */
  private rejectedNames: Map<string, Rejected> | undefined;
  /**
   * Name → what the client held before changes it has not ACKed yet (sent,
   * or held back while it is slow); `held` is what it will hold. Empty once
   * the client has ACKed everything. Under churn it goes from none to one
   * entry and back with each response: a CompactMap does that without a
   * table each time.
   */
  private prior: CompactMap<string, string | undefined> | undefined;
  /**
   * State of the world only: name → nonce (= version_info) of the sent
   * response that carries its latest change, and → version_info of the
   * ACKed response that last changed it — the version a SotW client reports
   * for a resource.
   */
  private changedIn: Map<string, string> | undefined;
  private ackedIn: Map<string, string> | undefined;
  /**
   * Names the client was left holding at a version other than the relay's
   * (fleet mode, upstream away: see WatchUpdate's `keepHeld`), the only way a
   * name is behind with nothing on its way. Candidates for status views,
   * pruned by them.
   */
  private behind: Set<string> | undefined;

  /** `tracksResponseVersions`: remember which response changed each name (state of the world: its version_info is what the client reports). */
  constructor(private readonly tracksResponseVersions: boolean) {}

  /** Responses sent and not yet ACKed or NACKed, oldest first. */
  get unacked(): readonly OutgoingResponse[] {
    return this.awaitingAnswer ?? NO_RESPONSES;
  }

  /** The last response's nonce ('' before the first). */
  get lastNonce(): string {
    return this.lastSent;
  }

  /** NACKs the client sent, known nonce or not. */
  get nacks(): number {
    return this.nackCount;
  }

  /** Names whose last sent version the client NACKed (undefined: none). */
  get rejected(): ReadonlyMap<string, Rejected> | undefined {
    return this.rejectedNames;
  }

  /**
   * Remembers what the client held of `name` before a change it has not ACKed
   * yet; call it before `held` changes. Nothing is recorded when it held
   * nothing: a first sync (a reconnect storm, a new client) then costs no
   * map, and status views find such names among the responses in flight instead.
   * `before`: `held`'s entry for `name`, which the caller has just read
   * (to decide whether anything changes).
   */
  notePrior(name: string, before: string | undefined): void {
    if (before === undefined) return;
    const prior = (this.prior ??= new CompactMap());
    if (!prior.has(name)) prior.set(name, before);
  }

  /** `responses` are about to be sent for changes `adds`: which response carries each changed name (a full-state response also repeats unchanged ones). */
  noteChanges(responses: readonly OutgoingResponse[], adds: readonly Variant[]): void {
    if (!this.tracksResponseVersions || adds.length === 0) return;
    const changed = new Set<string>();
    for (const v of adds) changed.add(v.name);
    const changedIn = (this.changedIn ??= new Map());
    for (const r of responses) for (const v of r.adds) if (changed.has(v.name)) changedIn.set(v.name, r.nonce);
  }

  /** `r` was sent: it waits for the client's ACK or NACK. */
  sent(r: OutgoingResponse): void {
    if (this.awaitingAnswer) this.awaitingAnswer.push(r);
    else this.awaitingAnswer = [r];
    this.lastSent = r.nonce;
  }

  /** ACK of the response with `nonce` (and of every earlier one); false when no response in flight has that nonce. */
  ack(nonce: string): boolean {
    const last = this.unackedIndex(nonce);
    if (last < 0) return false;
    // Plain ACKs are the hottest request: no allocation when nothing was rejected or is awaited.
    const tracking = (this.prior !== undefined && this.prior.size > 0) || this.rejectedNames !== undefined || this.changedIn !== undefined;
    if (tracking) for (let i = 0; i <= last; i++) this.settled(this.unacked[i]);
    if (this.rejectedNames?.size === 0) this.rejectedNames = undefined;
    this.dropUnacked(last);
    return true;
  }

  /** NACK of the response with `nonce`: the client keeps its previous state, and the versions it rejected are recorded. */
  nack(nonce: string, details: string): void {
    this.nackCount++;
    const last = this.unackedIndex(nonce);
    if (last < 0) return;
    for (let i = 0; i < last; i++) this.settled(this.unacked[i]);
    const at = Date.now();
    const rejected = (this.rejectedNames ??= new Map());
    for (const v of this.unacked[last].adds) {
      rejected.set(v.name, { version: v.version, details, at, kept: this.prior?.get(v.name) });
      this.prior?.delete(v.name);
    }
    this.dropUnacked(last);
  }

  /**
   * What the client holds of `name` when the ledger alone can say: the
   * version it kept after a NACK, or what it held before a change it has not
   * ACKed. Undefined otherwise (see held, and what is in flight).
   */
  answered(name: string): ClientView | undefined {
    const rejected = this.rejectedNames?.get(name);
    if (rejected) return { version: rejected.kept, pending: false };
    if (this.prior?.has(name)) return { version: this.prior.get(name), pending: true };
    return undefined;
  }

  /** Whether a response in flight (sent, not yet ACKed) changes `name`. For status views, not the hot path. */
  inFlight(name: string): boolean {
    for (const r of this.unacked) {
      if (r.removes.includes(name)) return true;
      for (const v of r.adds) if (v.name === name) return true;
    }
    return false;
  }

  /** Every name with a change sent and not ACKed (newest response first), then those with a prior version; possibly with repeats. */
  *namesInFlight(): Generator<string> {
    for (let i = this.unacked.length - 1; i >= 0; i--) {
      const r = this.unacked[i];
      for (const v of r.adds) yield v.name;
      yield* r.removes;
    }
    if (this.prior) yield* this.prior.keys();
  }

  /** State of the world: the version_info of the ACKed response that last changed `name` (undefined for none). */
  responseVersion(name: string): string | undefined {
    return this.ackedIn?.get(name);
  }

  /** The client is left holding `name` at a version other than the relay's. */
  keptBehind(name: string): void {
    (this.behind ??= new Set()).add(name);
  }

  /** Names that may be behind with nothing on their way (see keptBehind). */
  behindCandidates(): readonly string[] {
    return this.behind ? [...this.behind] : NO_NAMES;
  }

  /** A status view found `name` no longer behind: it becomes a candidate again only through keptBehind. */
  notBehind(name: string): void {
    this.behind?.delete(name);
    if (this.behind?.size === 0) this.behind = undefined;
  }

  /** What an ACKed response tells about the client: it now holds what the response carried. */
  private settled(r: OutgoingResponse): void {
    for (const v of r.adds) {
      this.rejectedNames?.delete(v.name);
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

  private unackedIndex(nonce: string): number {
    const q = this.unacked;
    // Almost always the newest response (clients answer in order).
    if (q.length > 0 && q[q.length - 1].nonce === nonce) return q.length - 1;
    return q.findIndex((r) => r.nonce === nonce);
  }

  private dropUnacked(last: number): void {
    const q = this.awaitingAnswer;
    if (!q || last === q.length - 1) this.awaitingAnswer = undefined;
    else q.splice(0, last + 1);
  }
}
