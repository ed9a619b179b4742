/**
 * `xdstp-relay status` (also `npm run xds -- status`): asks one or several
 * relays for their clients' config status over CSDS (FetchClientStatus) and
 * prints one table — a row per client stream and per upstream authority, with
 * per-type counts of SYNCED / STALE / NACKED / NOT_SENT entries — followed by
 * the NACK messages; `--json` prints the same as one JSON document.
 *
 * `--node PATTERN` is a glob on the node id where `*` stands for any run of
 * characters: `edge-1` exact, `edge-*` prefix, `*-eu` suffix, `*edge*`
 * contains, anything else with a `*` a full-match regex. Sent as a CSDS
 * node matcher, so the relays do the filtering.
 *
 * `--fleet` asks the relay for every relay of its fleet (docs/fleet-status.md):
 * the RELAY column is then the relay each client is on, and a line per relay
 * (clients, synced / stale / NACKed, upstream states) follows, unreachable
 * relays included.
 */
import * as grpc from '@grpc/grpc-js';
import type { Argv } from 'yargs';
import { splitHostPort } from './address';
import {
  createCsdsClient,
  type ClientStatusRequest,
  type ClientStatusResponse,
  type ConfigStatusName,
  type NodeMatcherMsg,
  type Timestamp,
} from './proto/csds-messages';
import { fleetRequestNode, memberInfoOf, relayOf, type FleetMemberInfo } from './fleet/convention';
import { clientChannel, type ClientTls } from './security/client-channel';

export interface StatusOptions {
  servers: string[];
  node?: string;
  json: boolean;
  timeoutMs: number;
  /** Ask for the whole fleet of each relay given. */
  fleet?: boolean;
  /** TLS to relays that serve it (`--ca/--cert/--key/--server-name`); absent = plaintext. */
  tls?: ClientTls;
}

export type CountName = 'synced' | 'stale' | 'nacked' | 'not_sent' | 'unknown';
export type Counts = Record<CountName, number>;

export interface NackInfo {
  typeUrl: string;
  name: string;
  /** The version the client keeps using. */
  version: string;
  rejectedVersion: string;
  details: string;
  /** ISO time of the NACK, when known. */
  at?: string;
}

export interface StatusRow {
  relay: string;
  node: string;
  scope: string;
  protocol: string;
  /** Stream id, or the authority for upstream rows. */
  stream: string;
  types: Record<string, Counts>;
  nacks: NackInfo[];
}

export interface RelayOutcome {
  server: string;
  ok: boolean;
  error?: string;
  clients?: number;
}

const REGEX_SPECIAL = /[.*+?^${}()|[\]\\]/g;

/** The CSDS node matcher for a `--node` glob (see the file comment). */
export function nodeMatcherForPattern(pattern: string): NodeMatcherMsg | undefined {
  if (/^\**$/.test(pattern) && pattern !== '') return undefined; // `*`: every node
  const pieces = pattern.split('*');
  if (pieces.length === 1) return { node_id: { exact: pattern } };
  const inner = pieces.slice(1, -1);
  const first = pieces[0];
  const last = pieces[pieces.length - 1];
  if (pieces.length === 2) {
    if (last === '') return { node_id: { prefix: first } };
    if (first === '') return { node_id: { suffix: last } };
  }
  if (pieces.length === 3 && first === '' && last === '' && inner[0] !== '') return { node_id: { contains: inner[0] } };
  return { node_id: { safe_regex: { regex: pieces.map((p) => p.replace(REGEX_SPECIAL, '\\$&')).join('.*') } } };
}

export function statusRequest(node: string | undefined, fleet = false): ClientStatusRequest {
  const matcher = node === undefined ? undefined : nodeMatcherForPattern(node);
  // Counts and NACK messages need no payloads.
  const request: ClientStatusRequest = { exclude_resource_contents: true, ...(matcher ? { node_matchers: [matcher] } : {}) };
  if (fleet) request.node = fleetRequestNode({ id: 'xdstp-relay-status', user_agent_name: 'xdstp-relay-status' });
  return request;
}

const emptyCounts = (): Counts => ({ synced: 0, stale: 0, nacked: 0, not_sent: 0, unknown: 0 });

