/**
 * What a client receives of an upstream Resource: the same resource under
 * the client's spelling of its name, with its TTL only for clients that
 * understand TTLs, every other field as the control plane sent it. A copy
 * that changes nothing is the control plane's own bytes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resourceUnder, splitResource } from '../src/proto/resource-bytes';
import { resourceCodec } from '../src/proto/messages';
import { FieldReader } from '../src/proto/wire';
import { makeResource } from './support/origin';

const TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const NAME = 'xdstp://a/envoy.config.cluster.v3.Cluster/c1';

function encoded(opts: { ttl?: number; doNotCache?: boolean } = {}): Buffer {
  return Buffer.from(resourceCodec.encode(makeResource(TYPE, NAME, 'payload bytes', 'v7', opts)));
}

test('a client spelling the name as the control plane does gets the resource as it was sent', () => {
  const bytes = encoded();
  const copy = resourceUnder(splitResource(bytes), NAME, false);
  assert.deepEqual(copy, bytes);
});

test('a client with its own spelling of the name gets it under that spelling, the rest unchanged', () => {
  const spelling = `${NAME}?b=2&a=1`;
  const copy = resourceCodec.decode(resourceUnder(splitResource(encoded({ doNotCache: true })), spelling, false));
  assert.equal(copy.name, spelling);
  assert.equal(copy.version, 'v7');
  assert.equal(copy.resource?.type_url, TYPE);
  assert.equal(Buffer.from(copy.resource!.value!).toString(), 'payload bytes');
  assert.equal(copy.cache_control?.do_not_cache, true);
});

test('a resource with a TTL reaches a client without TTL support without it, and one with support with it', () => {
  const parts = splitResource(encoded({ ttl: 30 }));
  const without = resourceCodec.decode(resourceUnder(parts, NAME, false));
  assert.equal(without.ttl, undefined);
  assert.equal(without.name, NAME);
  assert.equal(Buffer.from(without.resource!.value!).toString(), 'payload bytes');
  const withTtl = resourceCodec.decode(resourceUnder(parts, NAME, true));
  assert.equal(Number(withTtl.ttl?.seconds), 30);
});

test('a resource that names itself twice reaches the client named once, by the name that counts', () => {
  const first = encoded();
  // Protobuf's last-one-wins: a second name field appended renames the resource.
  const renamed = Buffer.concat([first, resourceCodec.encode({ name: `${NAME}-last` })]);
  const parts = splitResource(renamed);
  assert.equal(parts.name, `${NAME}-last`);
  const copy = resourceUnder(parts, parts.name, false);
  let names = 0;
  const fields = new FieldReader(copy);
  while (fields.next()) if (fields.field === 3) names++;
  assert.equal(names, 1);
  assert.equal(resourceCodec.decode(copy).name, `${NAME}-last`);
});

test('a resource whose payload type is not valid UTF-8 is refused, though a valid type of the same length was read just before', () => {
  const valid = encoded();
  assert.equal(splitResource(valid).payloadType, TYPE);
  const bad = Buffer.from(valid);
  bad[bad.indexOf(Buffer.from(TYPE)) + TYPE.length - 1] = 0xff;
  assert.throws(() => splitResource(bad), /Resource\.resource\.type_url is not valid UTF-8/);
});
