/**
 * The heap diagnostics behind the hidden --debug-heap flag (the soak
 * suite's leak check): absent unless asked for, and honest about needing
 * node's --expose-gc.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnCli } from './support/cli';
import { http } from './support/admin';
import { liveHeapBytes } from '../src/admin/heap';

const T = { timeout: 20_000 };
const ARGS = ['--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--authority', 'a=grpc://127.0.0.1:1', '--log-level', 'info'];

test('without --debug-heap there is no POST /debug/gc or /debug/heap-snapshot', T, async () => {
  const cli = await spawnCli(ARGS);
  try {
    assert.equal((await http(cli.adminPort!, 'POST', '/debug/gc')).status, 404);
    assert.equal((await http(cli.adminPort!, 'POST', '/debug/heap-snapshot')).status, 404);
  } finally {
    await cli.stop();
  }
});

test('with --debug-heap but node without --expose-gc, POST /debug/gc says what is missing instead of guessing', T, async () => {
  const cli = await spawnCli([...ARGS, '--debug-heap']);
  try {
    const r = await http(cli.adminPort!, 'POST', '/debug/gc');
    assert.equal(r.status, 409);
    assert.match(String((r.json as { error?: string }).error), /--expose-gc/);
  } finally {
    await cli.stop();
  }
});

test('live data bytes count objects kept alive and forget them once they are dropped', T, async () => {
  const before = await liveHeapBytes();
  // ~8 MB of small objects, far above what the test runner allocates meanwhile.
  let kept: Array<{ a: number; b: string }> | undefined = Array.from({ length: 200_000 }, (_, i) => ({ a: i, b: `s${i}` }));
  const during = await liveHeapBytes();
  assert.ok(during - before > 4 * 2 ** 20, `grew by ${during - before} bytes`);
  assert.equal(kept.length, 200_000);
  kept = undefined;
  const after = await liveHeapBytes();
  assert.ok(during - after > 4 * 2 ** 20, `shrank by ${during - after} bytes`);
});
