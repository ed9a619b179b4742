/**
 * How each server of an upstream last fared (its last failure, when a stream
 * to it last opened, when it last answered), as /debug/upstreams shows it,
 * and the latest failure of any of them (the cause the "upstream
 * unavailable" warning gives). Pure: the caller passes the clock.
 */
import * as grpc from '@grpc/grpc-js';
import type { UpstreamError, UpstreamServerStatus } from './types';

interface ServerRecord {
  lastError?: UpstreamError;
  lastConnectedAt?: number;
  lastResponseAt?: number;
}

function iso(t: number | undefined): string | null {
  return t === undefined ? null : new Date(t).toISOString();
}

export class ServerHistory {
  private readonly servers = new Map<string, ServerRecord>();
  private latest: UpstreamError | undefined;

  /** The latest failure of any server. */
  get lastError(): UpstreamError | undefined {
    return this.latest;
  }

  /** `target` failed with gRPC status `code` (UNAVAILABLE for a connection that never opened). */
  failed(target: string, code: number, message: string, now: number): void {
    const error = { code, codeName: String(grpc.status[code] ?? code), message, at: new Date(now).toISOString() };
    this.record(target).lastError = error;
    this.latest = error;
  }

  connected(target: string, now: number): void {
    this.record(target).lastConnectedAt = now;
  }

  responded(target: string, now: number): void {
    this.record(target).lastResponseAt = now;
  }

  /** Each of `targets` in failover order; `current` is in `state`, the others are on standby. */
  status(targets: readonly string[], current: string, state: string): UpstreamServerStatus[] {
    return targets.map((target) => {
      const r = this.record(target);
      return {
        target,
        state: target === current ? state : 'standby',
        lastError: r.lastError ?? null,
        lastConnected: iso(r.lastConnectedAt),
        lastResponse: iso(r.lastResponseAt),
      };
    });
  }

  private record(target: string): ServerRecord {
    let r = this.servers.get(target);
    if (!r) this.servers.set(target, (r = {}));
    return r;
  }
}
