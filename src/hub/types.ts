import type { Variant } from '../cache/memory-cache';

/** What the hub needs from an upstream: named subscriptions, batched by the upstream itself. */
export interface UpstreamPort {
  /** The authority it speaks for; null for the default upstream (legacy names). */
  readonly authority: string | null;
  /** Human-readable name for logs and metric labels. */
  readonly label: string;
  readonly connected: boolean;
  subscribe(typeUrl: string, name: string): void;
  unsubscribe(typeUrl: string, name: string): void;
  /** Asks again for a name already subscribed (its content was not cacheable). */
  refetch(typeUrl: string, name: string): void;
  subscriptionCount(): number;
}

/** An encoded response and what it tells the client. Shared by every client that gets the same bytes. */
export interface OutgoingResponse {
  readonly typeUrl: string;
  readonly nonce: string;
  readonly bytes: Buffer;
  readonly adds: readonly Variant[];
  readonly removes: readonly string[];
  /** hrtime (ns) of the upstream receipt that caused it, for the push-latency histogram. */
  readonly cause?: bigint;
}

/** The downstream side of a client stream, as the hub sees it. */
export interface ClientPort {
  readonly id: number;
  /** Delivers a response for one of the client's type views (writes, or coalesces if the client is slow). */
  push(view: ClientView, response: OutgoingResponse): void;
}

/** Marker stored in `ClientView.held` for a name the client has been told does not exist. */
export const TOLD_ABSENT = '\u0000absent';

/** One client stream's state for one type URL. */
export class ClientView {
  /** The client's own spelling of each subscription → the shared subscription it joined. */
  readonly subs = new Map<string, import('./subscription').Subscription | null>();
  /** Name as the client knows it → version last sent (or TOLD_ABSENT). */
  readonly held = new Map<string, string>();
  /** Set while the client is in legacy wildcard mode (an initial request without names). */
  implicitWildcard = false;

  constructor(
    readonly client: ClientPort,
    readonly typeUrl: string,
    readonly supportsTtl: boolean,
  ) {}
}
