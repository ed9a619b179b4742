/**
 * The admin home page (GET / on the admin port), loaded by a real headless
 * Chromium from a live relay: a client that NACKs, one that asked for a name
 * the relay refuses, one in sync, an upstream that is up and one that is
 * down. Also: tools keep the JSON index at GET /, and the page is HTML
 * without scripts or external assets.
 *
 * ADMIN_PAGE_SCREENSHOT=docs/admin-page.png also saves the screenshot used in
 * docs/admin.md.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { escapeHtml, wantsHomePage } from '../src/admin/home-page';
import { pollUntil, withAdminRelay } from './support/admin';
import { chromiumSkip, dumpDom, screenshot } from './support/chromium';
import { CLUSTER, LISTENER, xdstp } from './support/names';

const T = { timeout: 120_000 };
const NACK_MESSAGE = 'Listener edge/main: port 0 is not a valid port <script>alert(1)</script>';

test('GET / stays the JSON index for tools; ?format=html and a browser\'s Accept get the HTML page', { timeout: 30_000 }, async () => {
  await withAdminRelay({}, async ({ adminPort }) => {
    const url = `http://127.0.0.1:${adminPort}`;
    const plain = await fetch(`${url}/`);
    assert.match(plain.headers.get('content-type') ?? '', /application\/json/);
    const index = (await plain.json()) as { service: string; endpoints: Record<string, string> };
    assert.equal(index.service, 'xdstp-relay');
    assert.ok('POST /drain?period=MS&wait=1' in index.endpoints);
    assert.ok('GET /?format=html' in index.endpoints);

    for (const res of [
      await fetch(`${url}/?format=html`),
      await fetch(`${url}/`, { headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' } }),
    ]) {
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html; charset=utf-8/);
      const html = await res.text();
      assert.match(html, /^<!doctype html>/);
      assert.doesNotMatch(html, /<script|<link|src=|@import|url\(/i, 'no script and no external asset');
    }
    const json = await fetch(`${url}/?format=json`, { headers: { accept: 'text/html' } });
    assert.match(json.headers.get('content-type') ?? '', /application\/json/);
  });
});

test('what asks for the page: the format parameter first, then Accept: text/html', () => {
  const q = (s: string): URLSearchParams => new URLSearchParams(s);
  assert.equal(wantsHomePage('text/html,*/*;q=0.8', q('')), true);
  assert.equal(wantsHomePage('application/xhtml+xml, text/html;q=0.9', q('')), true);
  assert.equal(wantsHomePage('*/*', q('')), false);
  assert.equal(wantsHomePage(undefined, q('')), false);
  assert.equal(wantsHomePage('application/json', q('')), false);
  assert.equal(wantsHomePage('*/*', q('format=html')), true);
  assert.equal(wantsHomePage('text/html', q('format=json')), false);
  assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
});

