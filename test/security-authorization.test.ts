/**
 * The authorization policy and the per-stream limits, enforced by the
 * subscription engine's join check and the ADS streams, over real gRPC with
 * real origins. Identities here are node ids (`allow-node-id-identity: true`)
 * so the tests need no certificates; certificate identities are covered by
 * security-identity.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { RelayConfigInput } from '../src/config';
import { DEFAULT_LIMITS, type Limits } from '../src/security/limits';
import type { SecuritySettings } from '../src/security/config';
import { fetchStatus, fetchStatusError } from './support/csds';
import { withRelay } from './support/relay-fixture';
import { CLUSTER, LISTENER, xdstp } from './support/names';
import { assertWellFormed } from './support/assertions';
import { metricValue, parsePrometheus, pollUntil } from './support/admin';

const T = { timeout: 20_000 };
const A = (rest: string): string => xdstp('a', LISTENER, rest);
const B = (rest: string): string => xdstp('b', LISTENER, rest);

function policyFile(text: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-policy-'));
  const file = path.join(dir, 'policy.yaml');
  fs.writeFileSync(file, text);
  return file;
}

function security(opts: { policy?: string; limits?: Partial<Limits> } = {}): Partial<RelayConfigInput> {
  const settings: SecuritySettings = {
    tls: null,
    defaultUpstreamTls: {},
    policyFile: opts.policy ?? null,
    adminTokenFile: null,
    limits: { ...DEFAULT_LIMITS, ...opts.limits },
  };
  return { security: settings };
}

const EDGE_A_ONLY = `
allow-node-id-identity: true
rules:
  - identities: ["edge-*"]
    authorities: ["a"]
  - identities: ["ops"]
    authorities: ["a", "b"]
    csds: true
`;

/** Every resource name that reached a client, whatever its type. */
function everyReceivedName(c: { responses: Array<{ resources?: Array<{ name?: string }> }> }): string[] {
  return c.responses.flatMap((r) => (r.resources ?? []).map((x) => x.name ?? ''));
}

async function denied(relay: { metrics: { registry: { metrics(): Promise<string> } } }, authority: string): Promise<number> {
  return metricValue(parsePrometheus(await relay.metrics.registry.metrics()), 'xdstp_relay_denied_subscriptions_total', { authority });
}

test("an identity allowed for authority A and not B gets A's resources and B's names in removed_resources, nothing of B on the wire", T, async () => {
  await withRelay({ authorities: ['a', 'b'], config: security({ policy: policyFile(EDGE_A_ONLY) }) }, async ({ origins, client, relay }) => {
    origins.a!.setResource(LISTENER, A('x'), 'ax', 'v1');
    origins.b!.setResource(LISTENER, B('secret'), 'SECRET-B', 'v1');
    const c = client({ nodeId: 'edge-1' });
    c.subscribe(LISTENER, [A('x'), B('secret')]);
    await c.waitForVersion(LISTENER, A('x'), 'v1');
    await c.waitForRemoved(LISTENER, B('secret'));
    origins.b!.setResource(LISTENER, B('secret'), 'SECRET-B2', 'v2');
    origins.a!.setResource(LISTENER, A('x'), 'ax', 'v2');
    await c.waitForVersion(LISTENER, A('x'), 'v2');
    assert.deepEqual(everyReceivedName(c).filter((n) => n.startsWith('xdstp://b/')), []);
    assert.ok(!origins.b!.subscribedKeys(LISTENER).has(B('secret')), 'a denied name is not even subscribed upstream');
    assert.equal(await denied(relay, 'b'), 1);
    assertWellFormed(c);
  });
});

