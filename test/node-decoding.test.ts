/**
 * The node a client sends with its first request, as the relay decodes and
 * keeps it for the stream's life: what the client sent, field for field,
 * with what describes its build (user_agent_build_version, extensions,
 * client_features) kept once for every client of that build.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestError, decodeDeltaRequest, decodeSotwRequest } from '../src/proto/requests';
import { deltaRequestCodec, discoveryRequestCodec, nodeCodec, type Node } from '../src/proto/messages';
import { lenField, stringField } from '../src/proto/wire';

const CLUSTER_TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';

function extensions(build: string, n: number): object[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `envoy.filters.http.ext_${build}_${i}`,
    category: 'envoy.filters.http',
    type_urls: [`envoy.extensions.filters.http.ext${i}.v3.Config`],
  }));
}

function buildVersion(build: string): object {
  return {
    version: { major_number: 1, minor_number: 31, patch: 2 },
    metadata: { fields: { 'revision.sha': { stringValue: `sha-${build}` }, 'build.type': { stringValue: 'RELEASE' } } },
  };
}

/** An Envoy-like node: this client's id and locality, its build's version, extensions and features. */
function envoyNode(id: string, build = 'b1', n = 50): Record<string, unknown> {
  return {
    id,
    cluster: 'edge',
    metadata: { fields: { NAMESPACE: { stringValue: 'ns' } } },
    locality: { region: 'eu-west-1', zone: 'eu-west-1a' },
    user_agent_name: 'envoy',
    user_agent_build_version: buildVersion(build),
    extensions: extensions(build, n),
    client_features: ['envoy.lb.does_not_support_overprovisioning', `feature-of-${build}`],
  };
}

function deltaNode(node: Record<string, unknown>): Node {
  const bytes = deltaRequestCodec.encode({ node, type_url: CLUSTER_TYPE, resource_names_subscribe: ['c'] });
  const decoded = decodeDeltaRequest(bytes).node;
  assert.ok(decoded);
  return decoded;
}

/** What protobufjs makes of the same node bytes, decoded whole. */
function decodedWhole(nodeBytes: Uint8Array): Node {
  return nodeCodec.decode(nodeBytes);
}

test("a client's node decodes to what it sent, build version, extensions and features included", () => {
  const sent = envoyNode('sidecar-1');
  const node = deltaNode(sent);
  assert.deepEqual(node, decodedWhole(nodeCodec.encode(sent)));
  assert.equal(node.extensions?.length, 50);
  assert.match(JSON.stringify(node.user_agent_build_version), /sha-b1/);
  assert.deepEqual(node.client_features, ['envoy.lb.does_not_support_overprovisioning', 'feature-of-b1']);
});

test('a node whose fields come in another order (extensions first, features between) decodes the same', () => {
  const sent = envoyNode('sidecar-2');
  const fields = nodeCodec.encode(sent);
  // The same fields, rearranged on the wire: extensions (9) first, then id (1), a feature (10), the rest.
  const ext = nodeCodec.encode({ extensions: sent.extensions as object[] });
  const id = stringField(1, 'sidecar-2');
  const featureA = stringField(10, 'envoy.lb.does_not_support_overprovisioning');
  const featureB = stringField(10, 'feature-of-b1');
  const rest = nodeCodec.encode({ ...sent, id: undefined, extensions: [], client_features: [] });
  const shuffled = Buffer.concat([ext, id, featureA, rest, featureB]);
  const node = decodeDeltaRequest(Buffer.concat([lenField(1, shuffled), stringField(2, CLUSTER_TYPE)])).node;
  assert.deepEqual(node, decodedWhole(fields));
});

test('clients of one build hold one copy of its extensions, build version and features', () => {
  const a = deltaNode(envoyNode('sidecar-a'));
  const b = deltaNode(envoyNode('sidecar-b'));
  assert.equal(a.id, 'sidecar-a');
  assert.equal(b.id, 'sidecar-b');
  assert.equal(a.extensions, b.extensions);
  assert.equal(a.user_agent_build_version, b.user_agent_build_version);
  assert.equal(a.client_features, b.client_features);
  // One client's node cannot change another's through what they share.
  assert.throws(() => (a.extensions as object[]).push({ name: 'x' }), TypeError);
  assert.throws(() => ((a.extensions as Array<{ name: string }>)[0]!.name = 'changed'), TypeError);
});

