/**
 * The authorization policy (`--policy`): its file format, its matching rules,
 * and its reload. Pure logic plus a real file on disk; the relay-level wiring
 * (denied names answered as removed) lives with the subscription engine.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { ALLOW_ALL, Policy, PolicyError, PolicyStore } from '../src/security/policy';
import { EventEmitter } from 'node:events';
import { waitUntil } from './support/wait';

const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const WEB = 'spiffe://example.org/ns/web/sa/frontend';

const EXAMPLE = `
allow-node-id-identity: false
rules:
  - identities: ["spiffe://example.org/ns/web/*", "edge-1.example.org"]
    authorities: ["a1", "a2"]
    types: []
    names: []
    csds: false
`;

test('without a policy every subscription and CSDS are allowed', () => {
  assert.equal(ALLOW_ALL.allows(undefined, CLUSTER, 'anything', 'xdstp://anything/T/x'), true);
  assert.equal(ALLOW_ALL.allows(undefined, CLUSTER, null, 'legacy'), true);
  assert.equal(ALLOW_ALL.allowsCsds(undefined), true);
});

test('an identity allowed for authority A is refused for authority B', () => {
  const p = Policy.parse(EXAMPLE);
  assert.equal(p.allows(WEB, CLUSTER, 'a1', 'xdstp://a1/envoy.config.cluster.v3.Cluster/c'), true);
  assert.equal(p.allows(WEB, CLUSTER, 'a2', 'xdstp://a2/envoy.config.cluster.v3.Cluster/c'), true);
  assert.equal(p.allows(WEB, CLUSTER, 'b', 'xdstp://b/envoy.config.cluster.v3.Cluster/c'), false);
});

test('a trailing * matches identities with that prefix and nothing else; other identities are exact', () => {
  const p = Policy.parse(EXAMPLE);
  assert.equal(p.allows('spiffe://example.org/ns/web/', CLUSTER, 'a1', 'n'), true);
  assert.equal(p.allows('spiffe://example.org/ns/webby/sa/x', CLUSTER, 'a1', 'n'), false);
  assert.equal(p.allows('spiffe://example.org/ns/db/sa/x', CLUSTER, 'a1', 'n'), false);
  assert.equal(p.allows('edge-1.example.org', CLUSTER, 'a1', 'n'), true);
  assert.equal(p.allows('edge-1.example.org.evil', CLUSTER, 'a1', 'n'), false);
  assert.equal(p.allows('EDGE-1.example.org', CLUSTER, 'a1', 'n'), false, 'identities are case-sensitive');
});

test('a client without an identity matches only rules that list no identities', () => {
  const p = Policy.parse(`
rules:
  - identities: ["*"]
    authorities: [private]
  - authorities: [public]
`);
  assert.equal(p.allows(undefined, CLUSTER, 'public', 'n'), true);
  assert.equal(p.allows(undefined, CLUSTER, 'private', 'n'), false, '"*" needs some identity');
  assert.equal(p.allows('anyone', CLUSTER, 'private', 'n'), true);
});

test('the "" authority names legacy (non-xdstp) names', () => {
  const p = Policy.parse(`rules: [{ identities: [x], authorities: [""] }]`);
  assert.equal(p.allows('x', LISTENER, null, 'listener_0'), true);
  assert.equal(p.allows('x', LISTENER, 'a1', 'xdstp://a1/envoy.config.listener.v3.Listener/l'), false);
  const q = Policy.parse(`rules: [{ identities: [x], authorities: [a1] }]`);
  assert.equal(q.allows('x', LISTENER, null, 'listener_0'), false, 'legacy names need "" listed');
});

test('types match full type URLs and bare message names; other types are refused', () => {
  const p = Policy.parse(`
rules:
  - identities: [x]
    types: ["envoy.config.cluster.v3.Cluster", "type.googleapis.com/envoy.config.listener.v3.Listener"]
`);
  assert.equal(p.allows('x', CLUSTER, 'a', 'n'), true);
  assert.equal(p.allows('x', LISTENER, 'a', 'n'), true);
  assert.equal(p.allows('x', 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration', 'a', 'n'), false);
});

test('names are prefixes of the resource name', () => {
  const p = Policy.parse(`
rules:
  - identities: [x]
    authorities: [a]
    names: ["xdstp://a/envoy.config.cluster.v3.Cluster/team-a/"]
`);
  assert.equal(p.allows('x', CLUSTER, 'a', 'xdstp://a/envoy.config.cluster.v3.Cluster/team-a/c1'), true);
  assert.equal(p.allows('x', CLUSTER, 'a', 'xdstp://a/envoy.config.cluster.v3.Cluster/team-a/*'), true, 'a glob under the prefix');
  assert.equal(p.allows('x', CLUSTER, 'a', 'xdstp://a/envoy.config.cluster.v3.Cluster/team-b/c1'), false);
  assert.equal(p.allows('x', CLUSTER, 'a', 'xdstp://a/envoy.config.cluster.v3.Cluster/*'), false, 'a glob wider than the prefix');
});

test('one matching rule is enough: rules add up', () => {
  const p = Policy.parse(`
rules:
  - { identities: [x], authorities: [a] }
  - { identities: [x], authorities: [b], types: [envoy.config.cluster.v3.Cluster] }
`);
  assert.equal(p.allows('x', LISTENER, 'a', 'n'), true);
  assert.equal(p.allows('x', CLUSTER, 'b', 'n'), true);
  assert.equal(p.allows('x', LISTENER, 'b', 'n'), false);
});

test('a policy with no rules denies everything', () => {
  const p = Policy.parse('rules: []');
  assert.equal(p.allows('x', CLUSTER, 'a', 'n'), false);
  assert.equal(p.allowsCsds('x'), false);
});

test('CSDS is allowed only by rules that say csds: true, for their identities', () => {
  const p = Policy.parse(`
rules:
  - { identities: ["ops-*"], csds: true }
  - { identities: [web], authorities: [a] }
`);
  assert.equal(p.allowsCsds('ops-alice'), true);
  assert.equal(p.allowsCsds('web'), false);
  assert.equal(p.allowsCsds(undefined), false);
  assert.equal(p.allows('ops-alice', CLUSTER, 'a', 'n'), true, 'a rule without authorities covers every authority');
});

test('allow-node-id-identity is false unless the policy says true', () => {
  assert.equal(Policy.parse('rules: []').allowNodeIdIdentity, false);
  assert.equal(Policy.parse('allow-node-id-identity: true\nrules: []').allowNodeIdIdentity, true);
});

test('JSON policies parse like YAML ones', () => {
  const p = Policy.parse(JSON.stringify({ 'allow-node-id-identity': true, rules: [{ identities: ['x'], authorities: ['a'], csds: true }] }));
  assert.equal(p.allowNodeIdIdentity, true);
  assert.equal(p.allows('x', CLUSTER, 'a', 'n'), true);
  assert.equal(p.allowsCsds('x'), true);
});

test('policy mistakes are errors that name the offending key', () => {
  const bad = (text: string, re: RegExp): void => {
    assert.throws(() => Policy.parse(text, 'policy.yaml'), (err: unknown) => err instanceof PolicyError && re.test((err as Error).message));
  };
  bad('rules:\n  - identity: [x]', /rules\[0\]: unknown key "identity"/);
  bad('rule: []', /unknown key "rule"/);
  bad('rules: {}', /rules: expected a list/);
  bad('rules:\n  - identities: "x"', /rules\[0\]\.identities: expected a list/);
  bad('rules:\n  - identities: ["spiffe://*/ns/web"]', /identities\[0\].*only at the end/);
  bad('rules:\n  - identities: [x]\n    csds: "yes"', /csds: expected true or false/);
  bad('allow-node-id-identity: 1\nrules: []', /allow-node-id-identity: expected true or false/);
  bad('rules:\n  - names: [""]', /names\[0\]/);
  bad('- just a list', /expected a mapping/);
  bad('rules: [', /not YAML or JSON/);
});

