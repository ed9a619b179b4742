/**
 * Bad client input ends only the offending stream.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { withRelay } from './support/relay-fixture';
import { LISTENER, xdstp } from './support/names';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

test('a request without type_url ends that stream with INVALID_ARGUMENT and a message', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n = L('errors/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const bad = client();
    const good = client();
    bad.subscribe(LISTENER, [n]);
    good.subscribe(LISTENER, [n]);
    await bad.waitForVersion(LISTENER, n, 'v1');
    await good.waitForVersion(LISTENER, n, 'v1');

    bad.send({ resource_names_subscribe: [L('errors/two')] });
    const st = await bad.waitForEnd();
    assert.equal(st.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(st));
    assert.ok(st.details.trim().length > 0, 'the status carries a message');

    origin.setResource(LISTENER, n, 'y', 'v2');
    await good.waitForVersion(LISTENER, n, 'v2');
    assert.equal(good.status, undefined);
  });
});

test('a request without type_url as the first message ends that stream with INVALID_ARGUMENT', T, async () => {
  await withRelay({}, async ({ client }) => {
    const bad = client();
    bad.send({ resource_names_subscribe: [L('errors/two')] });
    const st = await bad.waitForEnd();
    assert.equal(st.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(st));
    assert.ok(st.details.trim().length > 0);
  });
});

test('an undecodable request ends only that stream', T, async () => {
  await withRelay({}, async ({ origin, client }) => {
    const n = L('errors/one');
    origin.setResource(LISTENER, n, 'x', 'v1');
    const bad = client();
    const good = client();
    bad.subscribe(LISTENER, [n]);
    good.subscribe(LISTENER, [n]);
    await bad.waitForVersion(LISTENER, n, 'v1');
    await good.waitForVersion(LISTENER, n, 'v1');

    // Field 3 (resource_names_subscribe) claiming 255 bytes that never come.
    bad.sendRaw(Buffer.from([0x1a, 0xff, 0x01, 0x61]));
    const st = await bad.waitForEnd();
    assert.notEqual(st.code, grpc.status.OK, JSON.stringify(st));

    origin.setResource(LISTENER, n, 'y', 'v2');
    await good.waitForVersion(LISTENER, n, 'v2');
    assert.equal(good.status, undefined);
    // A fresh client still works.
    const fresh = client();
    fresh.subscribe(LISTENER, [n]);
    await fresh.waitForVersion(LISTENER, n, 'v2');
  });
});
