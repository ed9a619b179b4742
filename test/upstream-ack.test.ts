/**
 * The ACK the relay sends its control plane for each response it accepts:
 * exactly the request protobuf would encode from a type URL and a nonce.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeDeltaAck } from '../src/proto/delta-request';
import { deltaRequestCodec } from '../src/proto/messages';

const TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';

test('an upstream ACK carries the type URL and the nonce and nothing else, byte for byte as protobuf encodes it', () => {
  for (const nonce of ['1', 'nonce-ü-€', 'n'.repeat(300)]) {
    const bytes = encodeDeltaAck(TYPE, nonce);
    assert.deepEqual(bytes, Buffer.from(deltaRequestCodec.encode({ type_url: TYPE, response_nonce: nonce })));
    const req = deltaRequestCodec.decode(bytes);
    assert.equal(req.type_url, TYPE);
    assert.equal(req.response_nonce, nonce);
    assert.equal(req.node, undefined);
    assert.equal(req.error_detail, undefined);
    assert.deepEqual(req.resource_names_subscribe, []);
  }
});