function tempPolicy(text: string): { file: string; dir: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-policy-'));
  const file = path.join(dir, 'policy.yaml');
  fs.writeFileSync(file, text);
  return { file, dir };
}

/** A pino logger whose lines land in `lines`. */
function capturingLogger(): { logger: pino.Logger; lines: Record<string, unknown>[]; events: EventEmitter } {
  const lines: Record<string, unknown>[] = [];
  const events = new EventEmitter();
  const logger = pino({ level: 'info' }, { write: (s: string) => { lines.push(JSON.parse(s) as Record<string, unknown>); events.emit('change'); } });
  return { logger, lines, events };
}

test('a changed policy file is reloaded and announced with a change event', async () => {
  const { file, dir } = tempPolicy('rules: [{ identities: [x], authorities: [a] }]');
  const { logger } = capturingLogger();
  const store = new PolicyStore(file, { logger, reloadIntervalMs: 60_000 });
  try {
    assert.equal(store.allows('x', CLUSTER, 'b', 'n'), false);
    const changed = new Promise((resolve) => store.once('change', resolve));
    fs.writeFileSync(file, 'rules: [{ identities: [x], authorities: [a, b] }]');
    store.reload();
    await changed;
    assert.equal(store.allows('x', CLUSTER, 'b', 'n'), true);
  } finally {
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a policy file that no longer parses keeps the previous policy and logs an error', async () => {
  const { file, dir } = tempPolicy('rules: [{ identities: [x], authorities: [a] }]');
  const { logger, lines, events } = capturingLogger();
  const store = new PolicyStore(file, { logger, reloadIntervalMs: 60_000 });
  let changes = 0;
  store.on('change', () => changes++);
  try {
    fs.writeFileSync(file, 'rules: [{ identities: [x], authoritys: [b] }]');
    store.reload();
    await waitUntil(events, () => lines.find((l) => l.level === 50), { what: 'an error log line' });
    assert.match(String(lines.find((l) => l.level === 50)?.err), /unknown key "authoritys"/);
    assert.equal(changes, 0);
    assert.equal(store.allows('x', CLUSTER, 'a', 'n'), true, 'the previous policy stays in force');
    fs.rmSync(file);
    store.reload();
    assert.equal(store.allows('x', CLUSTER, 'a', 'n'), true, 'a deleted file keeps it too');
  } finally {
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a policy file that does not parse at start is an error naming the file', () => {
  const { file, dir } = tempPolicy('rules: [{ identities: [x], bogus: 1 }]');
  try {
    assert.throws(() => new PolicyStore(file, { logger: pino({ level: 'silent' }) }), new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: rules\\[0\\]: unknown key "bogus"`));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
