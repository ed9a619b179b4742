/**
 * From a StatusSource to a ClientStatusResponse (src/downstream/csds.ts): the
 * pure mapping, with hand-made StatusClients, through the real codec.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildClientStatusResponse, MAX_CLIENTS_WITH_CONTENTS } from '../src/downstream/csds';
import type { ResourceStatus, StatusClient, StatusSource } from '../src/downstream/status-source';
import { clientStatusResponseCodec, type ClientStatusRequest, type ClientStatusResponse } from '../src/proto/csds-messages';
import { resourceCodec, type Node } from '../src/proto/messages';

const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const L1 = 'xdstp://a/envoy.config.listener.v3.Listener/l1';

function encodedResource(name: string, version: string, payload: string): Buffer {
  return resourceCodec.encode({ name, version, resource: { type_url: LISTENER, value: Buffer.from(payload) } });
}

/** A StatusClient that records whether contents were asked for. */
class FakeClient implements StatusClient {
  readonly asked: boolean[] = [];
  constructor(
    readonly scope: string,
    readonly node: Node | undefined,
    private readonly statuses: ResourceStatus[],
  ) {}

  resources(includeContents: boolean): ResourceStatus[] {
    this.asked.push(includeContents);
    return this.statuses.map((s) => {
      const copy = { ...s };
      if (!includeContents) delete copy.resource;
      return copy;
    });
  }
}

const source = (clients: StatusClient[]): StatusSource => ({ clients: () => clients });

/** Built, encoded and decoded as a CSDS caller would see it. */
function ask(src: StatusSource, request: ClientStatusRequest = {}): ClientStatusResponse {
  return clientStatusResponseCodec.decode(clientStatusResponseCodec.encode(buildClientStatusResponse(src, request)));
}

const NACKED_AT = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
const SENT_AT = Date.UTC(2025, 0, 2, 3, 4, 0, 250);

function fleet(): { edge: FakeClient; core: FakeClient; upstream: FakeClient } {
  const edge = new FakeClient('stream/7/delta', { id: 'edge-1', cluster: 'edge' }, [
    {
      typeUrl: LISTENER,
      name: L1,
      version: 'v1',
      lastUpdated: SENT_AT,
      resource: encodedResource(L1, 'v1', 'listener-one'),
      configStatus: 'ERROR',
      clientStatus: 'NACKED',
      error: { version: 'v2', details: 'port 0 is not allowed', at: NACKED_AT },
    },
    { typeUrl: CLUSTER, name: 'legacy-cluster', version: '', configStatus: 'NOT_SENT', clientStatus: 'REQUESTED' },
  ]);
  const core = new FakeClient('stream/8/sotw', { id: 'core-1' }, [
    { typeUrl: LISTENER, name: L1, version: 'v2', configStatus: 'SYNCED', clientStatus: 'ACKED' },
  ]);
  const upstream = new FakeClient('upstream/a', { id: 'relay-1' }, [
    { typeUrl: LISTENER, name: L1, version: 'v2', configStatus: 'SYNCED', clientStatus: 'ACKED', resource: encodedResource(L1, 'v2', 'listener-two') },
  ]);
  return { edge, core, upstream };
}

test('every StatusClient becomes one ClientConfig with its node and scope, in the source order', () => {
  const { edge, core, upstream } = fleet();
  const res = ask(source([edge, core, upstream]));
  assert.deepEqual(
    res.config?.map((c) => [c.node?.id, c.client_scope]),
    [
      ['edge-1', 'stream/7/delta'],
      ['core-1', 'stream/8/sotw'],
      ['relay-1', 'upstream/a'],
    ],
  );
  assert.equal(res.config?.[0]?.node?.cluster, 'edge');
});

