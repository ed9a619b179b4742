/**
 * Finding the subscription(s) a control plane cannot take.
 *
 * Some control planes end the whole stream when one subscribed name upsets
 * them (a validation bug, a name too long for them). Replaying the same set
 * on every reconnect would then stall the authority for everyone. This state
 * machine decides, with no timers and no I/O of its own, what goes out on each
 * stream and which names to give up on.
 *
 * Confirmation: a subscription request is *confirmed* once its stream has
 * stayed up `settleMs` after it was written. A response arriving meanwhile
 * does not confirm it: a control plane may answer part of a request and then
 * fail on the rest. A stream that ends with unconfirmed requests makes their
 * names *suspects*.
 *
 * Search: suspects form a group that is held back from the replay and sent
 * alone (a *probe*) once everything else on a new stream is confirmed. A probe
 * that is confirmed clears its names; a probe that ends the stream is halved
 * and both halves are probed in turn. A single name is rejected only when its
 * own probe ended a stream on which an earlier request had been confirmed, and
 * did so `strikes` times in a row: a control plane that fails every stream,
 * whatever it is asked, never gets a name rejected (its single-name probes go
 * to the back of the queue instead), and one unlucky restart is not enough.
 *
 * Only a stream the control plane ended itself is evidence. A stream that
 * ended because the server went away (a restart, a reset connection, GOAWAY:
 * `streamEnded(now, false)`) blames nothing: the names it had not confirmed
 * are replayed as usual and a probe under way is sent again as it was.
 */

export interface NamePair {
  typeUrl: string;
  name: string;
}

interface SentBatch {
  at: number;
  pairs: NamePair[];
  probe: boolean;
}

export interface PoisonBisectOptions {
  settleMs: number;
  /** Times a name's own probe must end a stream before it is rejected (default 2). */
  strikes?: number;
  /** Whether the relay still wants the name (names unsubscribed meanwhile are dropped from the search). */
  isDesired(typeUrl: string, name: string): boolean;
}

/** One key for a type URL and a name (the upstream's bookkeeping of names per type). */
export function pairKey(typeUrl: string, name: string): string {
  return `${typeUrl}\n${name}`;
}

export class PoisonBisect {
  /** Subscription requests written on the current stream and not yet confirmed. */
  private unconfirmed: SentBatch[] = [];
  /** Some subscription request of the current stream was confirmed. */
  private streamConfirmed = false;
  /** Groups still to probe, front first. */
  private queue: NamePair[][] = [];
  private probe: { pairs: NamePair[]; afterConfirmed: boolean } | undefined;
  /** Names in the queue or the probe: held back from replays and ordinary requests. */
  private readonly held = new Map<string, Set<string>>();
  /** Single-name probes that ended a stream after a confirmed request, by pair key. */
  private readonly strikes = new Map<string, number>();

  constructor(private readonly opts: PoisonBisectOptions) {}

  /** A search is under way: names are held back, and ordinary new subscriptions queue behind it. */
  get active(): boolean {
    return this.queue.length > 0 || this.probe !== undefined;
  }

  /** How many names are held back (queued or being probed). */
  get heldCount(): number {
    let n = 0;
    for (const names of this.held.values()) n += names.size;
    return n;
  }

  holds(typeUrl: string, name: string): boolean {
    return this.held.get(typeUrl)?.has(name) ?? false;
  }

  /** A new stream is up; it has sent nothing yet. */
  streamOpened(): void {
    this.unconfirmed = [];
    this.streamConfirmed = false;
  }

  /** An ordinary subscription request (replay or change) was written at `now`. */
  recordSent(pairs: NamePair[], now: number): void {
    this.settle(now);
    if (pairs.length > 0) this.unconfirmed.push({ at: now, pairs, probe: false });
  }

  /** Names subscribed during a search: they are probed after the groups already queued. */
  enqueue(pairs: NamePair[]): void {
    const group = pairs.filter((p) => this.hold(p));
    if (group.length > 0) this.queue.push(group);
  }

  /** The name is no longer wanted: stop holding it (it is skipped when its group comes up). */
  forget(typeUrl: string, name: string): void {
    if (this.strikes.size > 0) this.strikes.delete(pairKey(typeUrl, name));
    // Unsubscribed after its probe went out: the probe's confirmation no
    // longer speaks for it, and must not release a hold taken when the name
    // is subscribed again.
    if (this.probe) {
      for (const batch of this.unconfirmed) {
        if (batch.probe) batch.pairs = batch.pairs.filter((p) => p.typeUrl !== typeUrl || p.name !== name);
      }
    }
    const names = this.held.get(typeUrl);
    if (!names) return;
    names.delete(name);
    if (names.size === 0) this.held.delete(typeUrl);
  }

