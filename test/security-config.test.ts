/**
 * The security options as an operator writes them: flags and config-file
 * keys, the authority object form with per-authority TLS, and `validate`
 * catching missing or mismatched certificate files and a broken policy.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { validateOptions, type AuthoritySpec } from '../src/config';
import { checkSecurity, mergeUpstreamTls } from '../src/security/config';
import { DEFAULT_LIMITS } from '../src/security/limits';
import { parseUpstreamUri } from '../src/upstream-uri';
import { TestPki, opensslSkip, type IssuedCert } from './support/certs';
import { runCliToExit } from './support/cli';

const skip = opensslSkip('security configuration tests');
const T = { timeout: 20_000, skip };
const nodeId = { nodeId: 'n' };

let pki: TestPki;
let server: IssuedCert;
let other: IssuedCert;

before(() => {
  if (skip) return;
  pki = TestPki.create();
  server = pki.issue('relay', { dns: ['localhost'] });
  other = pki.issue('other', { dns: ['other'] });
});

after(() => {
  if (!skip) pki.cleanup();
});

function problems(raw: Parameters<typeof validateOptions>[0]): string[] {
  return validateOptions(raw, nodeId).problems.map((p) => p.message);
}

test('grpcs:// server URIs are upstream URIs, with the same host:port rules as grpc://', () => {
  assert.deepEqual(parseUpstreamUri('grpcs://cp.example:443'), { scheme: 'grpcs', target: 'cp.example:443' });
  assert.deepEqual(parseUpstreamUri('grpcs://[::1]:8443/'), { scheme: 'grpcs', target: '[::1]:8443' });
  assert.throws(() => parseUpstreamUri('grpcs://cp.example'), /expected grpcs:\/\/host:port/);
  assert.deepEqual(problems({ authority: ['a=grpcs://cp.example:443'] }), []);
  assert.match(problems({ authority: ['a=https://cp.example:443'] }).join(), /unsupported scheme https:\/\/ \(use grpc:\/\/, grpcs:\/\/ or file:\/\/\)/);
});

test('the config-file authority form carries servers, ca, cert, key and server-name, with paths relative to the file', T, async () => {
  const dir = fs.mkdtempSync(path.join(pki.dir, 'cfg-'));
  fs.copyFileSync(pki.caCert, path.join(dir, 'ca.crt'));
  fs.copyFileSync(other.cert, path.join(dir, 'client.crt'));
  fs.copyFileSync(other.key, path.join(dir, 'client.key'));
  const file = path.join(dir, 'relay.yaml');
  fs.writeFileSync(
    file,
    [
      'listen: 127.0.0.1:18000',
      'admin: 127.0.0.1:9901',
      'authority:',
      '  mesh.example:',
      '    servers: [grpcs://10.0.0.1:18000, grpcs://10.0.0.2:18000]',
      '    ca: ca.crt',
      '    cert: client.crt',
      '    key: client.key',
      '    server-name: xds.mesh.example',
      '  plain: grpc://cp:1',
      '',
    ].join('\n'),
  );
  const res = await runCliToExit(['validate', '--config', file]);
  assert.equal(res.code, 0, res.stdout + res.stderr);
  assert.match(res.stdout, /upstreams: mesh\.example, plain/);

  fs.rmSync(path.join(dir, 'client.key'));
  const broken = await runCliToExit(['validate', '--config', file]);
  assert.equal(broken.code, 2);
  assert.match(broken.stdout, /authority\.mesh\.example: client key .*client\.key: no such file/);
});

test('an authority\'s own TLS settings win over the --upstream-tls-* defaults, and a certificate always comes with its own key', () => {
  const defaults = { caFile: '/d/ca', certFile: '/d/crt', keyFile: '/d/key', serverName: 'default.example' };
  assert.deepEqual(mergeUpstreamTls(undefined, defaults), defaults);
  assert.deepEqual(mergeUpstreamTls({ serverName: 'own.example' }, defaults), { ...defaults, serverName: 'own.example' });
  assert.deepEqual(mergeUpstreamTls({ certFile: '/o/crt', keyFile: '/o/key' }, defaults), { caFile: '/d/ca', certFile: '/o/crt', keyFile: '/o/key', serverName: 'default.example' });
  assert.deepEqual(mergeUpstreamTls({ certFile: '/o/crt' }, defaults), { caFile: '/d/ca', certFile: '/o/crt', serverName: 'default.example' }, 'never the default key with another certificate');
});

test('--upstream-tls-* defaults reach grpcs:// authorities only', T, () => {
  const authorities: AuthoritySpec[] = [
    { name: 'secure', uris: ['grpcs://cp:443'] },
    { name: 'plain', uris: ['grpc://cp:80'] },
  ];
  const { problems: found } = checkSecurity({ upstreamTlsCa: pki.caCert, upstreamTlsServerName: 'cp.example' }, authorities, null);
  assert.deepEqual(found, []);
  assert.deepEqual(authorities[0]!.tls, { caFile: pki.caCert, serverName: 'cp.example' });
  assert.equal(authorities[1]!.tls, undefined);
});

test('TLS settings on an authority without grpcs:// servers, and unknown keys in the authority form, are errors', () => {
  assert.match(problems({ authority: { a: { servers: ['grpc://cp:1'], ca: '/x/ca.crt' } } }).join(), /apply to grpcs:\/\/ servers, and this authority has none/);
  assert.match(problems({ authority: { a: { servers: ['grpcs://cp:1'], cacert: '/x/ca.crt' } } }).join(), /unknown key/);
  assert.match(problems({ authority: { a: { ca: '/x/ca.crt' } } }).join(), /missing: the list of grpc:\/\/ or grpcs:\/\/ server URIs/);
});

test('validate names a missing certificate, a key that is not the certificate\'s, a broken policy and an empty admin token, each at its flag', T, async () => {
  const dir = fs.mkdtempSync(path.join(pki.dir, 'bad-'));
  const policy = path.join(dir, 'policy.yaml');
  fs.writeFileSync(policy, 'rules:\n  - identities: [x]\n    authoritys: [a]\n');
  const token = path.join(dir, 'token');
  fs.writeFileSync(token, '  \n');
  const res = await runCliToExit([
    'validate',
    '--authority', 'a=grpc://cp:1',
    '--tls-cert', server.cert,
    '--tls-key', other.key,
    '--tls-client-ca', path.join(dir, 'missing-ca.crt'),
    '--policy', policy,
    '--admin-token', token,
  ]);
  assert.equal(res.code, 2, res.stdout + res.stderr);
  assert.match(res.stdout, /^ {2}tls-key: .*the private key does not belong to the certificate/m);
  assert.match(res.stdout, /^ {2}tls-client-ca: client CA .*missing-ca\.crt: no such file/m);
  assert.match(res.stdout, /^ {2}policy: .*rules\[0\]: unknown key "authoritys"/m);
  assert.match(res.stdout, /^ {2}admin-token: .*empty/m);
});

test('validate accepts working TLS, mTLS, policy and token files and says so', T, async () => {
  const dir = fs.mkdtempSync(path.join(pki.dir, 'good-'));
  const policy = path.join(dir, 'policy.json');
  fs.writeFileSync(policy, JSON.stringify({ rules: [{ identities: ['x'], authorities: ['a'] }] }));
  const token = path.join(dir, 'token');
  fs.writeFileSync(token, 's3cret\n');
  const res = await runCliToExit(['validate', '--authority', 'a=grpc://cp:1', '--tls-cert', server.cert, '--tls-key', server.key, '--tls-client-ca', pki.caCert, '--policy', policy, '--admin-token', token]);
  assert.equal(res.code, 0, res.stdout + res.stderr);
  assert.match(res.stdout, /listen \S+ mTLS, admin \S+ with token/);
  assert.match(res.stdout, /policy: .*policy\.json/);
});

test('TLS needs both --tls-cert and --tls-key; --tls-client-ca needs TLS', () => {
  assert.match(problems({ tlsCert: '/x.crt' }).join(), /both --tls-cert and --tls-key/);
  assert.match(problems({ tlsKey: '/x.key' }).join(), /both --tls-cert and --tls-key/);
  assert.match(problems({ tlsClientCa: '/ca.crt' }).join(), /mTLS\) need TLS/);
  assert.match(problems({ upstreamTlsCert: '/c.crt' }).join(), /give both --upstream-tls-cert and --upstream-tls-key/);
  assert.match(problems({ upstreamTlsCa: '/nonexistent/ca.crt' }).join(), /CA \/nonexistent\/ca\.crt: no such file/, 'checked even with no grpcs:// authority');
});

test('limit flags have defaults, take 0 where it means off, and bad values are named by flag', () => {
  const { config } = validateOptions({}, nodeId);
  assert.deepEqual(config?.security?.limits, DEFAULT_LIMITS);
  const off = validateOptions({ maxConnections: 0, maxConnectionsPerPeer: 0, minPingInterval: 0, maxConnectionIdle: 0 }, nodeId).config?.security?.limits;
  assert.equal(off?.maxConnections, 0);
  assert.equal(off?.minPingIntervalMs, 0);
  const set = validateOptions({ maxConcurrentStreams: 16, maxSubscriptionsPerStream: 500, maxNameLength: 1024, subscriptionRate: 50, subscriptionBurst: 500 }, nodeId).config?.security?.limits;
  assert.deepEqual(
    [set?.maxConcurrentStreams, set?.maxSubscriptionsPerStream, set?.maxNameLength, set?.subscriptionRate, set?.subscriptionBurst],
    [16, 500, 1024, 50, 500],
  );
  assert.match(problems({ maxConcurrentStreams: 0 }).join(), /^max-concurrent-streams: expected an integer from 1/);
  assert.match(problems({ maxNameLength: -1 }).join(), /^max-name-length: /);
  assert.match(problems({ subscriptionRate: 1.5 }).join(), /^subscription-rate: /);
  assert.match(problems({ maxConnectionsPerPeer: 'lots' }).join(), /^max-connections-per-peer: .*"lots"/);
});

test('a relay started with a certificate file that does not exist exits 2 with the reason', T, async () => {
  const res = await runCliToExit(['--authority', 'a=grpc://127.0.0.1:1', '--listen', '127.0.0.1:0', '--tls-cert', '/nonexistent/tls.crt', '--tls-key', server.key]);
  assert.equal(res.code, 2, res.stdout + res.stderr);
  assert.match(res.stderr, /tls-cert: certificate \/nonexistent\/tls\.crt: no such file/);
});

test('the security flags are in --help', async () => {
  const res = await runCliToExit(['--help']);
  for (const flag of ['--tls-cert', '--tls-key', '--tls-client-ca', '--upstream-tls-ca', '--upstream-tls-cert', '--upstream-tls-key', '--upstream-tls-server-name', '--policy', '--admin-token', '--max-concurrent-streams', '--max-connections', '--max-connections-per-peer', '--min-ping-interval', '--max-connection-idle', '--max-subscriptions-per-stream', '--max-name-length', '--subscription-rate', '--subscription-burst']) {
    assert.ok(res.stdout.includes(flag), `${flag} in --help`);
  }
});
