/**
 * Fleet membership through the shared tier: each relay with --redis keeps a
 * record of itself there (where the others reach it, version, start time,
 * clients, drain state, upstream states) that expires unless its heartbeat
 * rewrites it, every third of the TTL. A relay that stops heartbeating leaves
 * the fleet within the TTL; one shutting down removes its record at once.
 * Nothing outside the shared tier knows the fleet.
 */
import * as os from 'node:os';
import { splitHostPort } from '../address';
import type { MemberRecords, SharedStore } from '../cache/types';
import { isWildcardHost } from '../address';
import type { Logger } from '../log';

/** A shared tier that may keep member records. */
export type MemberRecordsSource = Pick<SharedStore, 'memberRecords'>;

/** What a relay says about itself in each heartbeat. */
export interface MemberState {
  /** Where other relays reach it (HOST:PORT), or null when it has no routable address. */
  address: string | null;
  nodeId: string;
  version: string;
  /** ms since the epoch. */
  startedAt: number;
  clients: number;
  draining: boolean;
  /** Upstream authority → connection state. */
  upstreams: Record<string, string>;
}

/** A live member as read back: its record and how old its last heartbeat is. */
export interface FleetMember extends MemberState {
  id: string;
  ttlMs: number;
  /** ms since its last heartbeat, by the shared tier's clock. */
  heartbeatAgeMs: number;
}

/**
 * The address other relays dial: `--advertise`, else POD_IP with the bound
 * listen port, else the listen address when its host is not a wildcard; null
 * when none of these gives one.
 */
export function advertisedAddress(explicit: string | null | undefined, listen: string, boundPort: number, env: NodeJS.ProcessEnv = process.env): string | null {
  if (explicit) return explicit;
  const withPort = (host: string): string => (host.includes(':') ? `[${host}]:${boundPort}` : `${host}:${boundPort}`);
  const podIp = env.POD_IP?.trim();
  if (podIp) return withPort(podIp);
  const addr = splitHostPort(listen);
  if (addr && !isWildcardHost(addr.host)) return withPort(addr.host);
  return null;
}

/** A member's id: its address (one record per address, so a restarted relay replaces its predecessor), else host and process. */
export function memberId(address: string | null): string {
  return address ?? `${os.hostname()}/${process.pid}`;
}

function parseMember(id: string, value: string, ttlLeftMs: number): FleetMember | undefined {
  try {
    const r = JSON.parse(value) as Partial<MemberState> & { ttlMs?: unknown };
    if (typeof r.nodeId !== 'string' || typeof r.ttlMs !== 'number') return undefined;
    return {
      id,
      address: typeof r.address === 'string' ? r.address : null,
      nodeId: r.nodeId,
      version: typeof r.version === 'string' ? r.version : '',
      startedAt: typeof r.startedAt === 'number' ? r.startedAt : 0,
      clients: typeof r.clients === 'number' ? r.clients : 0,
      draining: r.draining === true,
      upstreams: r.upstreams && typeof r.upstreams === 'object' ? r.upstreams : {},
      ttlMs: r.ttlMs,
      heartbeatAgeMs: Math.max(0, r.ttlMs - ttlLeftMs),
    };
  } catch {
    return undefined;
  }
}

export interface FleetRegistryOptions {
  records: MemberRecords;
  /** This relay's id (memberId). */
  id: string;
  ttlMs: number;
  /** Read at every heartbeat. */
  state: () => MemberState;
  logger: Logger;
}

export class FleetRegistry {
  private timer: NodeJS.Timeout | undefined;
  private failing = false;
  private stopped = false;
  private beating: Promise<void> | undefined;

  constructor(private readonly opts: FleetRegistryOptions) {}

  get ttlMs(): number {
    return this.opts.ttlMs;
  }

  /** First heartbeat now, then every third of the TTL. */
  start(): void {
    void this.beat();
    this.timer = setInterval(() => void this.beat(), Math.max(100, Math.floor(this.opts.ttlMs / 3)));
    this.timer.unref();
  }

  private beat(): Promise<void> {
    if (this.stopped || this.beating) return this.beating ?? Promise.resolve();
    const { records, id, ttlMs, logger } = this.opts;
    const value = JSON.stringify({ ...this.opts.state(), ttlMs });
    this.beating = records
      .put(id, value, ttlMs)
      .then(
        () => {
          if (this.failing) logger.info({ id }, 'fleet heartbeat written again');
          this.failing = false;
        },
        (err: unknown) => {
          // Once per outage; the store counts each failure (xdstp_relay_redis_errors_total{op="fleet"}).
          if (!this.failing) logger.warn({ id, err: (err as Error).message }, 'fleet heartbeat not written: other relays will not see this one until it is');
          this.failing = true;
        },
      )
      .finally(() => (this.beating = undefined));
    return this.beating;
  }

  /** Every live member, this relay included; rejects when the shared tier cannot answer. */
  async members(): Promise<FleetMember[]> {
    const out: FleetMember[] = [];
    for (const r of await this.opts.records.list()) {
      const m = parseMember(r.id, r.value, r.ttlLeftMs);
      if (m) out.push(m);
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Stops heartbeating and removes this relay's record (bounded by the store's own deadline). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    await this.beating;
    await this.opts.records.remove(this.opts.id).catch((err: unknown) => {
      this.opts.logger.warn({ err: (err as Error).message }, 'fleet record not removed: it expires by itself');
    });
  }
}

/** GET /debug/fleet: the fleet as this relay sees it. */
export async function fleetView(registry: FleetRegistry | undefined, self: () => MemberState, selfId: string): Promise<Record<string, unknown>> {
  const row = (m: MemberState & { id: string; heartbeatAgeMs?: number }) => ({
    id: m.id,
    address: m.address,
    nodeId: m.nodeId,
    version: m.version,
    startTime: new Date(m.startedAt).toISOString(),
    heartbeatAgeMs: m.heartbeatAgeMs ?? null,
    clients: m.clients,
    draining: m.draining,
    upstreams: m.upstreams,
    self: m.id === selfId,
  });
  if (!registry) return { membership: 'none', note: 'no --redis: this relay alone', relays: [row({ ...self(), id: selfId })] };
  try {
    const members = await registry.members();
    return { membership: 'redis', ttlMs: registry.ttlMs, relays: members.map(row) };
  } catch (err) {
    return { membership: 'unavailable', error: (err as Error).message, relays: [row({ ...self(), id: selfId })] };
  }
}