test('in a real Chromium, the admin page shows the NACKed client with its message, the refused and synced clients, and each upstream\'s state and last error', { ...T, skip: chromiumSkip('admin page in a browser') }, async () => {
  await withAdminRelay({ authorities: ['a', 'b'] }, async ({ origins, client, adminPort }) => {
    const listener = xdstp('a', LISTENER, 'edge/main');
    const cluster = xdstp('a', CLUSTER, 'edge/backend');
    origins.a!.setResource(LISTENER, listener, 'listener v1', 'v1');
    origins.a!.setResource(CLUSTER, cluster, 'cluster v1', 'v1');
    // Authority b's control plane is gone: its upstream retries, with the failure as its last error.
    await origins.b!.stop();

    const nacker = client({ nodeId: 'edge-nacker-1', reject: (resp) => ((resp.resources ?? []).some((r) => r.version === 'v2') ? NACK_MESSAGE : undefined) });
    const synced = client({ nodeId: 'edge-synced-1' });
    const refused = client({ nodeId: 'edge-refused-1' });
    nacker.subscribe(LISTENER, [listener]);
    // The name of b makes the relay subscribe upstream there (an upstream with nothing to ask for stays idle).
    synced.subscribe(CLUSTER, [cluster, xdstp('b', CLUSTER, 'edge/elsewhere')]);
    refused.subscribe(CLUSTER, [xdstp('nowhere', CLUSTER, 'x')]);
    await nacker.waitForVersion(LISTENER, listener, 'v1');
    await synced.waitForVersion(CLUSTER, cluster, 'v1');
    await refused.waitFor(() => refused.responses.length > 0, 'the refusal');
    origins.a!.setResource(LISTENER, listener, 'listener v2', 'v2');
    await nacker.waitFor(() => nacker.nacked.length > 0, 'the NACK of v2');

    const url = `http://127.0.0.1:${adminPort}/`;
    // The upstream of b has failed at least once (its last error is set) before the page is loaded.
    await pollUntil(async () => {
      const r = await fetch(`${url}debug/upstreams`);
      const body = (await r.json()) as { upstreams: Array<{ label: string; servers: Array<{ lastError: unknown }> }> };
      return body.upstreams.find((u) => u.label === 'b')?.servers.some((s) => s.lastError !== null);
    }, 'a last error for upstream b', 20_000);

    const dom = await dumpDom(url);
    assert.match(dom, /<title>xdstp-relay admin<\/title>/);

    // Upstreams: a ready, b not, with the error it last failed with.
    const upstreamRow = (label: string): string => {
      const m = new RegExp(`<tr class="upstream" data-authority="${label}" data-state="([^"]+)">`).exec(dom);
      assert.ok(m, `a row for upstream ${label}`);
      return m[1]!;
    };
    assert.equal(upstreamRow('a'), 'ready');
    assert.notEqual(upstreamRow('b'), 'ready');
    assert.match(dom, /last error: <span class="err">UNAVAILABLE: /, 'b\'s last error, with its gRPC code');

    // Clients: the NACKed one first, with its node id; the refused one as ERROR; the synced one.
    const clients = [...dom.matchAll(/<tr class="client" data-status="([A-Z]+)" data-node="([^"]*)">/g)].map((m) => [m[2], m[1]]);
    assert.deepEqual(clients, [
      ['edge-nacker-1', 'NACKED'],
      ['edge-refused-1', 'ERROR'],
      ['edge-synced-1', 'SYNCED'],
    ]);
    // By type and status.
    const listenerCounts = new RegExp(`<tr class="type-status" data-type="${LISTENER}">(.*?)</tr>`).exec(dom)?.[1] ?? '';
    assert.match(listenerCounts, /data-status="NACKED">1</);
    const clusterCounts = new RegExp(`<tr class="type-status" data-type="${CLUSTER}">(.*?)</tr>`).exec(dom)?.[1] ?? '';
    assert.match(clusterCounts, /data-status="ERROR">1</);
    assert.match(clusterCounts, /data-status="SYNCED">1</);

    // The NACK message, as text: the markup in it is escaped, never run or parsed.
    const message = /<tr class="nack-message"><td class="num">(\d+)<\/td><td>([^<]*)<\/td><td class="err">([^<]*)<\/td>/.exec(dom);
    assert.ok(message, 'a top NACK message row');
    assert.equal(message[1], '1');
    assert.equal(message[2], 'envoy.config.listener.v3.Listener');
    assert.equal(message[3], escapeHtml(NACK_MESSAGE).replace(/&quot;/g, '"').replace(/&#39;/g, "'"));
    assert.doesNotMatch(dom, /<script/i, 'the message\'s <script> is text');

    // Cache and limits, and links to the endpoints.
    assert.match(dom, /<section id="cache">/);
    assert.match(dom, /<section id="limits">.*No limit hit since start/s);
    for (const href of ['/healthz', '/readyz', '/metrics', '/debug/clients', '/debug/subscriptions', '/debug/cache', '/debug/upstreams', '/server_info', '/log-level']) {
      assert.ok(dom.includes(`href="${href}"`), `a link to ${href}`);
    }

    // The same page as a picture: Chromium renders it (and, when asked, the docs get it).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-admin-page-'));
    try {
      const png = path.join(dir, 'admin-page.png');
      await screenshot(url, png, 1100, 1000);
      const bytes = fs.readFileSync(png);
      assert.ok(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'a PNG');
      const target = process.env.ADMIN_PAGE_SCREENSHOT;
      if (target) fs.copyFileSync(png, path.resolve(target));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
