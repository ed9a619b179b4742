/**
 * The admin home page (GET / for a browser): one server-rendered HTML page
 * with what an operator looks at first — upstreams with their state and last
 * error, clients by type and status with the top NACK messages, the cache,
 * limits hit, and links to every endpoint. No scripts, no external assets;
 * every value from the relay is HTML-escaped. The data comes from the same
 * functions as /readyz, /debug/upstreams and the client status gauge.
 */
import type { ClientSummary, ClientTypeStatus } from './client-summary';
import { CLIENT_TYPE_STATUSES } from './client-summary';
import type { UpstreamInfo } from './debug';
import type { Readiness } from './readiness';

export interface LimitCount {
  /** Metric name. */
  metric: string;
  /** `label="value"` pairs, as in the exposition. */
  labels: string;
  value: number;
}

export interface HomePageInput {
  now: number;
  version?: string;
  startedAt?: number;
  nodeVersion: string;
  readiness: Readiness;
  upstreams: readonly UpstreamInfo[];
  clients: ClientSummary;
  cache: { resources: number; bytes: number; sharedTier: string };
  limits: readonly LimitCount[];
  /** The JSON index of GET /: `METHOD /path?params` → what it does. */
  endpoints: Readonly<Record<string, string>>;
}

/**
 * Whether GET / asks for this page rather than the JSON index: `?format=html`
 * or `?format=json` decide; otherwise a browser's `Accept: text/html` does
 * (curl and other tools send `*\/*` and keep getting JSON).
 */
export function wantsHomePage(accept: string | undefined, search: URLSearchParams): boolean {
  const format = search.get('format');
  if (format === 'html') return true;
  if (format !== null) return false;
  return /(^|,)\s*text\/html\s*(;|,|$)/i.test(accept ?? '');
}

/** Text → HTML text or attribute value. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&#39;'));
}

const e = escapeHtml;

function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The short name of a type URL: its message name. */
function typeName(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
}

function badge(text: string, kind: string): string {
  return `<span class="badge ${e(kind)}">${e(text)}</span>`;
}

function upstreamBadge(state: string): string {
  return badge(state, state === 'ready' ? 'ok' : state === 'connecting' || state === 'idle' || state === 'loading' ? 'warn' : 'bad');
}

const STATUS_KIND: Readonly<Record<ClientTypeStatus, string>> = { SYNCED: 'ok', STALE: 'warn', ERROR: 'bad', NACKED: 'bad' };

function statusBadge(s: ClientTypeStatus): string {
  return badge(s, STATUS_KIND[s]);
}

