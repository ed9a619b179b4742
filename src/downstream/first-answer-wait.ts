import type { Subscription } from '../engine/subscription';

/**
 * How long a state of the world waits for the upstream to answer what the
 * client newly lists before it is sent with what is known so far (the
 * upstream cannot always say which response answers a collection).
 */
export const FIRST_ANSWER_WAIT_MS = 1000;

/**
 * State-of-the-world clients of full-state types: their state is held back
 * until the upstream has answered what the client newly lists — what the
 * cache knows of a collection may be only part, and a state of the world
 * without a resource the client held (it may be reconnecting) says it was
 * removed. Up to FIRST_ANSWER_WAIT_MS, after which the state goes out with
 * what is known (`onRunOut`).
 */
export class FirstAnswerWait {
  /** A state is held back for the answer. */
  private holding = false;
  /** Collections no longer waited for (the wait ran out). */
  private waitedFor: WeakSet<Subscription> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** The client's spellings → their subscriptions (null: refused). */
    private readonly names: ReadonlyMap<string, Subscription | null>,
    /** What the client holds (or will once it reads what was sent). */
    private readonly held: ReadonlyMap<string, string>,
    private readonly onRunOut: () => void,
  ) {}

  get waiting(): boolean {
    return this.holding;
  }

  /**
   * Whether something the client lists was subscribed upstream and not
   * answered yet: a collection the upstream has not answered since it was
   * subscribed, or a name the client has not been sent. An upstream that is
   * away answers nothing: the cache's copy is all there is.
   */
  awaited(): boolean {
    for (const [spelling, sub] of this.names) {
      if (sub && this.awaits(spelling, sub)) return true;
    }
    return false;
  }

  /** The state is held back until the answer comes or the wait runs out. */
  hold(): void {
    this.holding = true;
    this.timer ??= setTimeout(() => this.runOut(), FIRST_ANSWER_WAIT_MS);
    this.timer.unref();
  }

  /** The answer came: the state goes out now. False when nothing was held back. */
  end(): boolean {
    if (!this.holding) return false;
    this.holding = false;
    this.cancel();
    return true;
  }

  /** Stops the timer (the stream ended, or the answer came). */
  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Whether `spelling` (subscription `sub`) is still waited for: listed, subscribed upstream, not answered yet. */
  awaits(spelling: string, sub: Subscription): boolean {
    if (!sub.upstream.connected || this.waitedFor?.has(sub)) return false;
    return sub.isCollection ? !sub.answered : !this.held.has(spelling);
  }

  /** The wait ran out: what is still unanswered is no longer waited for, and the state goes out with what is known. */
  private runOut(): void {
    this.timer = undefined;
    for (const [spelling, sub] of this.names) if (sub && this.awaits(spelling, sub)) (this.waitedFor ??= new WeakSet()).add(sub);
    if (!this.holding) return;
    this.holding = false;
    this.onRunOut();
  }
}
