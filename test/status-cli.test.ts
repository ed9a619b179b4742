/**
 * `xdstp-relay status` and `npm run xds -- status`: the real CLI processes
 * asking real relays over CSDS; plus the pure parts (pattern → matcher, table).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { formatTable, nodeMatcherForPattern, rowsOf } from '../src/status';
import { compileNodeMatchers } from '../src/downstream/node-match';
import type { ClientStatusResponse } from '../src/proto/csds-messages';
import { cleanEnv, runCliToExit, type CliExit } from './support/cli';
import { statusUntil, streamsOf } from './support/csds';
import { withRelay, type RelayEnv } from './support/relay-fixture';
import { CLUSTER, LISTENER, xdstp } from './support/names';

const T = { timeout: 30_000 };
const L = (rest: string): string => xdstp('a', LISTENER, rest);
const XDS_TOOL = path.resolve(__dirname, '..', 'src', 'tools', 'xds-client.js');

/** Two relays, each with synced clients: `edge-1` and `core-1` on the first, `edge-2` on the second. */
async function withTwoRelays(body: (first: RelayEnv, second: RelayEnv) => Promise<void>): Promise<void> {
  await withRelay({}, async (first) => {
    await withRelay({}, async (second) => {
      const n = L('cli/l1');
      for (const env of [first, second]) env.origin.setResource(LISTENER, n, 'x', 'v1');
      const plan: Array<[RelayEnv, string]> = [
        [first, 'edge-1'],
        [first, 'core-1'],
        [second, 'edge-2'],
      ];
      for (const [env, nodeId] of plan) {
        const c = env.client({ nodeId });
        c.subscribe(LISTENER, [n]);
        await c.waitForVersion(LISTENER, n, 'v1');
        await statusUntil(env.address, (res) => streamsOf(res, nodeId)[0]?.generic_xds_configs?.[0]?.config_status === 'SYNCED', `${nodeId} SYNCED`);
      }
      await body(first, second);
    });
  });
}