test('a client of another build keeps its own extensions', () => {
  const a = deltaNode(envoyNode('sidecar-a', 'b1'));
  const c = deltaNode(envoyNode('sidecar-c', 'b2'));
  assert.notEqual(a.extensions, c.extensions);
  assert.match(JSON.stringify(c.extensions), /ext_b2_0/);
  assert.doesNotMatch(JSON.stringify(c.extensions), /ext_b1_/);
  assert.deepEqual(c.user_agent_build_version, decodedWhole(nodeCodec.encode(envoyNode('x', 'b2'))).user_agent_build_version);
});

test('a state-of-the-world request repeating its node decodes it the same each time', () => {
  const sent = envoyNode('grpc-1', 'b3');
  const request = (nonce: string): Buffer => discoveryRequestCodec.encode({ node: sent, type_url: CLUSTER_TYPE, resource_names: ['c'], response_nonce: nonce });
  const first = decodeSotwRequest(request('')).node;
  const again = decodeSotwRequest(request('n1')).node;
  assert.deepEqual(first, decodedWhole(nodeCodec.encode(sent)));
  assert.deepEqual(again, first);
});

test('a node with both user_agent_version and user_agent_build_version decodes as protobuf decodes it', () => {
  const bytes = Buffer.concat([nodeCodec.encode(envoyNode('both')), stringField(7, '1.31.2')]);
  const node = decodeDeltaRequest(Buffer.concat([lenField(1, bytes), stringField(2, CLUSTER_TYPE)])).node;
  assert.deepEqual(node, decodedWhole(bytes));
  assert.equal(node?.user_agent_version, '1.31.2');
});

test('an extension name that is not valid UTF-8 is refused, though the rest of its build was seen before', () => {
  deltaNode(envoyNode('fine'));
  const good = nodeCodec.encode({ id: 'bad', extensions: extensions('b1', 50) });
  // The same extension list with one more whose name is a truncated UTF-8 sequence.
  const bad = Buffer.concat([good, lenField(9, lenField(1, Buffer.from([0x63, 0xc3, 0x28])))]);
  assert.throws(
    () => decodeDeltaRequest(Buffer.concat([lenField(1, bad), stringField(2, CLUSTER_TYPE)])),
    (err: unknown) => err instanceof RequestError && /node\.extensions\.name.*UTF-8/.test(err.message),
  );
});

test('clients cycling through more builds than are kept still get their own nodes, each time', () => {
  const builds = Array.from({ length: 100 }, (_, i) => `cycle-${i}`);
  for (let round = 0; round < 2; round++) {
    for (const build of builds) {
      const node = deltaNode(envoyNode(`client-${build}`, build, 3));
      assert.deepEqual(node, decodedWhole(nodeCodec.encode(envoyNode(`client-${build}`, build, 3))));
    }
  }
});

test('a request of a stream that already has its node checks the node without keeping it', () => {
  const sent = envoyNode('again', 'b5');
  const request = (node: Record<string, unknown>): Buffer => discoveryRequestCodec.encode({ node, type_url: CLUSTER_TYPE, resource_names: ['c'], response_nonce: 'n1' });
  assert.equal(decodeSotwRequest(request(sent), false).node, undefined);
  assert.equal(decodeSotwRequest(request(sent), false).nonce, 'n1');
  const badNode = Buffer.concat([nodeCodec.encode(sent), lenField(1, Buffer.from([0x63, 0xc3, 0x28]))]);
  const bad = Buffer.concat([lenField(2, badNode), stringField(4, CLUSTER_TYPE)]);
  assert.throws(() => decodeSotwRequest(bad, false), (err: unknown) => err instanceof RequestError && /node\.id.*UTF-8/.test(err.message));
  const deltaBad = Buffer.concat([lenField(1, badNode), stringField(2, CLUSTER_TYPE)]);
  assert.throws(() => decodeDeltaRequest(deltaBad, false), RequestError);
});
