/**
 * --max-connection-age: a long-lived client stream is sent away (GOAWAY, then
 * UNAVAILABLE once the grace is over) so that it reconnects, possibly to a
 * relay that joined the fleet later, and resumes with initial_resource_versions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { validateOptions } from '../src/config';
import { startRelay } from '../src/relay';
import { DeltaClient } from './support/delta-client';
import { LISTENER, xdstp } from './support/names';
import { TestOrigin } from './support/origin';

const T = { timeout: 20_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);

test('a client stream older than --max-connection-age is ended with UNAVAILABLE and resumes on a new one', T, async () => {
  const origin = await TestOrigin.start({ label: 'origin-age' });
  const relay = await startRelay({
    listen: '127.0.0.1:0',
    admin: null,
    authorities: [{ name: 'a', uris: [origin.uri] }],
    defaultUpstream: null,
    unsubscribeGraceMs: 5000,
    nodeId: 'relay-age',
    logLevel: process.env.RELAY_TEST_LOGS ?? 'silent',
    shutdownGraceMs: 500,
    maxConnectionAgeMs: 600,
    maxConnectionAgeGraceMs: 200,
  });
  const clients: DeltaClient[] = [];
  try {
    const S = L('age/single');
    origin.setResource(LISTENER, S, 's v1', 'v1');
    const first = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: 'aging' });
    clients.push(first);
    const t0 = Date.now();
    first.subscribe(LISTENER, [S]);
    await first.waitForVersion(LISTENER, S, 'v1');
    const end = await first.waitForEnd(5000);
    const age = Date.now() - t0;
    assert.equal(end.code, grpc.status.UNAVAILABLE, `ended with ${grpc.status[end.code]}: ${end.details}`);
    // age ±10 % jitter, plus the grace
    assert.ok(age >= 500, `ended after ${age} ms, before the connection age`);

    // The client comes back (to this relay or another) and resumes where it was.
    const again = new DeltaClient(`127.0.0.1:${relay.port}`, { nodeId: 'aging-again' });
    clients.push(again);
    again.subscribe(LISTENER, [S], { initialVersions: Object.fromEntries(first.held(LISTENER)) });
    origin.setResource(LISTENER, S, 's v2', 'v2');
    await again.waitForVersion(LISTENER, S, 'v2');
    assert.deepEqual(again.received(LISTENER, S).map((r) => r.version), ['v2'], 'what it held is not resent');
    assert.deepEqual(again.violations, []);
  } finally {
    for (const c of clients) c.close();
    await relay.stop();
    await origin.stop();
  }
});

test('without --max-connection-age client streams are not aged out', T, async () => {
  const { config } = validateOptions({ authority: ['a=grpc://127.0.0.1:1'] }, { nodeId: 'n' });
  assert.equal(config?.maxConnectionAgeMs, null);
});

test('connection age and Redis options are validated with the flag they came from', () => {
  const nodeId = { nodeId: 'n' };
  const base = { authority: ['a=grpc://127.0.0.1:1'] };
  const problems = (raw: Record<string, unknown>): string[] => validateOptions({ ...base, ...raw }, nodeId).problems.map((p) => p.message);

  let r = validateOptions({ ...base, maxConnectionAge: 60000 }, nodeId);
  assert.equal(r.config?.maxConnectionAgeMs, 60000);
  assert.equal(r.config?.maxConnectionAgeGraceMs, 10000);
  r = validateOptions({ ...base, maxConnectionAge: 0, maxConnectionAgeGrace: 0 }, nodeId);
  assert.equal(r.config?.maxConnectionAgeMs, null, '0 means never');
  assert.match(problems({ maxConnectionAge: -5 }).join(), /^max-connection-age: /);
  assert.match(problems({ maxConnectionAge: 'soon' }).join(), /^max-connection-age: /);
  assert.match(problems({ maxConnectionAge: 3e9 }).join(), /^max-connection-age: /);
  assert.match(problems({ maxConnectionAge: 1000, maxConnectionAgeGrace: -1 }).join(), /^max-connection-age-grace: /);

  r = validateOptions(base, nodeId);
  assert.equal(r.config?.redis, null, 'no --redis: memory only');
  r = validateOptions({ ...base, redis: 'redis://127.0.0.1:6379/2' }, nodeId);
  assert.deepEqual(r.config?.redis, { spec: 'redis://127.0.0.1:6379/2', prefix: 'xdstp-relay:', warmTimeoutMs: 5000, fleetHeartbeatTtlMs: 5000 });
  r = validateOptions({ ...base, redis: 'redis+sentinel://s1:26379,s2:26379/mymaster', redisPrefix: 'prod:', redisWarmTimeout: 0 }, nodeId);
  assert.deepEqual(r.config?.redis, { spec: 'redis+sentinel://s1:26379,s2:26379/mymaster', prefix: 'prod:', warmTimeoutMs: 0, fleetHeartbeatTtlMs: 5000 });
  r = validateOptions({ ...base, redisCluster: '10.0.0.1:7000, 10.0.0.2:7000' }, nodeId);
  assert.equal(r.config?.redis?.spec, 'redis+cluster://10.0.0.1:7000,10.0.0.2:7000');

  assert.match(problems({ redis: '127.0.0.1:6379' }).join(), /^redis: .*--redis-cluster/);
  assert.match(problems({ redis: 'redis://a:1', redisCluster: 'b:2' }).join(), /^redis-cluster: .*not both/);
  assert.match(problems({ redisCluster: 'b:2,nonsense' }).join(), /^redis-cluster: .*"nonsense"/);
  assert.match(problems({ redis: 'redis+sentinel://h:26379' }).join(), /^redis: .*mastername/);
  assert.match(problems({ redis: 'redis://x', redisPrefix: 'a{b}:' }).join(), /^redis-prefix: /);
  assert.match(problems({ redis: 'redis://x', redisPrefix: '' }).join(), /^redis-prefix: /);
  assert.match(problems({ redis: 'redis://x', redisWarmTimeout: -1 }).join(), /^redis-warm-timeout: /);
  const secret = problems({ redis: 'http://user:s3cret@host:6379' }).join();
  assert.match(secret, /^redis: /);
  assert.ok(!secret.includes('s3cret'), `the password is not echoed: ${secret}`);
});
