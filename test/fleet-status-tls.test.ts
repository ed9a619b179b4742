/**
 * Fleet-wide client status under mTLS and a policy, with real relay processes
 * on one redis-server: fleet CSDS needs the `csds` grant like CSDS; the relays
 * call each other with their upstream client certificate, and each checks the
 * caller like any client (a relay whose identity is not granted is refused,
 * and reported so); the admin token protects /debug/fleet.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { memberInfoOf, relayOf } from '../src/fleet/convention';
import { createCsdsClient, type ClientStatusRequest, type ClientStatusResponse } from '../src/proto/csds-messages';
import { statusRequest } from '../src/status';
import { pollUntil } from './support/admin';
import { TestPki, opensslSkip, type IssuedCert } from './support/certs';
import { runCliToExit, spawnCli, type SpawnedCli } from './support/cli';
import { DeltaClient } from './support/delta-client';
import { CLUSTER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { RedisServer, redisSkip } from './support/redis-server';

const skip = redisSkip('fleet status over mTLS') || opensslSkip('fleet status over mTLS');
const T = { timeout: 30_000 };
const TOKEN = 'fleet-admin-4d1e';
const RELAY_ID = 'spiffe://example.org/relay';

const POLICY = `
rules:
  - identities: ["${RELAY_ID}", "spiffe://example.org/operator"]
    csds: true
  - identities: ["spiffe://example.org/web", "spiffe://example.org/rogue-relay"]
    authorities: ["a"]
`;

describe('fleet status over mTLS with a policy', { skip }, () => {
  let pki: TestPki;
  let redis: RedisServer;
  let origin: TestOrigin;
  let relayCert: IssuedCert;
  let rogueCert: IssuedCert;
  let operator: IssuedCert;
  let web: IssuedCert;
  const relays: SpawnedCli[] = [];
  const clients: DeltaClient[] = [];
  const creds = (c: IssuedCert): grpc.ChannelCredentials => grpc.credentials.createSsl(pki.caPem, c.keyPem, c.certPem);
  const addr = (r: SpawnedCli): string => `127.0.0.1:${r.port}`;

  function fetchAs(who: IssuedCert, address: string, request: ClientStatusRequest): Promise<ClientStatusResponse> {
    const client = createCsdsClient(address, creds(who));
    return new Promise<ClientStatusResponse>((resolve, reject) => {
      client.FetchClientStatus(request, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res ?? {})));
    }).finally(() => client.close());
  }

  async function startRelay(cert: IssuedCert, name: string, dir: string): Promise<SpawnedCli> {
    const r = await spawnCli(
      [
        '--listen', '127.0.0.1:0',
        '--node-id', name,
        '--authority', `a=${origin.uri}`,
        '--redis', redis.url,
        '--redis-prefix', `fleet-tls-${process.pid}:`,
        '--fleet-heartbeat-ttl', '3000',
        '--tls-cert', cert.cert,
        '--tls-key', cert.key,
        '--tls-client-ca', pki.caCert,
        '--upstream-tls-ca', pki.caCert,
        '--upstream-tls-cert', cert.cert,
        '--upstream-tls-key', cert.key,
        '--policy', path.join(dir, 'policy.yaml'),
        '--admin-token', path.join(dir, 'token'),
        '--shutdown-grace', '300',
      ],
      {},
      20_000,
    );
    relays.push(r);
    return r;
  }

  before(async () => {
    pki = TestPki.create('fleet-ca');
    fs.writeFileSync(path.join(pki.dir, 'policy.yaml'), POLICY);
    fs.writeFileSync(path.join(pki.dir, 'token'), TOKEN);
    relayCert = pki.issue('relay', { ips: ['127.0.0.1'], uris: [RELAY_ID] });
    rogueCert = pki.issue('rogue', { ips: ['127.0.0.1'], uris: ['spiffe://example.org/rogue-relay'] });
    operator = pki.issue('operator', { uris: ['spiffe://example.org/operator'] });
    web = pki.issue('web', { uris: ['spiffe://example.org/web'] });
    redis = await RedisServer.start();
    origin = await TestOrigin.start({ label: 'fleet-tls-origin' });
    origin.setResource(CLUSTER, xdstp('a', CLUSTER, 'tls/c1'), 'c1', 'v1');
    await Promise.all([startRelay(relayCert, 'relay-1', pki.dir), startRelay(relayCert, 'relay-2', pki.dir)]);
    // A web client on each relay.
    for (const [i, r] of relays.entries()) {
      const c = new DeltaClient(addr(r), { nodeId: `web-${i + 1}`, credentials: creds(web) });
      clients.push(c);
      c.subscribe(CLUSTER, [xdstp('a', CLUSTER, 'tls/c1')]);
      await c.waitForVersion(CLUSTER, xdstp('a', CLUSTER, 'tls/c1'), 'v1');
    }
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.all(relays.map((r) => r.stop()));
    await origin?.stop();
    await redis?.dispose();
    pki?.cleanup();
  });

  test('an identity granted csds gets the whole fleet: the relays called each other with their certificate', T, async () => {
    const [first, second] = relays as [SpawnedCli, SpawnedCli];
    const res = await pollUntil(async () => {
      const r = await fetchAs(operator, addr(first), statusRequest(undefined, true));
      return (r.config ?? []).filter((c) => memberInfoOf(c)).length === 2 ? r : undefined;
    }, 'both relays in the fleet');
    const infos = res.config!.map(memberInfoOf).filter((i) => i !== undefined);
    assert.deepEqual(infos.map((i) => [i.relay, i.reachable, i.error]).sort(), [[addr(first), true, undefined], [addr(second), true, undefined]].sort());
    const streams = res.config!.filter((c) => (c.client_scope ?? '').startsWith('stream/'));
    assert.deepEqual(streams.map((c) => [c.node?.id, relayOf(c)]).sort(), [['web-1', addr(first)], ['web-2', addr(second)]]);
  });

  test('xdstp-relay status --fleet over mTLS: the operator sees both clients with their relays', T, async () => {
    const tlsArgs = (who: IssuedCert): string[] => ['--ca', pki.caCert, '--cert', who.cert, '--key', who.key];
    const ok = await runCliToExit(['status', '--server', addr(relays[1]!), '--fleet', '--json', ...tlsArgs(operator)], {}, 15_000);
    assert.equal(ok.code, 0, ok.stderr);
    const json = JSON.parse(ok.stdout) as { clients: Array<{ node: string; relay: string; protocol: string }> };
    const rows = json.clients.filter((c) => c.protocol === 'delta').map((c) => [c.node, c.relay]);
    assert.deepEqual(rows.sort(), [['web-1', addr(relays[0]!)], ['web-2', addr(relays[1]!)]]);
    const refused = await runCliToExit(['status', '--server', addr(relays[1]!), '--fleet', ...tlsArgs(web)], {}, 15_000);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /PERMISSION_DENIED/);
  });

  test('an identity without csds is refused, fleet or not', T, async () => {
    for (const request of [statusRequest(undefined, true), statusRequest(undefined, false)]) {
      await assert.rejects(fetchAs(web, addr(relays[0]!), request), (err: grpc.ServiceError) => err.code === grpc.status.PERMISSION_DENIED);
    }
  });

  test('a relay whose certificate identity the policy does not grant csds is refused by its peers, and they are reported so', T, async () => {
    const rogue = await startRelay(rogueCert, 'relay-rogue', pki.dir);
    const res = await pollUntil(async () => {
      const r = await fetchAs(operator, addr(rogue), statusRequest(undefined, true));
      return (r.config ?? []).filter((c) => memberInfoOf(c)).length === 3 ? r : undefined;
    }, 'the rogue relay sees the fleet');
    const infos = res.config!.map(memberInfoOf).filter((i) => i !== undefined);
    const peers = infos.filter((i) => i.relay !== addr(rogue));
    assert.equal(peers.length, 2);
    for (const p of peers) {
      assert.equal(p.reachable, false);
      assert.match(p.error ?? '', /^PERMISSION_DENIED/);
    }
    // The granted relays still see the rogue one (its CSDS accepts them).
    const fromFirst = await fetchAs(operator, addr(relays[0]!), statusRequest(undefined, true));
    assert.ok(fromFirst.config!.map(memberInfoOf).some((i) => i?.relay === addr(rogue) && i.reachable));
  });

  test('GET /debug/fleet needs the admin token', T, async () => {
    const port = relays[0]!.adminPort!;
    const without = await fetch(`http://127.0.0.1:${port}/debug/fleet`);
    assert.equal(without.status, 401);
    const withToken = await fetch(`http://127.0.0.1:${port}/debug/fleet`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(withToken.status, 200);
    const body = (await withToken.json()) as { membership: string; relays: unknown[] };
    assert.equal(body.membership, 'redis');
    assert.ok(body.relays.length >= 2);
  });
});
