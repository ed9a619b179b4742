/**
 * TLS on both sides of a real relay: mTLS for clients (accepted with a
 * CA-signed certificate, refused without one or with a foreign one), a
 * rotated server certificate picked up by new connections while an open
 * stream keeps working, and upstreams over grpcs:// with a client
 * certificate and a server-name override. Certificates come from openssl at
 * run time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { TestPki, opensslSkip, type IssuedCert } from './support/certs';
import type { DeltaClientOptions } from './support/delta-client';
import { LISTENER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { http } from './support/admin';
import { withSecureRelay } from './support/secure-relay';
import { sleep, waitUntil } from './support/wait';

const skip = opensslSkip('TLS tests');
const T = { timeout: 30_000, skip };
const NAME = xdstp('a', LISTENER, 'tls/one');

let pki: TestPki;
let relayCert: IssuedCert;
let clientCert: IssuedCert;

before(() => {
  if (skip) return;
  pki = TestPki.create('relay-ca');
  relayCert = pki.issue('relay', { dns: ['localhost'], ips: ['127.0.0.1'] });
  clientCert = pki.issue('web', { uris: ['spiffe://example.org/ns/web/sa/frontend'] });
});

after(() => {
  if (!skip) pki.cleanup();
});

/** DeltaClient options for a TLS client presenting `cert` (null: none); the relay's certificate names localhost. */
function tlsClient(cert: IssuedCert | null, extra: grpc.ChannelOptions = {}): DeltaClientOptions {
  return {
    credentials: grpc.credentials.createSsl(pki.caPem, cert?.keyPem ?? null, cert?.certPem ?? null),
    channelOptions: { 'grpc.ssl_target_name_override': 'localhost', ...extra },
  };
}

/** The fingerprint of the certificate a new TLS connection to `port` is shown. */
function servedFingerprint(port: number, client: IssuedCert): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', servername: 'localhost', port, ALPNProtocols: ['h2'], rejectUnauthorized: false, cert: client.certPem, key: client.keyPem }, () => {
      const fp = socket.getPeerCertificate().fingerprint256;
      socket.destroy();
      resolve(fp);
    });
    socket.on('error', reject);
  });
}

function fingerprintOf(cert: IssuedCert): string {
  return new X509Certificate(cert.certPem).fingerprint256;
}

