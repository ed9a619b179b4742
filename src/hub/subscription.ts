import type { SubscriptionKind } from './routing';
import type { UpstreamPort } from '../upstream/types';
import type { Spellings, Watcher } from './types';

/** One deduplicated subscription: every watcher that asked for the same canonical key. */
export class Subscription {
  /** Watcher → the spelling(s) it used (answered back to it for singletons). */
  readonly watchers = new Map<Watcher, Spellings>();
  graceTimer: NodeJS.Timeout | undefined;
  /** Its content was marked do_not_cache: a new subscriber must be fetched upstream again. */
  refetch = false;
  /** A collection whose content the upstream has answered since it was subscribed. */
  answered = false;
  /** Time the upstream subscription was made (ms since the epoch), for status views. */
  readonly since = Date.now();

  constructor(
    readonly key: string,
    readonly kind: SubscriptionKind,
    readonly typeUrl: string,
    readonly upstream: UpstreamPort,
    readonly upstreamName: string,
    /** The authority the route named (null: default upstream). */
    readonly authority: string | null,
  ) {}

  get isCollection(): boolean {
    return this.kind === 'glob' || this.kind === 'wildcard';
  }
}
