/**
 * Fleet-wide CSDS: the answer to a ClientStatusRequest that asks for the fleet
 * (src/fleet/convention.ts). This relay answers for its own clients, asks
 * every other live member of the fleet (src/fleet/registry.ts) in parallel
 * with a plain CSDS request carrying the caller's node matchers, each bounded
 * by a deadline, and merges: every client names the relay it is on, every
 * relay gets an entry saying whether it answered. Payloads are left out
 * across the whole answer above the same client count as on one relay.
 */
import * as grpc from '@grpc/grpc-js';
import { MAX_CLIENTS_WITH_CONTENTS } from '../downstream/csds';
import { compileNodeMatchers } from '../downstream/node-match';
import type { Logger } from '../log';
import { createCsdsClient, type ClientConfig, type ClientStatusRequest, type ClientStatusResponse } from '../proto/csds-messages';
import type { Node } from '../proto/messages';
import type { ChannelSetup } from '../security/tls';
import { memberEntry, memberInfoOf, nodeOnRelay, type FleetMemberInfo, type Membership } from './convention';
import type { FleetMember, MemberState } from './registry';

/** How long the relay asked waits for each peer (less when its caller's deadline is nearer). */
export const PEER_TIMEOUT_MS = 2000;
/** Left of the caller's deadline for merging and sending the answer. */
const ANSWER_MARGIN_MS = 200;

export interface FleetCsdsOptions {
  /** This relay's own answer (node matchers applied; throws NodeMatcherError on a malformed one). */
  local(request: ClientStatusRequest): ClientStatusResponse;
  /** This relay now: its record's fields. */
  self(): MemberState;
  /** This relay's member id (its entry is answered locally, never dialled). */
  selfId(): string;
  /** The node this relay presents when it asks its peers. */
  relayNode: Node;
  /** The live members, this relay included; absent without --redis (the relay answers alone). */
  members?: () => Promise<FleetMember[]>;
  /** Channel to a peer: TLS with the relay's client certificate when its own listener is TLS. */
  peerChannel(): ChannelSetup;
  peerTimeoutMs?: number;
  logger: Logger;
}

type PeerAnswer = { ok: true; response: ClientStatusResponse } | { ok: false; error: string };

function oneLine(err: grpc.ServiceError): string {
  // grpc-js appends an empty "Resolution note:" to connection failures.
  return `${grpc.status[err.code] ?? err.code}: ${(err.details || err.message).replace(/\s*Resolution note:\s*$/, '')}`;
}

/** One plain FetchClientStatus to a peer; never rejects. */
function askPeer(address: string, request: ClientStatusRequest, channel: ChannelSetup, timeoutMs: number): Promise<PeerAnswer> {
  // A private subchannel: a peer's address may be reused by a restarted relay with other certificates.
  const client = createCsdsClient(address, channel.credentials, { ...channel.options, 'grpc.use_local_subchannel_pool': 1 });
  return new Promise<PeerAnswer>((resolve) => {
    client.FetchClientStatus(request, { deadline: Date.now() + timeoutMs }, (err, response) => {
      resolve(err ? { ok: false, error: oneLine(err) } : { ok: true, response: response ?? {} });
    });
  }).finally(() => client.close());
}

function relayName(m: { address: string | null; id: string }): string {
  return m.address ?? m.id;
}

function recordInfo(m: MemberState): Pick<FleetMemberInfo, 'version' | 'started_at' | 'clients' | 'draining' | 'upstreams'> {
  return { version: m.version, started_at: new Date(m.startedAt).toISOString(), clients: m.clients, draining: m.draining, upstreams: m.upstreams };
}

/** Client entries of one relay's answer, each naming that relay (per-relay entries of a misdirected answer are dropped). */
function onRelay(configs: readonly ClientConfig[] | undefined, relay: string): ClientConfig[] {
  return (configs ?? []).filter((c) => memberInfoOf(c) === undefined).map((c) => ({ ...c, node: nodeOnRelay(c.node, relay) }));
}

export interface FleetCsds {
  /**
   * The merged answer; rejects with NodeMatcherError on a malformed matcher,
   * before asking anyone. Peers that have not answered by `deadlineMs` (less a
   * margin) are reported unreachable.
   */
  answer(request: ClientStatusRequest, deadlineMs?: number): Promise<ClientStatusResponse>;
}

export function createFleetCsds(opts: FleetCsdsOptions): FleetCsds {
  const timeoutMs = opts.peerTimeoutMs ?? PEER_TIMEOUT_MS;
  return {
    async answer(request, deadlineMs) {
      compileNodeMatchers(request.node_matchers);
      const self = opts.self();
      const selfId = opts.selfId();
      const selfName = relayName({ address: self.address, id: selfId });
      // Asked before the peers answer: this relay's clients as of the request.
      const own = opts.local(request);

      let membership: Membership = 'none';
      let note: string | undefined = 'no --redis: this relay answers alone';
      let members: FleetMember[] = [];
      if (opts.members) {
        try {
          members = await opts.members();
          membership = 'redis';
          note = undefined;
        } catch (err) {
          membership = 'unavailable';
          note = `fleet membership unreadable (redis): ${(err as Error).message}; this relay answers alone`;
          opts.logger.warn({ err: note }, 'fleet status: membership unreadable');
        }
      }
      const peers = members.filter((m) => m.id !== selfId);
      // Peers get the caller's matchers and contents choice under this relay's own node (its identity where node ids count).
      const peerRequest: ClientStatusRequest = { node: opts.relayNode };
      if (request.node_matchers) peerRequest.node_matchers = request.node_matchers;
      if (request.exclude_resource_contents) peerRequest.exclude_resource_contents = true;
      const peerTimeout = deadlineMs === undefined ? timeoutMs : Math.max(1, Math.min(timeoutMs, deadlineMs - Date.now() - ANSWER_MARGIN_MS));
      // One channel setup per answer (with TLS it reads the certificate files), shared by every peer.
      let channel: ChannelSetup | undefined;
      const answers = await Promise.all(
        peers.map((m): Promise<PeerAnswer> =>
          m.address === null
            ? Promise.resolve({ ok: false, error: 'no advertised address (set --advertise or POD_IP)' })
            : askPeer(m.address, peerRequest, (channel ??= opts.peerChannel()), peerTimeout),
        ),
      );

      const entries: ClientConfig[] = [
        memberEntry({
          relay: selfName,
          node_id: self.nodeId,
          reachable: true,
          answering: true,
          membership,
          ...(note ? { membership_note: note } : {}),
          ...recordInfo(self),
        }),
      ];
      const clients: ClientConfig[] = onRelay(own.config, selfName);
      peers.forEach((m, i) => {
        const a = answers[i]!;
        const name = relayName(m);
        const info: FleetMemberInfo = { relay: name, node_id: m.nodeId, reachable: a.ok, membership, heartbeat_age_ms: m.heartbeatAgeMs, ...recordInfo(m) };
        if (!a.ok) {
          info.error = a.error;
          opts.logger.info({ peer: name, err: a.error }, 'fleet status: a relay did not answer');
        } else clients.push(...onRelay(a.response.config, name));
        entries.push(memberEntry(info));
      });
      if (clients.length > MAX_CLIENTS_WITH_CONTENTS) {
        for (const c of clients) for (const g of c.generic_xds_configs ?? []) delete g.xds_config;
      }
      return { config: [...entries, ...clients] };
    },
  };
}