function runXdsTool(args: string[], timeoutMs = 10_000): Promise<CliExit> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [XDS_TOOL, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`xds tool did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The table's data rows, split on runs of 3+ spaces. */
function tableRows(stdout: string): string[][] {
  const lines = stdout.split('\n');
  const end = lines.indexOf('');
  return lines.slice(1, end < 0 ? undefined : end).map((l) => l.split(/ {3,}/));
}

test("the status command against two relays prints both relays' clients in one table", T, async () => {
  await withTwoRelays(async (first, second) => {
    const out = await runCliToExit(['status', '--server', `${first.address},${second.address}`], {}, 10_000);
    assert.equal(out.code, 0, out.stderr);
    const [header] = out.stdout.split('\n');
    assert.deepEqual(header!.split(/ {3,}/), ['NODE', 'RELAY', 'PROTOCOL', 'STREAM', 'Listener']);
    const rows = tableRows(out.stdout).map(([node, relay, protocol, , listener]) => [node, relay, protocol, listener]);
    assert.deepEqual(rows, [
      ['edge-1', first.address, 'delta', '1 SYNCED'],
      ['core-1', first.address, 'delta', '1 SYNCED'],
      ['relay-test', first.address, 'upstream', '1 SYNCED'],
      ['edge-2', second.address, 'delta', '1 SYNCED'],
      ['relay-test', second.address, 'upstream', '1 SYNCED'],
    ]);
  });
});

test('status --node selects clients by a node id glob on every relay', T, async () => {
  await withTwoRelays(async (first, second) => {
    const out = await runCliToExit(['status', '--server', first.address, '--server', second.address, '--node', 'edge-*'], {}, 10_000);
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(
      tableRows(out.stdout).map(([node, relay]) => [node, relay]),
      [
        ['edge-1', first.address],
        ['edge-2', second.address],
      ],
    );
  });
});

test('npm run xds -- status --json prints every relay and client for scripts', T, async () => {
  await withTwoRelays(async (first, second) => {
    const out = await runXdsTool(['status', '--server', `${first.address},${second.address}`, '--json']);
    assert.equal(out.code, 0, out.stderr);
    const doc = JSON.parse(out.stdout) as {
      relays: Array<{ server: string; ok: boolean; clients: number }>;
      clients: Array<{ relay: string; node: string; protocol: string; scope: string; types: Record<string, Record<string, number>>; nacks: unknown[] }>;
    };
    assert.deepEqual(doc.relays, [
      { server: first.address, ok: true, clients: 3 },
      { server: second.address, ok: true, clients: 2 },
    ]);
    const edge2 = doc.clients.find((c) => c.node === 'edge-2')!;
    assert.equal(edge2.relay, second.address);
    assert.equal(edge2.protocol, 'delta');
    assert.match(edge2.scope, /^stream\/\d+\/delta$/);
    assert.deepEqual(edge2.types[LISTENER], { synced: 1, stale: 0, nacked: 0, not_sent: 0, unknown: 0 });
    assert.deepEqual(edge2.nacks, []);
  });
});

test('a relay that does not answer is named on stderr with exit 1, the others are still printed', T, async () => {
  await withRelay({}, async (env) => {
    const c = env.client({ nodeId: 'lonely' });
    env.origin.setResource(LISTENER, L('cli/alone'), 'x', 'v1');
    c.subscribe(LISTENER, [L('cli/alone')]);
    await c.waitForVersion(LISTENER, L('cli/alone'), 'v1');
    // Port 1 on loopback: nothing listens there.
    const out = await runCliToExit(['status', '--server', `${env.address},127.0.0.1:1`, '--timeout', '3000'], {}, 10_000);
    assert.equal(out.code, 1);
    assert.match(out.stderr, /^xdstp-relay status: 127\.0\.0\.1:1: (UNAVAILABLE|DEADLINE_EXCEEDED): /m);
    assert.deepEqual(tableRows(out.stdout).map(([node]) => node), ['lonely', 'relay-test']);
  });
});

test('status without --server, or with a malformed one, exits 2 with a message', T, async () => {
  const missing = await runCliToExit(['status']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /server/);
  const bad = await runCliToExit(['status', '--server', 'not-an-address']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--server not-an-address: expected HOST:PORT/);
});

// ------------------------------------------------------------ pure parts

test('--node globs map onto exact, prefix, suffix, contains or a full-match regex', () => {
  assert.deepEqual(nodeMatcherForPattern('edge-1'), { node_id: { exact: 'edge-1' } });
  assert.deepEqual(nodeMatcherForPattern('edge-*'), { node_id: { prefix: 'edge-' } });
  assert.deepEqual(nodeMatcherForPattern('*-eu'), { node_id: { suffix: '-eu' } });
  assert.deepEqual(nodeMatcherForPattern('*edge*'), { node_id: { contains: 'edge' } });
  assert.equal(nodeMatcherForPattern('*'), undefined);
  const ids = ['edge-1.eu', 'edge-1xeu', 'edge-22.eu', 'core-1.eu'];
  const pick = (pattern: string): string[] => {
    const match = compileNodeMatchers([nodeMatcherForPattern(pattern)!]);
    return ids.filter((id) => match({ id }));
  };
  // Dots are literal, `*` is any run of characters.
  assert.deepEqual(pick('edge-*.eu'), ['edge-1.eu', 'edge-22.eu']);
  assert.deepEqual(pick('*-1.*'), ['edge-1.eu', 'core-1.eu']);
});

test('the table counts entries per type and status and lists each NACK with its message', () => {
  const response: ClientStatusResponse = {
    config: [
      {
        node: { id: 'edge-1' },
        client_scope: 'stream/4/delta',
        generic_xds_configs: [
          { type_url: CLUSTER, name: 'c1', version_info: 'v1', config_status: 'SYNCED', client_status: 'ACKED' },
          { type_url: LISTENER, name: 'l1', version_info: 'v1', config_status: 'SYNCED', client_status: 'ACKED' },
          {
            type_url: LISTENER,
            name: 'l2',
            version_info: 'v3',
            config_status: 'ERROR',
            client_status: 'NACKED',
            error_state: { version_info: 'v4', details: 'bad port', last_update_attempt: { seconds: 1735787045, nanos: 0 } },
          },
          { type_url: LISTENER, name: 'l3', config_status: 'NOT_SENT', client_status: 'REQUESTED' },
          { type_url: LISTENER, name: 'l4', version_info: 'v1', config_status: 'STALE', client_status: 'ACKED' },
        ],
      },
      { node: { id: 'relay-1' }, client_scope: 'upstream/a', generic_xds_configs: [] },
    ],
  };
  const text = formatTable(rowsOf('10.0.0.1:18000', response));
  assert.equal(
    text,
    [
      'NODE      RELAY            PROTOCOL   STREAM   Listener                                  Cluster',
      'edge-1    10.0.0.1:18000   delta      4        1 SYNCED, 1 STALE, 1 NACKED, 1 NOT_SENT   1 SYNCED',
      'relay-1   10.0.0.1:18000   upstream   a        -                                         -',
      '',
      'NACKS',
      'edge-1 @ 10.0.0.1:18000 stream/4/delta Listener l2: rejected version v4, keeps v3 at 2025-01-02T03:04:05.000Z: bad port',
      '',
    ].join('\n'),
  );
});
