/**
 * How fleet-wide client status travels over plain CSDS (docs/fleet-status.md):
 *
 * - A ClientStatusRequest asks for the fleet when its `node` carries the
 *   metadata key `xdstp-relay.fleet` set to true (or the string "true").
 * - In the answer every client's `node.metadata` gains `xdstp-relay.relay`:
 *   the relay the client is connected to (its advertised address).
 * - One more ClientConfig per relay of the fleet, scope `relay/<relay>`, no
 *   resources, node = that relay's node id with `xdstp-relay.fleet_member`:
 *   whether it answered (and why not), its version, clients, drain state and
 *   upstream states, and how membership is known (`redis`, or `none` without
 *   --redis: the relay answered alone).
 *
 * Shared by the relay (src/fleet/fleet-csds.ts) and `xdstp-relay status`.
 */
import type { ClientConfig, ClientStatusRequest } from '../proto/csds-messages';
import type { Node } from '../proto/messages';
import { valueFromJson, valueToJson, type JsonObject } from '../typed-json/json-values';

export const FLEET_REQUEST_KEY = 'xdstp-relay.fleet';
export const RELAY_KEY = 'xdstp-relay.relay';
export const MEMBER_KEY = 'xdstp-relay.fleet_member';
export const RELAY_SCOPE_PREFIX = 'relay/';

/** How the answering relay knows the fleet. */
export type Membership = 'redis' | 'none' | 'unavailable';

/** What a fleet answer says about one relay (the `xdstp-relay.fleet_member` struct). */
export interface FleetMemberInfo {
  /** The relay's name in this answer: its advertised address, or its member id when it has none. */
  relay: string;
  node_id: string;
  /** It answered (the relay asked is always reachable). */
  reachable: boolean;
  /** Why it did not answer. */
  error?: string;
  /** The relay that was asked: this one answered for the fleet. */
  answering?: boolean;
  membership: Membership;
  /** Why membership is `none` or `unavailable`. */
  membership_note?: string;
  version?: string;
  /** ISO time the relay started. */
  started_at?: string;
  /** Age of its last heartbeat in ms (absent for the relay asked). */
  heartbeat_age_ms?: number;
  /** Client streams, as its last heartbeat (or the relay asked, now) reported. */
  clients?: number;
  draining?: boolean;
  /** Upstream authority → connection state (ready, connecting, backoff…). */
  upstreams?: Record<string, string>;
}

function metadataValue(node: Node | undefined, key: string): unknown {
  const fields = node?.metadata?.fields;
  return fields && Object.hasOwn(fields, key) ? valueToJson(fields[key] as JsonObject) : undefined;
}

/** Whether the request asks for every relay's clients. */
export function isFleetRequest(request: ClientStatusRequest): boolean {
  const v = metadataValue(request.node, FLEET_REQUEST_KEY);
  return v === true || v === 'true';
}

/** `node` (or an empty one) marked as asking for the fleet. */
export function fleetRequestNode(node: Node = {}): Node {
  return { ...node, metadata: { fields: { ...(node.metadata?.fields ?? {}), [FLEET_REQUEST_KEY]: valueFromJson(true) } } };
}

/** A copy of a client's node naming the relay it is connected to. */
export function nodeOnRelay(node: Node | undefined, relay: string): Node {
  return { ...(node ?? {}), metadata: { fields: { ...(node?.metadata?.fields ?? {}), [RELAY_KEY]: valueFromJson(relay) } } };
}

/** The relay a client of a fleet answer is on, if named. */
export function relayOf(config: ClientConfig): string | undefined {
  const v = metadataValue(config.node, RELAY_KEY);
  return typeof v === 'string' ? v : undefined;
}

/** The per-relay entry of a fleet answer. */
export function memberEntry(info: FleetMemberInfo): ClientConfig {
  const fields = { [RELAY_KEY]: valueFromJson(info.relay), [MEMBER_KEY]: valueFromJson(info) };
  return { client_scope: `${RELAY_SCOPE_PREFIX}${info.relay}`, node: { id: info.node_id, user_agent_name: 'xdstp-relay', metadata: { fields } }, generic_xds_configs: [] };
}

/** The FleetMemberInfo of a per-relay entry, or undefined for a client entry. */
export function memberInfoOf(config: ClientConfig): FleetMemberInfo | undefined {
  if (!(config.client_scope ?? '').startsWith(RELAY_SCOPE_PREFIX)) return undefined;
  const v = metadataValue(config.node, MEMBER_KEY);
  if (typeof v !== 'object' || v === null || typeof (v as { relay?: unknown }).relay !== 'string') return undefined;
  return v as FleetMemberInfo;
}