test('a glob of a denied authority leaks no member', T, async () => {
  await withRelay({ authorities: ['a', 'b'], config: security({ policy: policyFile(EDGE_A_ONLY) }) }, async ({ origins, client }) => {
    origins.b!.setResource(LISTENER, B('g/m1'), 'SECRET', 'v1');
    const ops = client({ nodeId: 'ops' });
    ops.subscribe(LISTENER, [B('g/*')]);
    await ops.waitForVersion(LISTENER, B('g/m1'), 'v1');
    const c = client({ nodeId: 'edge-2' });
    c.subscribe(LISTENER, [B('g/*')]);
    await c.waitForRemoved(LISTENER, B('g/*'));
    origins.b!.setResource(LISTENER, B('g/m2'), 'SECRET2', 'v1');
    await ops.waitForVersion(LISTENER, B('g/m2'), 'v1');
    await c.expectNoResponse(200);
    assert.deepEqual(everyReceivedName(c), []);
  });
});

test('glob members outside a rule\'s name prefixes are never delivered, though the glob itself is allowed', T, async () => {
  // The glob is allowed by its own name; of its members only those under g/web- are.
  const narrow = policyFile(`
allow-node-id-identity: true
rules:
  - identities: ["team-web"]
    authorities: ["a"]
    names: ["${A('g/*')}", "${A('g/web-')}"]
`);
  await withRelay({ config: security({ policy: narrow }) }, async ({ origin, client }) => {
    origin.setResource(LISTENER, A('g/web-1'), 'web', 'v1');
    origin.setResource(LISTENER, A('g/db-1'), 'DB', 'v1');
    const c = client({ nodeId: 'team-web' });
    c.subscribe(LISTENER, [A('g/*')]);
    await c.waitForVersion(LISTENER, A('g/web-1'), 'v1');
    origin.setResource(LISTENER, A('g/db-1'), 'DB', 'v2');
    origin.setResource(LISTENER, A('g/web-1'), 'web', 'v2');
    await c.waitForVersion(LISTENER, A('g/web-1'), 'v2');
    assert.deepEqual(everyReceivedName(c).filter((n) => n.includes('db-1')), []);
    assertWellFormed(c);
  });
});

test('a node id is an identity only when the policy allows it', T, async () => {
  const strict = policyFile(`
allow-node-id-identity: false
rules:
  - identities: ["edge-1"]
    authorities: ["a"]
`);
  await withRelay({ config: security({ policy: strict }) }, async ({ origin, client }) => {
    origin.setResource(LISTENER, A('x'), 'ax', 'v1');
    const c = client({ nodeId: 'edge-1' });
    c.subscribe(LISTENER, [A('x')]);
    await c.waitForRemoved(LISTENER, A('x'));
    assert.deepEqual(everyReceivedName(c), []);
  });
  await withRelay({ config: security({ policy: policyFile(EDGE_A_ONLY) }) }, async ({ origin, client }) => {
    origin.setResource(LISTENER, A('x'), 'ax', 'v1');
    const c = client({ nodeId: 'edge-1' });
    c.subscribe(LISTENER, [A('x')]);
    await c.waitForVersion(LISTENER, A('x'), 'v1');
  });
});

test('a reloaded policy that denies a held subscription withdraws it with a removal', T, async () => {
  const file = policyFile(EDGE_A_ONLY);
  await withRelay({ config: security({ policy: file }) }, async ({ origin, client }) => {
    origin.setResource(LISTENER, A('x'), 'ax', 'v1');
    const c = client({ nodeId: 'edge-1' });
    c.subscribe(LISTENER, [A('x')]);
    await c.waitForVersion(LISTENER, A('x'), 'v1');
    fs.writeFileSync(file, EDGE_A_ONLY.replace('identities: ["edge-*"]', 'identities: ["nobody"]'));
    await c.waitForRemoved(LISTENER, A('x'), 10_000);
    origin.setResource(LISTENER, A('x'), 'ax', 'v2');
    await c.expectNoResponse(300);
    assert.equal(c.received(LISTENER, A('x')).filter((r) => r.version === 'v2').length, 0);
  });
});

