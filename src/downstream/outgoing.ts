import type { Variant } from '../cache/memory-cache';
import type { ResourceErrorInfo } from '../proto/resource-error';

/**
 * What a client is told: the changes queued for it in one fan-out round, and
 * the encoded responses they become. Shared by the per-client state, its ACK
 * ledger and the response builders.
 */

/** Marker stored in `held` for a name the client has been told does not exist. */
export const TOLD_ABSENT = '\u0000absent';

/** An encoded response and what it tells the client; shared by every client that gets the same bytes. */
export interface OutgoingResponse {
  readonly typeUrl: string;
  readonly nonce: string;
  /** The encoded response. */
  readonly bytes: Buffer;
  /** The same with its gRPC message prefix, in the same allocation (proto/message-frame.ts): what goes on the wire. */
  readonly framed: Buffer;
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