function countName(status: ConfigStatusName | undefined): CountName {
  switch (status) {
    case 'SYNCED':
      return 'synced';
    case 'STALE':
      return 'stale';
    case 'ERROR':
      return 'nacked';
    case 'NOT_SENT':
      return 'not_sent';
    default:
      return 'unknown';
  }
}

function isoOf(ts: Timestamp | undefined): string | undefined {
  if (!ts || ts.seconds === undefined) return undefined;
  return new Date(Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6)).toISOString();
}

function splitScope(scope: string): { protocol: string; stream: string } {
  const m = /^stream\/([^/]+)\/([^/]+)$/.exec(scope);
  if (m) return { protocol: m[2], stream: m[1] };
  if (scope.startsWith('upstream/')) return { protocol: 'upstream', stream: scope.slice('upstream/'.length) };
  return { protocol: '-', stream: scope };
}

/** One row per client (and upstream) entry of one relay's answer; in a fleet answer `relay` is the relay each client is on. */
export function rowsOf(relay: string, response: ClientStatusResponse): StatusRow[] {
  return (response.config ?? []).filter((c) => memberInfoOf(c) === undefined).map((c) => {
    const scope = c.client_scope ?? '';
    const types: Record<string, Counts> = {};
    const nacks: NackInfo[] = [];
    for (const g of c.generic_xds_configs ?? []) {
      const typeUrl = g.type_url ?? '';
      (types[typeUrl] ??= emptyCounts())[countName(g.config_status)]++;
      if (g.config_status === 'ERROR' || g.client_status === 'NACKED') {
        const nack: NackInfo = {
          typeUrl,
          name: g.name ?? '',
          version: g.version_info ?? '',
          rejectedVersion: g.error_state?.version_info ?? '',
          details: g.error_state?.details ?? '',
        };
        const at = isoOf(g.error_state?.last_update_attempt);
        if (at) nack.at = at;
        nacks.push(nack);
      }
    }
    return { relay: relayOf(c) ?? relay, node: c.node?.id ?? '', scope, ...splitScope(scope), types, nacks };
  });
}

/** `type.googleapis.com/envoy.config.listener.v3.Listener` → `Listener`. */
export function shortType(typeUrl: string): string {
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  return name.slice(name.lastIndexOf('.') + 1) || typeUrl;
}

/** Listener, RouteConfiguration, Cluster, ClusterLoadAssignment first (the order clients ask), then the rest by name. */
const TYPE_ORDER = ['Listener', 'RouteConfiguration', 'Cluster', 'ClusterLoadAssignment'];

function typeRank(typeUrl: string): [number, string] {
  const i = TYPE_ORDER.indexOf(shortType(typeUrl));
  return [i < 0 ? TYPE_ORDER.length : i, typeUrl];
}

const CELL_ORDER: Array<[CountName, string]> = [
  ['synced', 'SYNCED'],
  ['stale', 'STALE'],
  ['nacked', 'NACKED'],
  ['not_sent', 'NOT_SENT'],
  ['unknown', 'UNKNOWN'],
];

function cell(c: Counts | undefined): string {
  if (!c) return '-';
  const parts = CELL_ORDER.filter(([k]) => c[k] > 0).map(([k, label]) => `${c[k]} ${label}`);
  return parts.length > 0 ? parts.join(', ') : '-';
}

