import type { CacheEntry } from '../cache/memory-cache';
import type { FanOut } from '../engine/fan-out';
import type { Spellings, Subscription, WatchUpdate, Watcher } from '../engine/subscription';
import type { SubscriptionPort } from '../engine/types';

/** What a claim check reports: the member's current content, or undefined when it does not exist. */
export type ClaimAnswer = (name: string, entry: CacheEntry | undefined, fan: FanOut) => void;

/**
 * Asks the upstream, through a subscription of its own, whether one glob
 * member a reconnecting client says it holds still exists.
 *
 * A relay that does not hold the glob yet learns its members from the
 * upstream's answer to the glob, but it cannot always tell which response is
 * that answer: when the client also subscribes members by name, a response
 * carrying only those members may be answering the names. Subscribing the
 * claimed member by itself gets an answer that cannot be mistaken — the
 * resource, or its removal — so the client is told it is gone only when it
 * is. The check leaves its subscription once answered.
 */
export class ClaimCheck implements Watcher {
  readonly relaysOwn = true;
  private sub: Subscription | undefined;
  private done = false;

  constructor(
    readonly typeUrl: string,
    readonly identity: string | undefined,
    private readonly engine: SubscriptionPort,
    private readonly name: string,
    private readonly onAnswer: ClaimAnswer,
  ) {}

  /** Joins the member's own subscription; false when it cannot be asked (refused). */
  start(fan: FanOut): boolean {
    const joined = this.engine.subscribe(this, this.name, fan);
    if (!('key' in joined)) return false;
    this.sub = joined;
    return true;
  }

  /** Stops waiting (the client's stream ended, or the answer came another way). */
  cancel(): void {
    if (this.done) return;
    this.done = true;
    const sub = this.sub;
    // Later: the engine may be iterating this subscription's watchers.
    if (sub) queueMicrotask(() => this.engine.leave(this, sub, this.name));
  }

  private settle(entry: CacheEntry | undefined, fan: FanOut): void {
    if (this.done) return;
    this.cancel();
    this.onAnswer(this.name, entry, fan);
  }

  update(_sub: Subscription, _spellings: Spellings, update: WatchUpdate, fan: FanOut): boolean {
    // A copy from the shared tier while the upstream is away settles nothing.
    if (update.kind === 'changed' && !update.keepHeld) this.settle(update.entry, fan);
    else if (update.kind === 'does-not-exist' && !update.keepHeld) this.settle(undefined, fan);
    else if (update.kind === 'withdrawn') this.done = true;
    return true;
  }
}
