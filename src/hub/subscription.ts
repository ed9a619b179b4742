import type { SubscriptionKind } from './routing';
import type { ClientView, UpstreamPort } from './types';

/** One deduplicated subscription: every client that asked for the same canonical key. */
export class Subscription {
  /** Client view → the spelling that client used (answered back to it for singletons). */
  readonly clients = new Map<ClientView, string>();
  graceTimer: NodeJS.Timeout | undefined;
  /** Its content was marked do_not_cache: a new subscriber must be fetched upstream again. */
  refetch = false;

  constructor(
    readonly key: string,
    readonly kind: SubscriptionKind,
    readonly typeUrl: string,
    readonly upstream: UpstreamPort,
    readonly upstreamName: string,
  ) {}

  get isCollection(): boolean {
    return this.kind === 'glob' || this.kind === 'wildcard';
  }
}