test('with a policy, CSDS answers only identities granted csds', T, async () => {
  await withRelay({ config: security({ policy: policyFile(EDGE_A_ONLY) }) }, async ({ address }) => {
    const refused = await fetchStatusError(address, { node: { id: 'edge-1' } });
    assert.equal(refused.code, grpc.status.PERMISSION_DENIED);
    const res = await fetchStatus(address, { node: { id: 'ops' } });
    assert.ok(Array.isArray(res.config));
  });
});

// ------------------------------------------------------------------------- limits

/** Each limit hit by one client ends its stream only; another client's updates keep arriving. */
async function limitEndsOnlyThatStream(limits: Partial<Limits>, misbehave: (c: ReturnType<Parameters<Parameters<typeof withRelay>[1]>[0]['client']>) => void, limit: string): Promise<void> {
  await withRelay({ config: security({ limits }) }, async ({ origin, client, relay }) => {
    origin.setResource(CLUSTER, xdstp('a', CLUSTER, 'ok'), 'ok', 'v1');
    const good = client();
    good.subscribe(CLUSTER, [xdstp('a', CLUSTER, 'ok')]);
    await good.waitForVersion(CLUSTER, xdstp('a', CLUSTER, 'ok'), 'v1');
    const bad = client();
    misbehave(bad);
    const end = await bad.waitForEnd();
    assert.equal(end.code, grpc.status.RESOURCE_EXHAUSTED, end.details);
    origin.setResource(CLUSTER, xdstp('a', CLUSTER, 'ok'), 'ok', 'v2');
    await good.waitForVersion(CLUSTER, xdstp('a', CLUSTER, 'ok'), 'v2');
    assert.equal(good.status, undefined);
    await pollUntil(
      async () => metricValue(parsePrometheus(await relay.metrics.registry.metrics()), 'xdstp_relay_limit_exceeded_total', { limit }) === 1,
      `xdstp_relay_limit_exceeded_total{limit="${limit}"} counted`,
    );
  });
}

test('a name longer than --max-name-length is refused alone; the stream and its other names go on', T, async () => {
  await withRelay({ config: security({ limits: { maxNameLength: 100 } }) }, async ({ origin, client, relay }) => {
    const ok = xdstp('a', CLUSTER, 'ok');
    const long = xdstp('a', CLUSTER, 'n'.repeat(200));
    origin.setResource(CLUSTER, ok, 'ok', 'v1');
    const c = client();
    c.subscribe(CLUSTER, [long, ok]);
    await c.waitForRemoved(CLUSTER, long);
    await c.waitForVersion(CLUSTER, ok, 'v1');
    origin.setResource(CLUSTER, ok, 'ok', 'v2');
    await c.waitForVersion(CLUSTER, ok, 'v2');
    assert.equal(c.status, undefined, 'the stream stays open');
    assert.ok(!origin.everSubscribed().includes(long), 'the long name never reaches the control plane');
    await pollUntil(
      async () => metricValue(parsePrometheus(await relay.metrics.registry.metrics()), 'xdstp_relay_limit_exceeded_total', { limit: 'name_length' }) === 1,
      'xdstp_relay_limit_exceeded_total{limit="name_length"} counted',
    );
    assertWellFormed(c);
  });
});

test('more subscriptions than --max-subscriptions-per-stream end only that stream with RESOURCE_EXHAUSTED', T, async () => {
  await limitEndsOnlyThatStream(
    { maxSubscriptionsPerStream: 10 },
    (c) => {
      c.subscribe(CLUSTER, Array.from({ length: 8 }, (_, i) => xdstp('a', CLUSTER, `s${i}`)));
      c.subscribe(LISTENER, Array.from({ length: 8 }, (_, i) => A(`s${i}`)));
    },
    'subscriptions_per_stream',
  );
});

test('subscription changes faster than --subscription-rate end only that stream with RESOURCE_EXHAUSTED', T, async () => {
  await limitEndsOnlyThatStream(
    { subscriptionRate: 1, subscriptionBurst: 20 },
    (c) => {
      for (let i = 0; i < 30; i++) c.subscribe(CLUSTER, [xdstp('a', CLUSTER, `r${i}`)]);
    },
    'subscription_rate',
  );
});
