/**
 * Fleet-wide CSDS without Redis and in parts: the request convention, the
 * advertised address, the merge (unreachable peers reported, payloads left
 * out above the client threshold, membership unreadable), and a relay without
 * --redis answering a fleet request with itself alone and saying so, while
 * plain CSDS stays as it was. (Three relays with Redis: fleet-status.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { validateOptions } from '../src/config';
import { MAX_CLIENTS_WITH_CONTENTS } from '../src/downstream/csds';
import { NodeMatcherError } from '../src/downstream/node-match';
import { fleetRequestNode, isFleetRequest, memberInfoOf, relayOf, RELAY_KEY } from '../src/fleet/convention';
import { valueFromJson } from '../src/typed-json/json-values';
import { createFleetCsds } from '../src/fleet/fleet-csds';
import { advertisedAddress, type FleetMember, type MemberState } from '../src/fleet/registry';
import { createLogger } from '../src/log';
import { createCsdsClient, csdsServiceDefinition, type ClientConfig, type ClientStatusRequest, type ClientStatusResponse } from '../src/proto/csds-messages';
import { insecureChannel } from '../src/security/tls';
import { fleetSummaries, rowsOf, statusRequest } from '../src/status';
import { pollUntil, withAdminRelay } from './support/admin';
import { runCliToExit } from './support/cli';
import { fetchStatus, fetchStatusError, statusUntil, streamsOf } from './support/csds';
import { freePort } from './support/ports';
import { CLUSTER, xdstp } from './support/names';

const T = { timeout: 20_000 };
const FLEET: ClientStatusRequest = { node: fleetRequestNode({ id: 'operator' }) };

test('a request asks for the fleet by the node metadata key xdstp-relay.fleet = true (or "true")', () => {
  assert.equal(isFleetRequest(FLEET), true);
  assert.equal(isFleetRequest({ node: { metadata: { fields: { 'xdstp-relay.fleet': { stringValue: 'true' } } } } }), true);
  assert.equal(isFleetRequest({ node: { metadata: { fields: { 'xdstp-relay.fleet': { boolValue: false } } } } }), false);
  assert.equal(isFleetRequest({ node: { id: 'x' } }), false);
  assert.equal(isFleetRequest({}), false);
  assert.equal(isFleetRequest(statusRequest(undefined, true)), true);
  assert.equal(isFleetRequest(statusRequest(undefined, false)), false);
});

test('the advertised address: --advertise, else POD_IP with the bound port, else a non-wildcard listen host', () => {
  assert.equal(advertisedAddress('relay-1.relays:18000', '0.0.0.0:18000', 18000, { POD_IP: '10.0.0.7' }), 'relay-1.relays:18000');
  assert.equal(advertisedAddress(null, '0.0.0.0:18000', 18000, { POD_IP: '10.0.0.7' }), '10.0.0.7:18000');
  assert.equal(advertisedAddress(null, '[::]:18000', 18000, { POD_IP: 'fd00::7' }), '[fd00::7]:18000');
  assert.equal(advertisedAddress(null, '127.0.0.1:0', 40123, {}), '127.0.0.1:40123');
  assert.equal(advertisedAddress(null, '0.0.0.0:18000', 18000, {}), null);
  assert.equal(advertisedAddress(undefined, '[::]:18000', 18000, {}), null);
});

test('--advertise is validated like other addresses (flag, config key, XDSTP_RELAY_ADVERTISE)', async () => {
  const base = { authority: ['a=grpc://127.0.0.1:1'] };
  const nodeId = { nodeId: 'n' };
  assert.equal(validateOptions({ ...base, advertise: 'relay-1.relays:18000' }, nodeId).config?.advertise, 'relay-1.relays:18000');
  assert.equal(validateOptions(base, nodeId).config?.advertise, null);
  for (const bad of ['relay-1', '0.0.0.0:18000', '[::]:18000', 'relay-1:0']) {
    const { problems } = validateOptions({ ...base, advertise: bad }, nodeId);
    assert.deepEqual(problems.map((p) => p.path), ['advertise'], bad);
  }
  const r = await runCliToExit(['validate', '--authority', 'a=grpc://127.0.0.1:1'], { XDSTP_RELAY_ADVERTISE: '0.0.0.0:18000' }, 10_000);
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.match(r.stdout + r.stderr, /advertise: other relays cannot dial/);
});

// ------------------------------------------------------------------ merge

const SELF: MemberState = { address: '10.0.0.1:18000', nodeId: 'relay-1', version: '9.9.9', startedAt: 0, clients: 1, draining: false, upstreams: { a: 'ready' } };

function member(id: string, address: string | null): FleetMember {
  return { ...SELF, id, address, nodeId: `node-${id}`, ttlMs: 5000, heartbeatAgeMs: 100 };
}

function client(id: string, withPayload = false): ClientConfig {
  return {
    client_scope: `stream/${id}/delta`,
    node: { id, metadata: { fields: { zone: valueFromJson('z1') } } },
    generic_xds_configs: [{ type_url: CLUSTER, name: 'c', config_status: 'SYNCED', ...(withPayload ? { xds_config: { type_url: CLUSTER, value: Buffer.from('x') } } : {}) }],
  };
}

test('merge: a peer that does not answer and one without an address are reported, never left out; clients name their relay', T, async () => {
  const closed = `127.0.0.1:${await freePort()}`;
  const fleet = createFleetCsds({
    local: () => ({ config: [client('a')] }),
    self: () => SELF,
    selfId: () => SELF.address!,
    relayNode: { id: 'relay-1' },
    members: async () => [member(SELF.address!, SELF.address), member(closed, closed), member('pod-x/1', null)],
    peerChannel: insecureChannel,
    peerTimeoutMs: 1000,
    logger: createLogger('silent'),
  });
  const res = await fleet.answer(FLEET);
  const infos = (res.config ?? []).map(memberInfoOf).filter((i) => i !== undefined);
  assert.deepEqual(infos.map((i) => [i.relay, i.reachable]), [[SELF.address, true], [closed, false], ['pod-x/1', false]]);
  assert.equal(infos[0]!.answering, true);
  assert.match(infos[1]!.error ?? '', /^UNAVAILABLE/);
  assert.match(infos[2]!.error ?? '', /no advertised address/);
  assert.equal(infos[1]!.heartbeat_age_ms, 100);
  const clients = (res.config ?? []).filter((c) => memberInfoOf(c) === undefined);
  assert.equal(clients.length, 1);
  assert.equal(relayOf(clients[0]!), SELF.address);
  assert.equal((clients[0]!.node?.metadata?.fields?.zone as { stringValue: string }).stringValue, 'z1', "the client's own metadata is kept");
  // The status tool's reading of it.
  const rows = rowsOf('asked', res);
  assert.deepEqual(rows.map((r) => [r.node, r.relay]), [['a', SELF.address]]);
  assert.deepEqual(fleetSummaries([res], rows).map((s) => [s.relay, s.reachable, s.streams]), [[SELF.address, true, 1], [closed, false, 0], ['pod-x/1', false, 0]]);
});

test('merge: payloads are left out when the whole fleet answer exceeds the per-relay client threshold; membership unreadable is said', T, async () => {
  const many = Array.from({ length: MAX_CLIENTS_WITH_CONTENTS + 1 }, (_, i) => client(`c${i}`, true));
  let listed = 0;
  const fleet = createFleetCsds({
    local: (request) => ({ config: request.exclude_resource_contents ? [] : many.map((c) => structuredClone(c)) }),
    self: () => SELF,
    selfId: () => SELF.address!,
    relayNode: { id: 'relay-1' },
    members: async () => {
      if (listed++ > 0) throw new Error('connection refused');
      return [member(SELF.address!, SELF.address)];
    },
    peerChannel: insecureChannel,
    logger: createLogger('silent'),
  });
  const res = await fleet.answer(FLEET);
  const clients = (res.config ?? []).filter((c) => memberInfoOf(c) === undefined);
  assert.equal(clients.length, MAX_CLIENTS_WITH_CONTENTS + 1);
  assert.ok(clients.every((c) => c.generic_xds_configs!.every((g) => g.xds_config === undefined)), 'payloads left out');
  const unreadable = await fleet.answer(FLEET);
  const info = memberInfoOf(unreadable.config![0]!)!;
  assert.equal(info.membership, 'unavailable');
  assert.match(info.membership_note ?? '', /connection refused.*answers alone/);
  await assert.rejects(fleet.answer({ ...FLEET, node_matchers: [{ node_id: { prefix: '' } }] }), NodeMatcherError);
});

test("merge: a peer that hangs is reported unreachable by the caller's deadline, not left to hold the answer", T, async () => {
  const server = new grpc.Server();
  // Accepts the call, never answers.
  server.addService(csdsServiceDefinition, { FetchClientStatus: () => undefined, StreamClientStatus: () => undefined });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  try {
    const hung = `127.0.0.1:${port}`;
    const fleet = createFleetCsds({
      local: () => ({ config: [client('a')] }),
      self: () => SELF,
      selfId: () => SELF.address!,
      relayNode: { id: 'relay-1' },
      members: async () => [member(hung, hung)],
      peerChannel: insecureChannel,
      logger: createLogger('silent'),
    });
    const res = await fleet.answer(FLEET, Date.now() + 600);
    const info = res.config!.map(memberInfoOf).find((i) => i?.relay === hung);
    assert.equal(info?.reachable, false);
    assert.match(info?.error ?? '', /^DEADLINE_EXCEEDED/);
    assert.equal(relayOf(res.config!.at(-1)!), SELF.address, 'its own clients are still there');
  } finally {
    server.forceShutdown();
  }
});

// ------------------------------------------------------------ no --redis

test('without --redis a fleet request is answered by the relay alone, which says so; plain CSDS is unchanged', T, async () => {
  await withAdminRelay({}, async ({ origin, client, address, get }) => {
    const n = xdstp('a', CLUSTER, 'solo/c1');
    origin.setResource(CLUSTER, n, 'x', 'v1');
    const c = client({ nodeId: 'solo-client' });
    c.subscribe(CLUSTER, [n]);
    await c.waitForVersion(CLUSTER, n, 'v1');
    await statusUntil(address, (res) => streamsOf(res, 'solo-client')[0]?.generic_xds_configs?.[0]?.config_status === 'SYNCED', 'SYNCED');

    const plain = await fetchStatus(address);
    assert.deepEqual(plain.config!.map((x) => x.client_scope!.replace(/\d+/, 'N')), ['stream/N/delta', 'upstream/a']);
    assert.ok(plain.config!.every((x) => x.node?.metadata?.fields?.[RELAY_KEY] === undefined), 'plain answers name no relay');

    const fleet = await fetchStatus(address, statusRequest(undefined, true));
    const info = memberInfoOf(fleet.config![0]!)!;
    assert.equal(info.relay, address, 'a loopback listen address is its own advertised address');
    assert.equal(info.membership, 'none');
    assert.match(info.membership_note ?? '', /no --redis/);
    assert.equal(info.reachable, true);
    assert.equal(info.node_id, 'relay-admin-test');
    assert.equal(info.upstreams?.a, 'ready');
    const rest = fleet.config!.slice(1);
    assert.deepEqual(rest.map((x) => x.client_scope), plain.config!.map((x) => x.client_scope));
    assert.ok(rest.every((x) => relayOf(x) === address));

    const matched = await fetchStatus(address, { ...statusRequest('solo-*', true) });
    assert.deepEqual(matched.config!.filter((x) => memberInfoOf(x) === undefined).map((x) => x.node?.id), ['solo-client'], 'node matchers apply');
    const bad = await fetchStatusError(address, { ...FLEET, node_matchers: [{ node_id: { prefix: '' } }] });
    assert.equal(bad.code, grpc.status.INVALID_ARGUMENT);

    const view = (await get('/debug/fleet')).json as { membership: string; relays: Array<{ address: string; self: boolean; clients: number }> };
    assert.equal(view.membership, 'none');
    assert.deepEqual(view.relays.map((r) => [r.address, r.self, r.clients]), [[address, true, 1]]);

    // StreamClientStatus: a fleet request's later answer keeps its place before a plain one sent after it.
    const csds = createCsdsClient(address);
    const call = csds.StreamClientStatus();
    const answers: ClientStatusResponse[] = [];
    call.on('data', (r: ClientStatusResponse) => answers.push(r));
    call.on('error', () => {});
    try {
      call.write(FLEET);
      call.write({});
      await pollUntil(async () => answers.length === 2, 'two answers');
      assert.ok(memberInfoOf(answers[0]!.config![0]!), 'the fleet answer first');
      assert.equal(answers[1]!.config!.some((x) => memberInfoOf(x) !== undefined), false);
    } finally {
      call.cancel();
      csds.close();
    }
  });
});
