/**
 * One relay's part in its fleet: its membership record (registry.ts) once it
 * is bound, the fleet CSDS answer (fleet-csds.ts) the CSDS service hands
 * fleet requests to, and the view behind GET /debug/fleet. Without --redis
 * the relay is a fleet of one.
 */
import type { RelayConfig } from '../config';
import { buildClientStatusResponse, type CsdsServiceOptions } from '../downstream/csds';
import type { StatusSource } from '../downstream/status-source';
import type { MemberRecords } from '../cache/types';
import type { Logger } from '../log';
import type { Node } from '../proto/messages';
import { insecureChannel, UpstreamTls, type ChannelSetup } from '../security/tls';
import { relayVersion } from '../version';
import { isFleetRequest } from './convention';
import { createFleetCsds, type FleetCsds } from './fleet-csds';
import { advertisedAddress, FleetRegistry, fleetView, memberId, type MemberRecordsSource, type MemberState } from './registry';

export interface RelayFleetDeps {
  config: RelayConfig;
  /** The shared tier; membership needs one that keeps member records (Redis). */
  shared: MemberRecordsSource | undefined;
  /** The node the relay presents upstream (and to its peers). */
  node: Node;
  statusSource: StatusSource;
  downstream: { readonly streams: { readonly size: number }; readonly draining: boolean };
  upstreams(): Iterable<{ readonly label: string; readonly status: { readonly state: string } }>;
  startedAt: number;
  logger: Logger;
}

export class RelayFleet {
  private address: string | null = null;
  private id = memberId(null);
  private registry: FleetRegistry | undefined;
  private leaving: Promise<void> | undefined;
  private readonly records: MemberRecords | undefined;
  private readonly fleetCsds: FleetCsds;
  /** For createCsdsService: which requests are fleet requests, and their answer. */
  readonly csds: NonNullable<CsdsServiceOptions['fleet']>;

  constructor(private readonly deps: RelayFleetDeps) {
    const { config, logger } = deps;
    this.records = config.redis ? deps.shared?.memberRecords?.() : undefined;
    // Relay-to-relay calls present the relay's upstream client certificate when its own listener is TLS (the peers check it like any client's).
    let peerChannel: () => ChannelSetup = insecureChannel;
    if (config.security?.tls) {
      const peerTls = new UpstreamTls(config.security.defaultUpstreamTls, logger.child({ component: 'fleet-tls' }));
      peerChannel = () => peerTls.channel();
    }
    this.fleetCsds = createFleetCsds({
      local: (request) => buildClientStatusResponse(deps.statusSource, request),
      self: () => this.state(),
      selfId: () => this.id,
      relayNode: deps.node,
      members: this.records ? () => this.registry?.members() ?? Promise.resolve([]) : undefined,
      peerChannel,
      logger,
    });
    this.csds = { wants: isFleetRequest, answer: (request, deadlineMs) => this.fleetCsds.answer(request, deadlineMs) };
  }

  /** What this relay says about itself. */
  state(): MemberState {
    const { config, downstream, startedAt } = this.deps;
    return {
      address: this.address,
      nodeId: config.nodeId,
      version: relayVersion(),
      startedAt,
      clients: downstream.streams.size,
      draining: downstream.draining,
      upstreams: Object.fromEntries([...this.deps.upstreams()].map((u) => [u.label, u.status.state])),
    };
  }

  /** Once the listener is bound: the advertised address, and (with --redis) the heartbeat. */
  join(boundPort: number): void {
    const { config, logger } = this.deps;
    this.address = advertisedAddress(config.advertise, config.listen, boundPort);
    this.id = memberId(this.address);
    // Membership needs --redis (this.records is only set with it).
    if (!this.records || !config.redis) return;
    if (this.address === null) {
      logger.warn({ listen: config.listen }, 'fleet: no address other relays can reach this one at (set --advertise or POD_IP); it is listed, but its clients are missing from fleet status');
    }
    const sec = config.security;
    if (sec?.tls?.clientCaFile && !sec.defaultUpstreamTls.certFile) {
      // Its peers (configured alike) require a client certificate, and it has none to present.
      logger.warn('fleet: clients need certificates here (--tls-client-ca) but --upstream-tls-cert is not set: the other relays will refuse this one\'s fleet status calls');
    }
    this.registry = new FleetRegistry({ records: this.records, id: this.id, ttlMs: config.redis.fleetHeartbeatTtlMs, state: () => this.state(), logger: logger.child({ component: 'fleet' }) });
    this.registry.start();
  }

  get advertised(): string | null {
    return this.address;
  }

  /** Stops the heartbeat and removes the record; resolves once removed (or given up). Idempotent. */
  leave(): Promise<void> {
    return (this.leaving ??= this.registry?.stop() ?? Promise.resolve());
  }

  /** GET /debug/fleet. */
  view(): Promise<Record<string, unknown>> {
    return fleetView(this.registry, () => this.state(), this.id);
  }
}