  /**
   * The next group to send on the current stream, or undefined when there is
   * none or the stream still has unconfirmed requests (the caller tries again
   * at `wakeAt()`). The caller writes it at `now`.
   */
  nextProbe(now: number): NamePair[] | undefined {
    this.settle(now);
    if (this.probe || this.unconfirmed.length > 0) return undefined;
    while (this.queue.length > 0) {
      const pairs = this.queue.shift()!.filter((p) => this.holds(p.typeUrl, p.name) && this.opts.isDesired(p.typeUrl, p.name));
      if (pairs.length === 0) continue;
      this.probe = { pairs, afterConfirmed: this.streamConfirmed };
      this.unconfirmed.push({ at: now, pairs, probe: true });
      return pairs;
    }
    return undefined;
  }

  /** When the oldest unconfirmed request of the current stream will be confirmed (if the stream lasts). */
  wakeAt(): number | undefined {
    const first = this.unconfirmed[0];
    return first ? first.at + this.opts.settleMs : undefined;
  }

  /**
   * The current stream ended at `now`. Returns the names to give up on; every
   * other suspect is queued for the next stream. `evidence`: the control plane
   * ended the stream itself; false when the server or connection went away,
   * which blames no name.
   */
  streamEnded(now: number, evidence = true): NamePair[] {
    this.settle(now);
    if (!evidence) {
      // Not a verdict on anything: the probe under way goes first again, whole.
      const probe = this.unconfirmed.find((b) => b.probe);
      if (probe) this.queue.unshift(probe.pairs);
      this.probe = undefined;
      this.unconfirmed = [];
      this.streamConfirmed = false;
      return [];
    }
    const rejected: NamePair[] = [];
    const front: NamePair[][] = [];
    const back: NamePair[][] = [];
    const suspects: NamePair[] = [];
    const seen = new Set<string>();
    for (const batch of this.unconfirmed) {
      if (!batch.probe) {
        for (const p of batch.pairs) {
          const key = pairKey(p.typeUrl, p.name);
          if (seen.has(key) || !this.opts.isDesired(p.typeUrl, p.name) || !this.hold(p)) continue;
          seen.add(key);
          suspects.push(p);
        }
        continue;
      }
      const pairs = batch.pairs.filter((p) => this.holds(p.typeUrl, p.name) && this.opts.isDesired(p.typeUrl, p.name));
      if (pairs.length > 1) {
        const mid = Math.ceil(pairs.length / 2);
        front.push(pairs.slice(0, mid), pairs.slice(mid));
      } else if (pairs.length === 1) {
        if (!this.probe?.afterConfirmed) {
          back.push(pairs);
          continue;
        }
        const key = pairKey(pairs[0].typeUrl, pairs[0].name);
        const strikes = (this.strikes.get(key) ?? 0) + 1;
        if (strikes >= (this.opts.strikes ?? 2)) {
          rejected.push(pairs[0]);
          this.forget(pairs[0].typeUrl, pairs[0].name);
        } else {
          this.strikes.set(key, strikes);
          front.push(pairs);
        }
      }
    }
    if (suspects.length > 0) front.push(suspects);
    this.queue = [...front, ...this.queue, ...back];
    this.probe = undefined;
    this.unconfirmed = [];
    this.streamConfirmed = false;
    return rejected;
  }

  /** Confirms what has been up for `settleMs`; a confirmed probe clears its names. */
  private settle(now: number): void {
    while (this.unconfirmed.length > 0 && this.unconfirmed[0].at + this.opts.settleMs <= now) {
      const batch = this.unconfirmed.shift()!;
      this.streamConfirmed = true;
      if (batch.probe) {
        for (const p of batch.pairs) this.forget(p.typeUrl, p.name);
        this.probe = undefined;
      }
    }
  }

  /** Holds a name back; false if it already was. */
  private hold(p: NamePair): boolean {
    let names = this.held.get(p.typeUrl);
    if (!names) this.held.set(p.typeUrl, (names = new Set()));
    if (names.has(p.name)) return false;
    names.add(p.name);
    return true;
  }
}
