/**
 * A client's identity from its verified certificate, read by a real grpc-js
 * server over mTLS (the credentials the relay serves with), with certificates
 * made by openssl at run time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { certificateIdentity, parseSubjectAltNames, peerIdentity } from '../src/security/identity';
import { createDownstreamTls, type DownstreamTls } from '../src/security/tls';
import { TestPki, opensslSkip, type IssuedCert } from './support/certs';

const skip = opensslSkip('identity tests');
const silent = pino({ level: 'silent' });
const METHOD = '/test.Identity/Who';

let pki: TestPki;
let server: grpc.Server;
let tls: DownstreamTls;
let port = 0;

before(async () => {
  if (skip) return;
  pki = TestPki.create();
  const relayCert = pki.issue('relay', { dns: ['localhost'], ips: ['127.0.0.1'] });
  tls = createDownstreamTls({ certFile: relayCert.cert, keyFile: relayCert.key, clientCaFile: pki.caCert }, { logger: silent });
  server = new grpc.Server();
  // Unary, raw bytes: the node id comes in as the request body; the reply is the identity.
  server.register(
    METHOD,
    (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const [nodeId, allow] = call.request.toString('utf8').split('\n');
      cb(null, Buffer.from(JSON.stringify(peerIdentity(call, nodeId || undefined, allow === 'allow') ?? null)));
    },
    (b: Buffer) => b,
    (b: Buffer) => b,
    'unary',
  );
  port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', tls.credentials, (e, p) => (e ? reject(e) : resolve(p))));
});

after(() => {
  if (skip) return;
  server.forceShutdown();
  tls.close();
  pki.cleanup();
});

function whoAmI(client: IssuedCert, nodeId = '', allowNodeId = false): Promise<string | null> {
  const creds = grpc.credentials.createSsl(pki.caPem, client.keyPem, client.certPem);
  const c = new grpc.Client(`127.0.0.1:${port}`, creds);
  return new Promise((resolve, reject) => {
    c.makeUnaryRequest(
      METHOD,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(`${nodeId}\n${allowNodeId ? 'allow' : ''}`),
      (err, reply) => {
        c.close();
        if (err) reject(err);
        else resolve(JSON.parse(reply!.toString('utf8')) as string | null);
      },
    );
  });
}

test('a URI SAN (SPIFFE id) is the identity, over DNS SANs and the CN', { skip }, async () => {
  const cert = pki.issue('web', { uris: ['spiffe://example.org/ns/web/sa/frontend'], dns: ['web.example.org'], cn: 'web-cn' });
  assert.equal(await whoAmI(cert), 'spiffe://example.org/ns/web/sa/frontend');
});

test('without URI SANs the first DNS SAN is the identity', { skip }, async () => {
  const cert = pki.issue('edge', { dns: ['edge-1.example.org', 'edge.example.org'], cn: 'edge-cn' });
  assert.equal(await whoAmI(cert), 'edge-1.example.org');
});

test('without SANs the subject CN is the identity', { skip }, async () => {
  const cert = pki.issue('plain', { cn: 'legacy-proxy' });
  assert.equal(await whoAmI(cert), 'legacy-proxy');
});

test('a node id never replaces a certificate identity, even when node-id identity is allowed', { skip }, async () => {
  const cert = pki.issue('web2', { uris: ['spiffe://example.org/ns/web/sa/b'] });
  assert.equal(await whoAmI(cert, 'spiffe://example.org/ns/admin/sa/root', true), 'spiffe://example.org/ns/web/sa/b');
});

test('a client without a certificate is known by its node id only when allowed', () => {
  const plaintext = { getAuthContext: () => ({}) };
  assert.equal(peerIdentity(plaintext, 'edge-7', false), undefined);
  assert.equal(peerIdentity(plaintext, 'edge-7', true), 'edge-7');
  assert.equal(peerIdentity(plaintext, '', true), undefined, 'an empty node id is no identity');
  assert.equal(peerIdentity(plaintext, undefined, true), undefined);
});

test('a SAN value Node quotes (comma inside) is one entry and cannot smuggle in another', () => {
  // How Node prints a URI SAN containing ", URI:" (JSON-quoted).
  const text = 'URI:"spiffe://evil.example/x, URI:spiffe://example.org/ns/admin", DNS:a.example';
  assert.deepEqual(parseSubjectAltNames(text), [
    { type: 'URI', value: 'spiffe://evil.example/x, URI:spiffe://example.org/ns/admin' },
    { type: 'DNS', value: 'a.example' },
  ]);
  assert.equal(certificateIdentity({ subjectaltname: text, subject: { CN: 'x' } as never }), 'spiffe://evil.example/x, URI:spiffe://example.org/ns/admin');
});

test('IP SANs and email SANs are not identities', () => {
  assert.equal(certificateIdentity({ subjectaltname: 'IP Address:10.0.0.1, email:a@b.c', subject: { CN: 'cn-1' } as never }), 'cn-1');
});
