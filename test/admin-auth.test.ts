/**
 * The protected admin endpoints: with --admin-token, POST /drain, POST
 * /log-level, /debug/* and the HTML home page need `Authorization: Bearer <token>` (401
 * otherwise); without a token they answer loopback callers only (403
 * otherwise). Probes and the scrape stay open either way.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { withSecureRelay } from './support/secure-relay';
import { sleep } from './support/wait';

const T = { timeout: 20_000 };
const TOKEN = 'k8s-prestop-7f3a9c';

function tokenFile(contents: string): { file: string; cleanup(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-admin-'));
  const file = path.join(dir, 'token');
  fs.writeFileSync(file, contents);
  return { file, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

async function call(port: number, method: 'GET' | 'POST', pathname: string, token?: string, host = '127.0.0.1'): Promise<{ status: number; body: string; auth: string | null }> {
  const res = await fetch(`http://${host}:${port}${pathname}`, { method, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.text(), auth: res.headers.get('www-authenticate') };
}

test('with --admin-token, POST /drain without the token is refused with 401 and drains nothing', T, async () => {
  const t = tokenFile(`${TOKEN}\n`);
  try {
    await withSecureRelay({ admin: true, security: { adminToken: t.file } }, async ({ relay }) => {
      const port = relay.adminPort!;
      const r = await call(port, 'POST', '/drain');
      assert.equal(r.status, 401);
      assert.match(r.auth ?? '', /^Bearer/);
      assert.equal((await call(port, 'GET', '/readyz')).status, 200, 'still ready: no drain started');
      assert.equal((await call(port, 'POST', '/drain', 'not-the-token')).status, 401, 'a wrong token is refused too');
      assert.equal((await call(port, 'GET', '/readyz')).status, 200);
    });
  } finally {
    t.cleanup();
  }
});

test('with the token (surrounding whitespace in the file ignored), POST /drain and POST /log-level are accepted', T, async () => {
  const t = tokenFile(`  ${TOKEN}  \n\n`);
  try {
    await withSecureRelay({ admin: true, security: { adminToken: t.file } }, async ({ relay }) => {
      const port = relay.adminPort!;
      const level = await call(port, 'POST', '/log-level?level=debug', TOKEN);
      assert.equal(level.status, 200, level.body);
      assert.equal(relay.logger.level, 'debug');
      const drain = await call(port, 'POST', '/drain?period=0&wait=1', TOKEN);
      assert.equal(drain.status, 200, drain.body);
      assert.equal((await call(port, 'GET', '/readyz')).status, 503, 'draining');
    });
  } finally {
    t.cleanup();
  }
});

test('/debug/* needs the token; /metrics, /healthz and /readyz stay open', T, async () => {
  const t = tokenFile(TOKEN);
  try {
    await withSecureRelay({ admin: true, security: { adminToken: t.file } }, async ({ relay }) => {
      const port = relay.adminPort!;
      for (const p of ['/debug/clients', '/debug/subscriptions', '/debug/cache', '/debug/upstreams']) {
        assert.equal((await call(port, 'GET', p)).status, 401, p);
        assert.equal((await call(port, 'GET', p, TOKEN)).status, 200, `${p} with the token`);
      }
      for (const p of ['/metrics', '/healthz', '/readyz', '/log-level']) assert.equal((await call(port, 'GET', p)).status, 200, p);
      const metrics = (await call(port, 'GET', '/metrics')).body;
      assert.match(metrics, /xdstp_relay_admin_refused_total\{status="401"\} 4/);
    });
  } finally {
    t.cleanup();
  }
});

test('with --admin-token, the HTML home page needs the token like /debug/*; the JSON index at GET / stays open', T, async () => {
  const t = tokenFile(TOKEN);
  try {
    await withSecureRelay({ admin: true, security: { adminToken: t.file } }, async ({ relay }) => {
      const port = relay.adminPort!;
      const page = (token?: string): Promise<Response> =>
        fetch(`http://127.0.0.1:${port}/`, { headers: { accept: 'text/html,*/*;q=0.8', ...(token ? { authorization: `Bearer ${token}` } : {}) } });
      const refused = await page();
      assert.equal(refused.status, 401);
      assert.match(refused.headers.get('www-authenticate') ?? '', /^Bearer/);
      assert.equal((await call(port, 'GET', '/?format=html')).status, 401);
      const shown = await page(TOKEN);
      assert.equal(shown.status, 200);
      assert.match(await shown.text(), /<title>xdstp-relay admin<\/title>/);
      const index = await call(port, 'GET', '/');
      assert.equal(index.status, 200);
      assert.ok((JSON.parse(index.body) as { endpoints: Record<string, string> }).endpoints['GET /healthz']);
    });
  } finally {
    t.cleanup();
  }
});

test('a rotated admin token file takes effect: the new token works, the old one no longer does', T, async () => {
  const t = tokenFile(TOKEN);
  try {
    await withSecureRelay({ admin: true, security: { adminToken: t.file } }, async ({ relay }) => {
      const port = relay.adminPort!;
      assert.equal((await call(port, 'GET', '/debug/upstreams', TOKEN)).status, 200);
      fs.writeFileSync(t.file, 'the-next-token\n');
      const deadline = Date.now() + 10_000;
      while ((await call(port, 'GET', '/debug/upstreams', 'the-next-token')).status !== 200) {
        assert.ok(Date.now() < deadline, 'the new token is accepted within 10 s');
        await sleep(100);
      }
      assert.equal((await call(port, 'GET', '/debug/upstreams', TOKEN)).status, 401);
    });
  } finally {
    t.cleanup();
  }
});

/** An address of this machine that is not loopback, if it has one. */
function nonLoopbackAddress(): string | undefined {
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

const external = nonLoopbackAddress();
const noExternal = external === undefined && process.env.CI !== 'true' ? 'this machine has no non-loopback IPv4 address' : false;

test('without --admin-token, POST /drain and /debug/* answer loopback callers and refuse others with 403', { ...T, skip: noExternal }, async () => {
  await withSecureRelay({ admin: '0.0.0.0:0' }, async ({ relay }) => {
    const port = relay.adminPort!;
    assert.ok(external, 'a non-loopback address to call from');
    assert.equal((await call(port, 'GET', '/debug/upstreams', undefined, external)).status, 403);
    assert.equal((await call(port, 'GET', '/?format=html', undefined, external)).status, 403, 'the home page too');
    assert.equal((await call(port, 'GET', '/', undefined, external)).status, 200, 'the JSON index stays open');
    assert.equal((await call(port, 'POST', '/log-level?level=warn', undefined, external)).status, 403);
    assert.equal((await call(port, 'POST', '/drain', undefined, external)).status, 403);
    assert.equal((await call(port, 'GET', '/readyz', undefined, external)).status, 200, 'probes stay open; still ready');
    assert.equal((await call(port, 'GET', '/metrics', undefined, external)).status, 200);
    assert.equal((await call(port, 'GET', '/debug/upstreams')).status, 200, 'loopback is let through');
    assert.equal((await call(port, 'POST', '/log-level?level=warn')).status, 200);
  });
});

test('with --admin-token, even loopback callers need the token', T, async () => {
  const t = tokenFile(TOKEN);
  try {
    await withSecureRelay({ admin: true, security: { adminToken: t.file } }, async ({ relay }) => {
      assert.equal((await call(relay.adminPort!, 'POST', '/log-level?level=warn')).status, 401);
    });
  } finally {
    t.cleanup();
  }
});
