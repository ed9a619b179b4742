import type { ClientStatus } from '../metrics';
import type { Node } from '../proto/messages';
export type ConfigStatus = 'SYNCED' | 'STALE' | 'NOT_SENT' | 'ERROR';
export type ClientResourceStatus = 'REQUESTED' | 'DOES_NOT_EXIST' | 'ACKED' | 'NACKED';
export interface ResourceStatus {
  typeUrl: string;
  name: string;                // the client's spelling; glob/wildcard entries use the client's spelling of the glob; glob members their canonical name
  version: string;             // the version the client holds ('' if none)
  lastUpdated?: number;        // ms since the epoch when the client was last sent this name
  resource?: Buffer;           // the encoded envoy.service.discovery.v3.Resource; xds_config = its field 2 (Any). Absent when contents are excluded or there is none.
  configStatus: ConfigStatus;
  clientStatus: ClientResourceStatus;
  error?: { version: string; details: string; at: number };  // last NACK: rejected version, client's error message, when (ms)
}
export interface StatusClient {
  readonly scope: string;      // `stream/<id>/delta` | `stream/<id>/sotw` | `upstream/<authority>`
  readonly node: Node | undefined;
  resources(includeContents: boolean): ResourceStatus[];
}

/** How bad a resource's status is, for the per-client gauge. */
export type Severity = ClientStatus;
export const SEVERITY_RANK: Readonly<Record<Severity, number>> = { synced: 0, stale: 1, nacked: 2 };

/** A NACK (or an error) is worst, then a change still on its way; everything else counts as synced. */
export function severityOf(configStatus: ConfigStatus, clientStatus: ClientResourceStatus): Severity {
  return configStatus === 'ERROR' || clientStatus === 'NACKED' ? 'nacked' : configStatus === 'STALE' ? 'stale' : 'synced';
}
export interface StatusSource {
  /** Every connected client stream, then one entry per upstream authority (the relay's own view, node = the relay's node). */
  clients(): Iterable<StatusClient>;
}