/** Replace a file the way a Secret update does: write beside it, rename over it. */
function replaceFile(target: string, contents: Buffer): void {
  const tmp = `${target}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, contents);
  fs.renameSync(tmp, target);
}

test('mTLS: a client with a CA-signed certificate is served', T, async () => {
  const security = { tlsCert: relayCert.cert, tlsKey: relayCert.key, tlsClientCa: pki.caCert };
  await withSecureRelay({ security }, async ({ origin, client }) => {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    const c = client(tlsClient(clientCert));
    c.subscribe(LISTENER, [NAME]);
    await c.waitForVersion(LISTENER, NAME, 'v1');
    assert.equal(c.status, undefined, 'the stream stays open');
  });
});

test('mTLS: a client is known by its certificate, whatever node id it sends', T, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-policy-'));
  const policy = path.join(dir, 'policy.yaml');
  // Node ids are no identity here: only the certificate can match the rule.
  fs.writeFileSync(policy, 'allow-node-id-identity: false\nrules:\n  - identities: ["spiffe://example.org/ns/web/*"]\n    authorities: ["a"]\n');
  try {
    const security = { tlsCert: relayCert.cert, tlsKey: relayCert.key, tlsClientCa: pki.caCert, policy };
    await withSecureRelay({ security }, async ({ origin, client }) => {
      origin.setResource(LISTENER, NAME, 'payload', 'v1');
      const c = client({ ...tlsClient(clientCert), nodeId: 'some-node' });
      c.subscribe(LISTENER, [NAME]);
      await c.waitForVersion(LISTENER, NAME, 'v1');
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('mTLS: a client without a certificate is refused at the handshake', T, async () => {
  const security = { tlsCert: relayCert.cert, tlsKey: relayCert.key, tlsClientCa: pki.caCert };
  await withSecureRelay({ security }, async ({ origin, client, relay }) => {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    const c = client(tlsClient(null));
    c.subscribe(LISTENER, [NAME]);
    const end = await c.waitForEnd(10_000);
    assert.equal(end.code, grpc.status.UNAVAILABLE, end.details);
    assert.equal(c.responses.length, 0, 'not a byte of configuration');
    assert.ok(origin.requests.every((r) => !r.subscribe.includes(NAME)), 'nothing was subscribed upstream on its behalf');
    const failures = (await relay.metrics.registry.getSingleMetricAsString('xdstp_relay_tls_handshake_failures_total')).match(/ (\d+)$/m);
    assert.ok(Number(failures?.[1]) >= 1, 'the refused handshake is counted');
  });
});

test('mTLS: a client certificate from another CA is refused', T, async () => {
  const foreign = TestPki.create('foreign-ca');
  try {
    const impostor = foreign.issue('web', { uris: ['spiffe://example.org/ns/web/sa/frontend'] });
    const security = { tlsCert: relayCert.cert, tlsKey: relayCert.key, tlsClientCa: pki.caCert };
    await withSecureRelay({ security }, async ({ client }) => {
      const c = client(tlsClient(impostor));
      c.subscribe(LISTENER, [NAME]);
      const end = await c.waitForEnd(10_000);
      assert.equal(end.code, grpc.status.UNAVAILABLE, end.details);
      assert.equal(c.responses.length, 0);
    });
  } finally {
    foreign.cleanup();
  }
});

test('TLS without --tls-client-ca serves clients that have no certificate', T, async () => {
  await withSecureRelay({ security: { tlsCert: relayCert.cert, tlsKey: relayCert.key } }, async ({ origin, client }) => {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    const c = client(tlsClient(null));
    c.subscribe(LISTENER, [NAME]);
    await c.waitForVersion(LISTENER, NAME, 'v1');
  });
});

test('a rotated server certificate is served to new connections while an open stream keeps working', T, async () => {
  const dir = fs.mkdtempSync(path.join(pki.dir, 'rotate-'));
  const certFile = path.join(dir, 'tls.crt');
  const keyFile = path.join(dir, 'tls.key');
  fs.writeFileSync(certFile, relayCert.certPem);
  fs.writeFileSync(keyFile, relayCert.keyPem);
  const security = { tlsCert: certFile, tlsKey: keyFile, tlsClientCa: pki.caCert };
  await withSecureRelay({ security }, async ({ origin, client, relay }) => {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    const open = client(tlsClient(clientCert));
    open.subscribe(LISTENER, [NAME]);
    await open.waitForVersion(LISTENER, NAME, 'v1');
    assert.equal(await servedFingerprint(relay.port, clientCert), fingerprintOf(relayCert));

    const rotated = pki.issue('relay-rotated', { dns: ['localhost'], ips: ['127.0.0.1'] });
    replaceFile(keyFile, rotated.keyPem);
    replaceFile(certFile, rotated.certPem);
    const deadline = Date.now() + 10_000;
    while ((await servedFingerprint(relay.port, clientCert)) !== fingerprintOf(rotated)) {
      assert.ok(Date.now() < deadline, 'the rotated certificate is served within 10 s');
      await sleep(100);
    }

    origin.setResource(LISTENER, NAME, 'payload-2', 'v2');
    await open.waitForVersion(LISTENER, NAME, 'v2');
    assert.equal(open.status, undefined, 'the stream opened before the rotation is still open');

    const fresh = client(tlsClient(clientCert));
    fresh.subscribe(LISTENER, [NAME]);
    await fresh.waitForVersion(LISTENER, NAME, 'v2');
  });
});

test('a new certificate without its matching key is not served: the previous pair stays until the key arrives', T, async () => {
  const dir = fs.mkdtempSync(path.join(pki.dir, 'half-'));
  const certFile = path.join(dir, 'tls.crt');
  const keyFile = path.join(dir, 'tls.key');
  fs.writeFileSync(certFile, relayCert.certPem);
  fs.writeFileSync(keyFile, relayCert.keyPem);
  const security = { tlsCert: certFile, tlsKey: keyFile, tlsClientCa: pki.caCert };
  await withSecureRelay({ security }, async ({ relay, logs }) => {
    const next = pki.issue('relay-next', { dns: ['localhost'], ips: ['127.0.0.1'] });
    replaceFile(certFile, next.certPem);
    const line = await waitUntil(logs.events, () => logs.find('downstream TLS files not reloaded'), { timeoutMs: 10_000, what: 'the reload error' });
    assert.match(String(line.err), /does not belong to the certificate/);
    assert.equal(await servedFingerprint(relay.port, clientCert), fingerprintOf(relayCert), 'still the previous certificate');

    replaceFile(keyFile, next.keyPem);
    await waitUntil(logs.events, () => logs.find('downstream TLS certificate reloaded'), { timeoutMs: 10_000, what: 'the reload' });
    assert.equal(await servedFingerprint(relay.port, clientCert), fingerprintOf(next));
  });
});

test('an upstream over grpcs:// is reached with the authority\'s client certificate', T, async () => {
  const originCert = pki.issue('origin', { dns: ['localhost'], ips: ['127.0.0.1'] });
  const relayClient = pki.issue('relay-upstream-client', { cn: 'relay-upstream-client' });
  const origin = await TestOrigin.start({ label: 'tls-origin', tls: { cert: originCert.certPem, key: originCert.keyPem, clientCa: pki.caPem } });
  try {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    assert.match(origin.uri, /^grpcs:\/\//);
    const authority = { tls: { caFile: pki.caCert, certFile: relayClient.cert, keyFile: relayClient.key } };
    await withSecureRelay({ origin, authority }, async ({ client }) => {
      const c = client();
      c.subscribe(LISTENER, [NAME]);
      await c.waitForVersion(LISTENER, NAME, 'v1');
      assert.deepEqual(origin.clientCertificates, ['relay-upstream-client'], 'the origin saw the relay\'s certificate');
    });
  } finally {
    await origin.stop();
  }
});

test('server-name verifies an upstream certificate whose name differs from the address; without it the upstream is refused', T, async () => {
  const originCert = pki.issue('origin-named', { dns: ['xds.internal.example'] });
  const origin = await TestOrigin.start({ label: 'named-origin', tls: { cert: originCert.certPem, key: originCert.keyPem } });
  try {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    await withSecureRelay({ origin, authority: { tls: { caFile: pki.caCert, serverName: 'xds.internal.example' } } }, async ({ client }) => {
      const c = client();
      c.subscribe(LISTENER, [NAME]);
      await c.waitForVersion(LISTENER, NAME, 'v1');
    });
    await withSecureRelay({ origin, authority: { tls: { caFile: pki.caCert } }, admin: true }, async ({ client, relay }) => {
      const c = client();
      c.subscribe(LISTENER, [NAME]);
      const deadline = Date.now() + 10_000;
      for (;;) {
        const ready = (await http(relay.adminPort!, 'GET', '/readyz')).json as { upstreams: Record<string, { state: string }> };
        if (ready.upstreams.a?.state === 'backoff') break;
        assert.ok(Date.now() < deadline, `upstream state ${JSON.stringify(ready.upstreams)}`);
        await sleep(100);
      }
      assert.equal(c.responses.length, 0);
    });
    assert.equal(origin.totalStreams, 1, 'only the relay with the right server-name got a stream');
  } finally {
    await origin.stop();
  }
});

test('the debug client (npm run xds) reaches an mTLS relay with --ca, --cert, --key and --server-name', T, async () => {
  const security = { tlsCert: relayCert.cert, tlsKey: relayCert.key, tlsClientCa: pki.caCert };
  await withSecureRelay({ security }, async ({ origin, address }) => {
    origin.setResource(LISTENER, NAME, 'payload', 'v1');
    const tool = path.resolve(__dirname, '..', 'src', 'tools', 'xds-client.js');
    const args = [tool, 'subscribe', NAME, '--server', address, '--raw', '--compact', '--count', '1'];
    // Asynchronously: the relay runs in this process.
    const run = (extra: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
      new Promise((resolve) =>
        execFile(process.execPath, [...args, ...extra], { timeout: 15_000 }, (err, stdout, stderr) =>
          resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
        ),
      );
    const ok = await run(['--ca', pki.caCert, '--cert', clientCert.cert, '--key', clientCert.key, '--server-name', 'localhost', '--timeout', '10000']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /"version":"v1"/);
    const noCert = await run(['--ca', pki.caCert, '--server-name', 'localhost', '--timeout', '3000']);
    assert.notEqual(noCert.code, 0, 'refused without a client certificate');
  });
});