test('each ResourceStatus becomes a GenericXdsConfig with versions, statuses, times and the NACK', () => {
  const { edge } = fleet();
  const [cfg] = ask(source([edge])).config ?? [];
  const [nacked, notSent] = cfg?.generic_xds_configs ?? [];
  assert.deepEqual(
    { ...nacked, xds_config: undefined },
    {
      type_url: LISTENER,
      name: L1,
      version_info: 'v1',
      xds_config: undefined,
      last_updated: { seconds: Math.floor(SENT_AT / 1000), nanos: 250_000_000 },
      config_status: 'ERROR',
      client_status: 'NACKED',
      error_state: {
        version_info: 'v2',
        details: 'port 0 is not allowed',
        last_update_attempt: { seconds: Math.floor(NACKED_AT / 1000), nanos: 678_000_000 },
      },
    },
  );
  assert.deepEqual(notSent, { type_url: CLUSTER, name: 'legacy-cluster', config_status: 'NOT_SENT', client_status: 'REQUESTED' });
});

test("xds_config is the resource's payload Any", () => {
  const { edge } = fleet();
  const [cfg] = ask(source([edge])).config ?? [];
  const any = cfg?.generic_xds_configs?.[0]?.xds_config;
  assert.equal(any?.type_url, LISTENER);
  assert.equal(Buffer.from(any?.value ?? []).toString(), 'listener-one');
  assert.deepEqual(edge.asked, [true]);
});

test('exclude_resource_contents leaves every payload out', () => {
  const { edge, upstream } = fleet();
  const res = ask(source([edge, upstream]), { exclude_resource_contents: true });
  for (const c of res.config ?? []) for (const g of c.generic_xds_configs ?? []) assert.equal(g.xds_config, undefined);
  assert.deepEqual([edge.asked, upstream.asked], [[false], [false]]);
});

test(`payloads are left out when more than ${MAX_CLIENTS_WITH_CONTENTS} clients match, kept at exactly ${MAX_CLIENTS_WITH_CONTENTS}`, () => {
  const many = (n: number): FakeClient[] =>
    Array.from({ length: n }, (_, i) =>
      new FakeClient(`stream/${i + 1}/delta`, { id: `n-${i}` }, [
        { typeUrl: LISTENER, name: L1, version: 'v1', configStatus: 'SYNCED', clientStatus: 'ACKED', resource: encodedResource(L1, 'v1', 'x') },
      ]),
    );
  const payloads = (res: ClientStatusResponse): number =>
    (res.config ?? []).filter((c) => c.generic_xds_configs?.[0]?.xds_config !== undefined).length;

  assert.equal(payloads(ask(source(many(MAX_CLIENTS_WITH_CONTENTS)))), MAX_CLIENTS_WITH_CONTENTS);
  const over = ask(source(many(MAX_CLIENTS_WITH_CONTENTS + 1)));
  assert.equal(over.config?.length, MAX_CLIENTS_WITH_CONTENTS + 1);
  assert.equal(payloads(over), 0);
  // Counted after matching: a narrow request over a big fleet keeps its payloads.
  assert.equal(payloads(ask(source(many(MAX_CLIENTS_WITH_CONTENTS + 50)), { node_matchers: [{ node_id: { prefix: 'n-1' } }] })), 61);
});

test("node matchers select clients, and the upstream entries by the relay's own node id", () => {
  const { edge, core, upstream } = fleet();
  const scopes = (request: ClientStatusRequest): string[] => (ask(source([edge, core, upstream]), request).config ?? []).map((c) => c.client_scope ?? '');
  assert.deepEqual(scopes({ node_matchers: [{ node_id: { suffix: '-1' } }] }), ['stream/7/delta', 'stream/8/sotw', 'upstream/a']);
  assert.deepEqual(scopes({ node_matchers: [{ node_id: { exact: 'relay-1' } }] }), ['upstream/a']);
  assert.deepEqual(scopes({ node_matchers: [{ node_id: { exact: 'nobody' } }] }), []);
  // Clients that were not selected are not even asked for their resources.
  assert.deepEqual(edge.asked.length + core.asked.length, 2);
});
