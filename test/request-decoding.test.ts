/**
 * A client's requests as the relay reads them off the wire, field by field:
 * the same fields protobuf decodes, and a malformed message refused as a bad
 * request naming the message, never a crash or a half-read request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestError, decodeDeltaRequest, decodeSotwRequest } from '../src/proto/requests';
import { deltaRequestCodec, discoveryRequestCodec } from '../src/proto/messages';

const TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';

test('a delta request decodes to the names, versions, nonce and type protobuf decodes', () => {
  const bytes = deltaRequestCodec.encode({
    type_url: TYPE,
    resource_names_subscribe: ['xdstp://a/envoy.config.cluster.v3.Cluster/c1', 'xdstp://a/envoy.config.cluster.v3.Cluster/g/*'],
    resource_names_unsubscribe: ['legacy-name'],
    initial_resource_versions: { 'xdstp://a/envoy.config.cluster.v3.Cluster/c0': 'v7', 'ü': 'é' },
    response_nonce: '42',
  });
  const req = decodeDeltaRequest(bytes);
  assert.equal(req.typeUrl, TYPE);
  assert.deepEqual(req.subscribe, ['xdstp://a/envoy.config.cluster.v3.Cluster/c1', 'xdstp://a/envoy.config.cluster.v3.Cluster/g/*']);
  assert.deepEqual(req.unsubscribe, ['legacy-name']);
  assert.deepEqual([...req.initialVersions], [
    ['xdstp://a/envoy.config.cluster.v3.Cluster/c0', 'v7'],
    ['ü', 'é'],
  ]);
  assert.equal(req.nonce, '42');
  assert.equal(req.errorDetail, undefined);
});

test('a type_url that is not valid UTF-8 is refused, though a valid one of the same length was read just before', () => {
  const valid = deltaRequestCodec.encode({ type_url: TYPE, response_nonce: '1' });
  assert.equal(decodeDeltaRequest(valid).typeUrl, TYPE);
  const bad = Buffer.from(valid);
  bad[bad.indexOf(Buffer.from(TYPE)) + 5] = 0xff;
  assert.throws(() => decodeDeltaRequest(bad), (err: unknown) => err instanceof RequestError && /type_url is not valid UTF-8/.test(err.message));
});

test('a state-of-the-world request decodes to its version, names, nonce and type', () => {
  const bytes = discoveryRequestCodec.encode({ version_info: 'v3', resource_names: ['a', 'b'], type_url: TYPE, response_nonce: '9' });
  const req = decodeSotwRequest(bytes);
  assert.deepEqual({ v: req.versionInfo, names: req.names, type: req.typeUrl, nonce: req.nonce }, { v: 'v3', names: ['a', 'b'], type: TYPE, nonce: '9' });
});

test('a truncated or malformed request is refused as a bad request naming its message', () => {
  const delta = Buffer.from(deltaRequestCodec.encode({ type_url: TYPE, resource_names_subscribe: ['abc'], initial_resource_versions: { k: 'v' } }));
  const sotw = Buffer.from(discoveryRequestCodec.encode({ type_url: TYPE, resource_names: ['abc'] }));
  const cases: Array<[string, () => unknown, RegExp]> = [
    ['delta cut in its last field', () => decodeDeltaRequest(delta.subarray(0, delta.length - 1)), /malformed DeltaDiscoveryRequest: truncated field/],
    ['delta cut inside a varint', () => decodeDeltaRequest(Buffer.from([0x1a, 0x80])), /malformed DeltaDiscoveryRequest: truncated varint/],
    ['delta with field number 0', () => decodeDeltaRequest(Buffer.from([0x02, 0x00])), /malformed DeltaDiscoveryRequest: field number 0/],
    ['delta with a version entry cut short', () => decodeDeltaRequest(Buffer.from([0x2a, 0x03, 0x0a, 0x05, 0x6b])), /malformed DeltaDiscoveryRequest: truncated field/],
    ['sotw cut in its last field', () => decodeSotwRequest(sotw.subarray(0, sotw.length - 1)), /malformed DiscoveryRequest: truncated field/],
    ['sotw with wire type 3', () => decodeSotwRequest(Buffer.from([0x0b])), /malformed DiscoveryRequest: unsupported wire type 3/],
  ];
  for (const [what, decode, message] of cases) {
    assert.throws(decode, (err: unknown) => err instanceof RequestError && message.test(err.message), what);
  }
});