/** The human table (and NACK list) for rows from any number of relays. */
export function formatTable(rows: readonly StatusRow[]): string {
  const typeUrls = [...new Set(rows.flatMap((r) => Object.keys(r.types)))].sort((a, b) => {
    const [ra, na] = typeRank(a);
    const [rb, nb] = typeRank(b);
    return ra - rb || (na < nb ? -1 : na > nb ? 1 : 0);
  });
  const header = ['NODE', 'RELAY', 'PROTOCOL', 'STREAM', ...typeUrls.map(shortType)];
  const body = rows.map((r) => [r.node || '(none)', r.relay, r.protocol, r.stream, ...typeUrls.map((t) => cell(r.types[t]))]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((line) => line[i].length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('   ')
      .trimEnd();
  const out = [line(header), ...body.map(line)];
  if (rows.length === 0) out.push('(no clients)');
  const nacks = rows.flatMap((r) => r.nacks.map((n) => ({ r, n })));
  if (nacks.length > 0) {
    out.push('', 'NACKS');
    for (const { r, n } of nacks) {
      const rejected = n.rejectedVersion ? `rejected version ${n.rejectedVersion}` : 'rejected';
      const keeps = n.version ? `, keeps ${n.version}` : '';
      const when = n.at ? ` at ${n.at}` : '';
      out.push(`${r.node || '(none)'} @ ${r.relay} ${r.scope} ${shortType(n.typeUrl)} ${n.name}: ${rejected}${keeps}${when}: ${n.details}`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** One relay of a fleet answer, with its clients counted by their worst status. */
export interface FleetRelaySummary extends FleetMemberInfo {
  /** Client streams in this answer (node matchers applied). */
  streams: number;
  synced: number;
  stale: number;
  nacked: number;
}

/** The worst status of a client row: NACKed, else stale, else synced. */
export function rowSeverity(r: StatusRow): 'synced' | 'stale' | 'nacked' {
  const all = Object.values(r.types);
  if (r.nacks.length > 0 || all.some((c) => c.nacked > 0)) return 'nacked';
  return all.some((c) => c.stale > 0) ? 'stale' : 'synced';
}

/** The per-relay entries of fleet answers (one per relay, first answer wins), with their client rows counted. */
export function fleetSummaries(responses: readonly ClientStatusResponse[], rows: readonly StatusRow[]): FleetRelaySummary[] {
  const out = new Map<string, FleetRelaySummary>();
  for (const response of responses) {
    for (const c of response.config ?? []) {
      const info = memberInfoOf(c);
      if (info && !out.has(info.relay)) out.set(info.relay, { ...info, streams: 0, synced: 0, stale: 0, nacked: 0 });
    }
  }
  for (const r of rows) {
    const s = out.get(r.relay);
    if (!s || r.protocol === 'upstream') continue;
    s.streams++;
    s[rowSeverity(r)]++;
  }
  return [...out.values()];
}

/** One line per relay, unreachable ones said so. */
export function formatFleet(relays: readonly FleetRelaySummary[]): string {
  const out = ['', 'RELAYS'];
  for (const r of relays) {
    const who = `${r.relay} (${r.node_id || '?'})`;
    if (!r.reachable) {
      out.push(`${who}: UNREACHABLE: ${r.error ?? 'no answer'}`);
      continue;
    }
    const ups = Object.entries(r.upstreams ?? {}).map(([a, st]) => `${a}=${st}`).join(', ') || 'none';
    const flags = [r.answering ? 'answered for the fleet' : '', r.draining ? 'DRAINING' : ''].filter(Boolean).join(', ');
    // With --node, fewer than its clients match: say how many it has.
    const of = r.clients !== undefined && r.clients !== r.streams ? ` (of ${r.clients} connected)` : '';
    out.push(`${who}: ${r.streams} clients${of}: ${r.synced} synced, ${r.stale} stale, ${r.nacked} NACKed; upstreams ${ups}; version ${r.version ?? '?'}${flags ? `; ${flags}` : ''}`);
  }
  const notes = [...new Set(relays.map((r) => r.membership_note).filter((n): n is string => n !== undefined))];
  for (const n of notes) out.push(`note: ${n}`);
  return `${out.join('\n')}\n`;
}

/** One relay's answer; rejects with a one-line message. */
export function fetchClientStatus(server: string, request: ClientStatusRequest, timeoutMs: number, tls: ClientTls = {}): Promise<ClientStatusResponse> {
  let client;
  try {
    const channel = clientChannel(tls);
    client = createCsdsClient(server, channel.credentials, channel.options);
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
  return new Promise<ClientStatusResponse>((resolve, reject) => {
    client.FetchClientStatus(request, { deadline: Date.now() + timeoutMs }, (err, response) => {
      // grpc-js appends an empty "Resolution note:" to connection failures.
      if (err) reject(new Error(`${grpc.status[err.code] ?? err.code}: ${(err.details || err.message).replace(/\s*Resolution note:\s*$/, '')}`));
      else resolve(response ?? {});
    });
  }).finally(() => client.close());
}

/** `--server a:1,b:2 --server c:3` → [a:1, b:2, c:3]; throws on a malformed address. */
export function parseServers(values: readonly string[]): string[] {
  const servers = values.flatMap((v) => v.split(',')).map((s) => s.trim()).filter((s) => s !== '');
  if (servers.length === 0) throw new Error('--server: give at least one HOST:PORT');
  for (const s of servers) if (!splitHostPort(s)) throw new Error(`--server ${s}: expected HOST:PORT`);
  return servers;
}

/** Asks every relay (concurrently), prints, and returns the exit code: 0, or 1 if a relay did not answer. */
export async function runStatus(opts: StatusOptions, out: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream }): Promise<number> {
  const request = statusRequest(opts.node, opts.fleet === true);
  const answers = await Promise.all(
    opts.servers.map(async (server) => {
      try {
        return { server, response: await fetchClientStatus(server, request, opts.timeoutMs, opts.tls) };
      } catch (err) {
        return { server, error: (err as Error).message };
      }
    }),
  );
  let rows: StatusRow[] = [];
  const relays: RelayOutcome[] = [];
  const responses: ClientStatusResponse[] = [];
  for (const a of answers) {
    if (a.response) {
      const mine = rowsOf(a.server, a.response);
      rows.push(...mine);
      responses.push(a.response);
      relays.push({ server: a.server, ok: true, clients: mine.length });
    } else {
      relays.push({ server: a.server, ok: false, error: a.error });
    }
  }
  const failed = relays.filter((r) => !r.ok);
  if (!opts.fleet) {
    if (opts.json) out.stdout.write(`${JSON.stringify({ relays, clients: rows }, null, 2)}\n`);
    else out.stdout.write(formatTable(rows));
    for (const r of failed) out.stderr.write(`xdstp-relay status: ${r.server}: ${r.error}\n`);
    return failed.length > 0 ? 1 : 0;
  }
  // Several relays of one fleet give the same clients: each once.
  const seen = new Set<string>();
  rows = rows.filter((r) => {
    const k = `${r.relay}\n${r.scope}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const fleet = fleetSummaries(responses, rows);
  const unreachable = fleet.filter((r) => !r.reachable);
  if (opts.json) out.stdout.write(`${JSON.stringify({ relays, fleet, clients: rows }, null, 2)}\n`);
  else out.stdout.write(formatTable(rows) + formatFleet(fleet));
  for (const r of failed) out.stderr.write(`xdstp-relay status: ${r.server}: ${r.error}\n`);
  for (const r of unreachable) out.stderr.write(`xdstp-relay status: relay ${r.relay} did not answer: ${r.error ?? 'no answer'}\n`);
  return failed.length > 0 || unreachable.length > 0 ? 1 : 0;
}

/** The `status` options, shared by `xdstp-relay status` and `npm run xds -- status`. */
export function statusOptions<T>(y: Argv<T>) {
  return y
    .option('server', { type: 'string', array: true, demandOption: true, describe: 'relay HOST:PORT[,HOST:PORT…] (repeatable)' })
    .option('node', { type: 'string', describe: 'node id glob: exact, or * for any characters (edge-*, *-eu, *edge*)' })
    .option('json', { type: 'boolean', default: false, describe: 'print JSON instead of the table' })
    .option('timeout', { type: 'number', default: 5000, describe: 'ms to wait for each relay' })
    .option('fleet', { type: 'boolean', default: false, describe: 'every relay of the fleet (with --redis), each client with the relay it is on, and a line per relay' })
    .option('ca', { type: 'string', describe: 'TLS: PEM CA the relays\' certificates are verified against (TLS is on when --ca or --cert is given)' })
    .option('cert', { type: 'string', describe: 'mTLS: PEM client certificate (its identity needs csds: true in the relays\' policy)' })
    .option('key', { type: 'string', describe: 'mTLS: PEM private key of --cert' })
    .option('server-name', { type: 'string', describe: 'TLS: name to verify the relays\' certificates against instead of the --server host' });
}

export function statusOptionsOf(a: {
  server: string[];
  node?: string;
  json: boolean;
  timeout: number;
  fleet?: boolean;
  ca?: string;
  cert?: string;
  key?: string;
  'server-name'?: string;
}): StatusOptions {
  if (!a.cert !== !a.key) throw new Error('--cert and --key go together');
  const tls: ClientTls = { ca: a.ca, cert: a.cert, key: a.key, serverName: a['server-name'] };
  return { servers: parseServers(a.server), node: a.node, json: a.json, timeoutMs: a.timeout, fleet: a.fleet === true, tls };
}
