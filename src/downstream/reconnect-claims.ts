import type { CacheEntry } from '../cache/memory-cache';
import type { FanOut } from '../engine/fan-out';
import type { Subscription } from '../engine/subscription';
import type { SubscriptionPort } from '../engine/types';
import { ClaimCheck, type ClaimAnswer } from './claim-check';

/**
 * The names a reconnecting client listed as held (delta
 * initial_resource_versions) that no known collection content has confirmed
 * or denied yet, and the claim checks asking the upstream about glob members
 * the relay does not hold (see claim-check.ts). A claim is settled — dropped
 * — once its fate is known: the member arrived, its collection's content is
 * known, its check answered, or the client stopped subscribing what covers it.
 */
export class ReconnectClaims {
  private readonly names = new Set<string>();
  private checks: Map<string, ClaimCheck> | undefined;

  constructor(
    private readonly typeUrl: string,
    private readonly engine: SubscriptionPort,
    private readonly onAnswer: ClaimAnswer,
  ) {}

  add(name: string): void {
    this.names.add(name);
  }

  /** No claim is left. */
  get empty(): boolean {
    return this.names.size === 0;
  }

  /** `name`'s fate is known: it is no longer a claim, and its check (if any) stops. False when it was no claim. */
  settle(name: string): boolean {
    if (!this.names.delete(name)) return false;
    const check = this.checks?.get(name);
    if (check) {
      this.checks!.delete(name);
      check.cancel();
    }
    return true;
  }

  /**
   * Collection `coll`'s content is known (`members`): every claim on one of
   * its members is settled. Returns the claimed members that are not in it
   * and that the client does not subscribe by name (`subscribed`): gone.
   */
  settleMembersOf(coll: Subscription, members: readonly CacheEntry[], subscribed: ReadonlyMap<string, unknown>): string[] {
    let present: Set<string> | undefined;
    const gone: string[] = [];
    for (const name of [...this.names]) {
      const key = this.engine.heldKey(this.typeUrl, name);
      if (!key || key.collection !== coll.key) continue;
      this.settle(name);
      present ??= new Set(members.map((m) => m.key));
      if (!subscribed.has(name) && !present.has(key.key)) gone.push(name);
    }
    return gone;
  }

  /**
   * Claimed members of `coll` the relay does not hold: until the
   * collection's content is known, each is asked upstream by itself, so a
   * member deleted while the client was away is reported gone even when no
   * response can be told apart as the collection's answer. Names the client
   * subscribes by name (`subscribed`) hear about it through that subscription.
   */
  check(coll: Subscription, identity: string | undefined, subscribed: ReadonlyMap<string, unknown>, fan: FanOut): void {
    for (const name of this.names) {
      if (subscribed.has(name) || this.checks?.has(name)) continue;
      const key = this.engine.heldKey(this.typeUrl, name);
      if (!key || key.collection !== coll.key || this.engine.current(key.key)) continue;
      const check = new ClaimCheck(this.typeUrl, identity, this.engine, name, this.onAnswer);
      (this.checks ??= new Map()).set(name, check);
      if (!check.start(fan)) this.checks.delete(name);
    }
  }

  /** The client's stream ended: every check stops. */
  cancel(): void {
    if (this.checks) for (const check of this.checks.values()) check.cancel();
    this.checks = undefined;
  }
}
