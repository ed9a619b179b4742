/**
 * Clients at a glance, for the admin home page: each client stream's status
 * per resource type, counts per type and status, and the NACK messages most
 * clients sent. Built from the same status source as CSDS
 * (src/downstream/status-view.ts), whose verdicts the xdstp_relay_clients
 * gauge counts too, so NACKED and STALE mean what they mean there. Read-only.
 */
import type { StatusClientView, StatusView, TypeStateView } from './relay-views';
import type { ClientStreamInfo } from './debug';

/**
 * A client's status for one type, worst first: NACKED (it rejected the last
 * version of a resource), ERROR (the relay refused names it asked for:
 * unroutable, denied by the policy, over a limit, or withdrawn later; it was
 * told they do not exist), STALE (a change is on its way), SYNCED.
 */
export type ClientTypeStatus = 'NACKED' | 'ERROR' | 'STALE' | 'SYNCED';
export const CLIENT_TYPE_STATUSES: readonly ClientTypeStatus[] = ['NACKED', 'ERROR', 'STALE', 'SYNCED'];
const RANK: Readonly<Record<ClientTypeStatus, number>> = { NACKED: 3, ERROR: 2, STALE: 1, SYNCED: 0 };

export interface ClientRow {
  id: number;
  protocol: 'delta' | 'sotw';
  peer: string;
  nodeId: string;
  cluster: string;
  ageSeconds: number;
  /** Worst over its types. */
  status: ClientTypeStatus;
  types: Array<{ typeUrl: string; status: ClientTypeStatus; names: number; refused: number; nacks: number }>;
}

export interface NackMessage {
  message: string;
  typeUrl: string;
  /** Client streams whose current NACK carries this message. */
  clients: number;
  /** One of the rejected names, and the version rejected there. */
  exampleName: string;
  rejectedVersion: string;
}

export interface ClientSummary {
  streams: number;
  /** type URL → status → client streams. */
  byType: Map<string, Record<ClientTypeStatus, number>>;
  /** Worst first, then by id; at most `maxRows`. */
  rows: ClientRow[];
  /** Most clients first; at most `maxMessages`. */
  nackMessages: NackMessage[];
}

function zero(): Record<ClientTypeStatus, number> {
  return { NACKED: 0, ERROR: 0, STALE: 0, SYNCED: 0 };
}

/**
 * The status source's entries of the streams `ids`, by stream id (an entry's
 * scope is `stream/<id>/<protocol>`). Streams come first in the source, in
 * the order of the relay's stream set: the walk stops once all are found.
 */
function statusEntries(source: StatusView | undefined, ids: ReadonlySet<number>): Map<number, StatusClientView> {
  const out = new Map<number, StatusClientView>();
  if (!source || ids.size === 0) return out;
  for (const c of source.clients()) {
    const m = /^stream\/(\d+)\//.exec(c.scope);
    if (!m) break;
    const id = Number(m[1]);
    if (ids.has(id)) out.set(id, c);
    if (out.size === ids.size) break;
  }
  return out;
}

/** A stream's status for one type: the gauge's verdict, and ERROR where names were refused and nothing is NACKed. */
function typeStatus(stream: ClientStreamInfo, state: TypeStateView): ClientTypeStatus {
  const severity = stream.typeStatus(state.typeUrl);
  return severity === 'nacked' ? 'NACKED' : state.refusedCount > 0 ? 'ERROR' : severity === 'stale' ? 'STALE' : 'SYNCED';
}

function clientRow(s: ClientStreamInfo, status: ClientTypeStatus, now: number): ClientRow {
  const types: ClientRow['types'] = [];
  for (const state of s.states) {
    if (state.names.size === 0) continue;
    types.push({ typeUrl: state.typeUrl, status: typeStatus(s, state), names: state.names.size, refused: state.refusedCount, nacks: state.nacks });
  }
  types.sort((a, b) => (a.typeUrl < b.typeUrl ? -1 : a.typeUrl > b.typeUrl ? 1 : 0));
  return {
    id: s.id,
    protocol: s.protocol,
    peer: s.peer,
    nodeId: s.node?.id ?? '',
    cluster: s.node?.cluster ?? '',
    ageSeconds: Math.max(0, Math.round((now - s.openedAt) / 1000)),
    status,
    types,
  };
}

/**
 * Constant time per stream and type (the statuses are the client-status
 * counts', the refused names a count): the page costs the number of streams,
 * not of their names. Rows are built only for the streams shown, and NACK
 * messages only from streams with a NACK standing.
 */
export function summarizeClients(
  streams: Iterable<ClientStreamInfo>,
  source: StatusView | undefined,
  opts: { maxRows: number; maxMessages: number; now?: number },
): ClientSummary {
  const now = opts.now ?? Date.now();
  const byType = new Map<string, Record<ClientTypeStatus, number>>();
  const byStatus: Record<ClientTypeStatus, ClientStreamInfo[]> = { NACKED: [], ERROR: [], STALE: [], SYNCED: [] };
  let count = 0;
  for (const s of streams) {
    count++;
    let rowStatus: ClientTypeStatus = 'SYNCED';
    for (const state of s.states) {
      if (state.names.size === 0) continue;
      const st = typeStatus(s, state);
      let counts = byType.get(state.typeUrl);
      if (!counts) byType.set(state.typeUrl, (counts = zero()));
      counts[st]++;
      if (RANK[st] > RANK[rowStatus]) rowStatus = st;
    }
    byStatus[rowStatus].push(s);
  }

  // Rows for the streams shown only, worst first; a row's status is the group it was counted in.
  const rows: ClientRow[] = [];
  for (const status of CLIENT_TYPE_STATUSES) {
    const room = opts.maxRows - rows.length;
    if (room <= 0) break;
    for (const s of byStatus[status].sort((a, b) => a.id - b.id).slice(0, room)) rows.push(clientRow(s, status, now));
  }

  // The messages: only from streams with a NACK standing (listing a stream's resources costs its names).
  const messages = new Map<string, NackMessage>();
  for (const entry of statusEntries(source, new Set(byStatus.NACKED.map((s) => s.id))).values()) {
    const seen = new Set<string>();
    for (const r of entry.resources(false)) {
      if (!r.error) continue;
      const key = `${r.typeUrl}\n${r.error.details}`;
      let m = messages.get(key);
      if (!m) messages.set(key, (m = { message: r.error.details, typeUrl: r.typeUrl, clients: 0, exampleName: r.name, rejectedVersion: r.error.version }));
      if (!seen.has(key)) {
        seen.add(key);
        m.clients++;
      }
    }
  }
  const nackMessages = [...messages.values()].sort((a, b) => b.clients - a.clients || (a.message < b.message ? -1 : 1));
  return { streams: count, byType, rows, nackMessages: nackMessages.slice(0, opts.maxMessages) };
}