const STYLE = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:12px 20px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:18px;margin:0}
header span{color:#c8cdd8}
main{padding:8px 20px 24px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:14px 0;padding:10px 14px}
h2{font-size:15px;margin:4px 0 8px}
h3{font-size:13px;margin:12px 0 6px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceef2;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px;font-weight:600}
.ok{background:#d7f2dd;color:#17622b}.warn{background:#fdf0c8;color:#7a5700}.bad{background:#fbd9d7;color:#8f1d16}
.muted{color:#6b7385}
.err{color:#8f1d16}
.hit{font-weight:600;color:#8f1d16}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:8px}
.grid div{background:#f7f8fa;border:1px solid #eceef2;border-radius:4px;padding:6px 10px}
.grid b{display:block;font-size:18px}
ul.links{columns:2;margin:0;padding-left:18px}
`;

function overview(input: HomePageInput): string {
  const r = input.readiness;
  const cells: Array<[string, string]> = [
    ['ready', r.ready ? badge('ready', 'ok') : badge(r.draining ? 'draining' : 'not ready', 'bad')],
    ['client streams', String(input.clients.streams)],
    ['upstreams connected', `${input.upstreams.filter((u) => u.connected).length} / ${input.upstreams.length}`],
    ['cached resources', String(input.cache.resources)],
    ['cache size', bytes(input.cache.bytes)],
    ['shared tier (Redis)', r.redis === 'off' ? 'off' : r.redis === 'up' ? badge('up', 'ok') : badge('down', 'bad')],
  ];
  return `<section id="overview"><div class="grid">${cells.map(([k, v]) => `<div><span class="muted">${e(k)}</span><b>${v}</b></div>`).join('')}</div></section>`;
}

function lastError(err: { codeName: string; message: string; at: string } | null | undefined): string {
  if (!err) return '<span class="muted">none</span>';
  return `<span class="err">${e(err.codeName)}: ${e(err.message)}</span> <span class="muted">${e(err.at)}</span>`;
}

function upstreamsSection(input: HomePageInput): string {
  if (input.upstreams.length === 0) return '<section id="upstreams"><h2>Upstreams</h2><p class="muted">No upstream configured.</p></section>';
  const rows: string[] = [];
  for (const u of input.upstreams) {
    const st = u.status;
    const servers = st.servers ?? [];
    const extra: string[] = [];
    if (st.target) extra.push(`on <code>${e(st.target)}</code>`);
    if (st.dir) extra.push(`directory <code>${e(st.dir)}</code>`);
    if (st.rejectedNames) extra.push(`<span class="err">${st.rejectedNames} names given up on</span>`);
    if (st.rejected && st.rejected.length > 0) extra.push(`<span class="err">${st.rejected.length} files rejected: ${st.rejected.map((f) => `${e(f.file)} (${e(f.error)})`).join('; ')}</span>`);
    rows.push(
      `<tr class="upstream" data-authority="${e(u.label)}" data-state="${e(st.state)}">` +
        `<td><b>${e(u.label)}</b></td><td>${upstreamBadge(st.state)}</td><td class="num">${u.subscriptionCount()}</td>` +
        `<td>${extra.join('<br>') || '<span class="muted">–</span>'}</td></tr>`,
    );
    for (const s of servers) {
      rows.push(
        `<tr class="server"><td class="mono">&nbsp;&nbsp;${e(s.target)}</td><td>${s.state === 'standby' ? badge('standby', 'warn') : upstreamBadge(s.state)}</td><td></td>` +
          `<td>last error: ${lastError(s.lastError)}<br><span class="muted">last connected ${e(s.lastConnected ?? 'never')}, last response ${e(s.lastResponse ?? 'never')}</span></td></tr>`,
      );
    }
  }
  return (
    '<section id="upstreams"><h2>Upstreams</h2><table><thead><tr><th>authority / server</th><th>state</th><th class="num">subscriptions</th><th>details</th></tr></thead>' +
    `<tbody>${rows.join('')}</tbody></table></section>`
  );
}

function clientsSection(input: HomePageInput): string {
  const c = input.clients;
  const parts: string[] = ['<section id="clients"><h2>Clients</h2>'];
  if (c.byType.size === 0) {
    parts.push(`<p class="muted">${c.streams === 0 ? 'No client connected.' : `${c.streams} streams, none subscribed to anything yet.`}</p>`);
  } else {
    const head = CLIENT_TYPE_STATUSES.map((s) => `<th class="num">${statusBadge(s)}</th>`).join('');
    const body = [...c.byType.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([typeUrl, counts]) =>
        `<tr class="type-status" data-type="${e(typeUrl)}"><td>${e(typeName(typeUrl))}</td>` +
        CLIENT_TYPE_STATUSES.map((s) => `<td class="num${s !== 'SYNCED' && counts[s] > 0 ? ' hit' : ''}" data-status="${s}">${counts[s]}</td>`).join('') +
        '</tr>',
      )
      .join('');
    parts.push(`<h3>Client streams by type and status</h3><table><thead><tr><th>type</th>${head}</tr></thead><tbody>${body}</tbody></table>`);
    parts.push(
      '<p class="muted">NACKED: rejected the last version of a resource (it keeps its previous one; the relay does not resend a rejected version). ' +
        'ERROR: asked for names the relay refused (unroutable, denied by the policy, over a limit, or withdrawn later) and was told they do not exist. ' +
        'STALE: a change is on its way. SYNCED: holds what the relay has.</p>',
    );
  }
  if (c.nackMessages.length > 0) {
    const rows = c.nackMessages
      .map(
        (m) =>
          `<tr class="nack-message"><td class="num">${m.clients}</td><td>${e(typeName(m.typeUrl))}</td><td class="err">${e(m.message)}</td>` +
          `<td class="mono">${e(m.exampleName)} <span class="muted">@ ${e(m.rejectedVersion)}</span></td></tr>`,
      )
      .join('');
    parts.push(`<h3>Top NACK messages</h3><table><thead><tr><th class="num">clients</th><th>type</th><th>message</th><th>e.g. name @ rejected version</th></tr></thead><tbody>${rows}</tbody></table>`);
  }
  if (c.rows.length > 0) {
    const rows = c.rows
      .map(
        (r) =>
          `<tr class="client" data-status="${r.status}" data-node="${e(r.nodeId)}"><td class="num">${r.id}</td><td>${statusBadge(r.status)}</td>` +
          `<td><a href="/debug/clients?node=${e(encodeURIComponent(r.nodeId))}&amp;held=1">${e(r.nodeId) || '<span class="muted">(no node id)</span>'}</a>` +
          `${r.cluster ? ` <span class="muted">${e(r.cluster)}</span>` : ''}</td><td class="mono">${e(r.peer)}</td><td>${r.protocol}</td><td>${duration(r.ageSeconds)}</td>` +
          `<td>${r.types.map((t) => `${e(typeName(t.typeUrl))} ${statusBadge(t.status)} <span class="muted">${plural(t.names, 'name')}${t.refused ? `, ${t.refused} refused` : ''}${t.nacks ? `, ${plural(t.nacks, 'NACK')}` : ''}</span>`).join('<br>')}</td></tr>`,
      )
      .join('');
    const more = c.streams > c.rows.length ? `<p class="muted">${c.streams - c.rows.length} more streams: <a href="/debug/clients">/debug/clients</a>.</p>` : '';
    parts.push(
      `<h3>Client streams, worst first</h3><table><thead><tr><th class="num">id</th><th>status</th><th>node</th><th>peer</th><th>protocol</th><th>age</th><th>types</th></tr></thead><tbody>${rows}</tbody></table>${more}`,
    );
  }
  parts.push('</section>');
  return parts.join('');
}

function cacheSection(input: HomePageInput): string {
  const r = input.readiness;
  return (
    '<section id="cache"><h2>Cache</h2><table><tbody>' +
    `<tr><th>resources in memory</th><td class="num">${input.cache.resources}</td></tr>` +
    `<tr><th>bytes in memory</th><td class="num">${bytes(input.cache.bytes)}</td></tr>` +
    `<tr><th>shared tier</th><td class="num">${e(input.cache.sharedTier)}</td></tr>` +
    `<tr><th>can serve without upstream</th><td class="num">${r.cacheCanServe ? 'yes' : 'no'}</td></tr>` +
    '</tbody></table></section>'
  );
}

function limitsSection(input: HomePageInput): string {
  const hit = input.limits.filter((l) => l.value > 0);
  const rows = input.limits
    .map((l) => `<tr class="limit${l.value > 0 ? ' hit' : ''}"><td class="mono">${e(l.metric)}{${e(l.labels)}}</td><td class="num">${l.value}</td></tr>`)
    .join('');
  return (
    '<section id="limits"><h2>Limits hit</h2>' +
    `<p>${hit.length === 0 ? '<span class="muted">No limit hit since start.</span>' : `${hit.length} kinds of limit hit since start.`}</p>` +
    `<table><thead><tr><th>counter</th><th class="num">since start</th></tr></thead><tbody>${rows}</tbody></table></section>`
  );
}

function endpointsSection(input: HomePageInput): string {
  const items = Object.entries(input.endpoints).map(([key, what]) => {
    const space = key.indexOf(' ');
    const method = key.slice(0, space);
    const target = key.slice(space + 1);
    const path = target.split('?')[0]!;
    const label = `${e(method)} <code>${e(target)}</code>`;
    // GETs are links; POSTs change state and are not offered as links.
    return method === 'GET' ? `<li><a href="${e(path)}">${label}</a> — ${e(what)}</li>` : `<li>${label} — ${e(what)}</li>`;
  });
  return `<section id="endpoints"><h2>Endpoints</h2><ul class="links">${items.join('')}<li><a href="/?format=json">GET <code>/?format=json</code></a> — this index as JSON</li></ul></section>`;
}

export function renderHomePage(input: HomePageInput): string {
  const up = input.startedAt === undefined ? '' : `<span>up ${duration((input.now - input.startedAt) / 1000)}</span>`;
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    '<title>xdstp-relay admin</title>',
    `<style>${STYLE}</style></head><body>`,
    `<header><h1>xdstp-relay</h1>${input.version ? `<span>version ${e(input.version)}</span>` : ''}<span>Node ${e(input.nodeVersion)}</span>${up}`,
    `<span>${e(new Date(input.now).toISOString())}</span></header>`,
    '<main>',
    overview(input),
    upstreamsSection(input),
    clientsSection(input),
    cacheSection(input),
    limitsSection(input),
    endpointsSection(input),
    '</main></body></html>',
  ].join('\n');
}
