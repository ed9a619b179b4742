/**
 * Clients at a glance, for the admin home page: each client stream's status
 * per resource type, counts per type and status, and the NACK messages most
 * clients sent. Built from the same status source as CSDS
 * (src/downstream/status-view.ts), whose verdicts the xdstp_relay_clients
 * gauge counts too, so NACKED and STALE mean what they mean there. Read-only.
 */
import type { StatusClientView, StatusView } from './relay-views';
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

/** The status source's entry of each stream, by stream id (its scope is `stream/<id>/<protocol>`). */
function statusByStream(source: StatusView | undefined): Map<number, StatusClientView> {
  const out = new Map<number, StatusClientView>();
  if (!source) return out;
  for (const c of source.clients()) {
    const m = /^stream\/(\d+)\//.exec(c.scope);
    if (m) out.set(Number(m[1]), c);
  }
  return out;
}

export function summarizeClients(
  streams: Iterable<ClientStreamInfo>,
  source: StatusView | undefined,
  opts: { maxRows: number; maxMessages: number; now?: number },
): ClientSummary {
  const now = opts.now ?? Date.now();
  const status = statusByStream(source);
  const byType = new Map<string, Record<ClientTypeStatus, number>>();
  const rows: ClientRow[] = [];
  const messages = new Map<string, NackMessage>();
  let count = 0;
  for (const s of streams) {
    count++;
    const entry = status.get(s.id);
    const worst = new Map<string, string>();
    if (entry?.worstByType) for (const [typeUrl, severity] of entry.worstByType()) worst.set(typeUrl, severity);
    const types: ClientRow['types'] = [];
    let rowStatus: ClientTypeStatus = 'SYNCED';
    for (const state of s.states.values()) {
      if (state.names.size === 0) continue;
      let refused = 0;
      for (const sub of state.names.values()) if (sub === null) refused++;
      const severity = worst.get(state.typeUrl);
      const st: ClientTypeStatus = severity === 'nacked' ? 'NACKED' : refused > 0 ? 'ERROR' : severity === 'stale' ? 'STALE' : 'SYNCED';
      types.push({ typeUrl: state.typeUrl, status: st, names: state.names.size, refused, nacks: state.nacks });
      let counts = byType.get(state.typeUrl);
      if (!counts) byType.set(state.typeUrl, (counts = zero()));
      counts[st]++;
      if (RANK[st] > RANK[rowStatus]) rowStatus = st;
    }
    types.sort((a, b) => (a.typeUrl < b.typeUrl ? -1 : a.typeUrl > b.typeUrl ? 1 : 0));
    // The messages: only for clients that have a NACK standing (listing a client's resources costs its names).
    if (rowStatus === 'NACKED' && entry) {
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
    const node = s.node;
    rows.push({
      id: s.id,
      protocol: s.protocol,
      peer: s.peer,
      nodeId: node?.id ?? '',
      cluster: node?.cluster ?? '',
      ageSeconds: Math.max(0, Math.round((now - s.openedAt) / 1000)),
      status: rowStatus,
      types,
    });
  }
  rows.sort((a, b) => RANK[b.status] - RANK[a.status] || a.id - b.id);
  const nackMessages = [...messages.values()].sort((a, b) => b.clients - a.clients || (a.message < b.message ? -1 : 1));
  return { streams: count, byType, rows: rows.slice(0, opts.maxRows), nackMessages: nackMessages.slice(0, opts.maxMessages) };
}
