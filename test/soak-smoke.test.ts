/**
 * The soak suite at smoke size (`npm run soak -- --smoke`, test/soak/): the
 * relay under stream churn (with a leak check), a flapping control plane, a
 * SIGKILL and warm restart on Redis, Redis flapping, and a bad-input storm
 * next to good clients. Any ❌ fails this test; ⚠️ checks (the fairness
 * target of the storm) are printed but do not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { redisSkip } from './support/redis-server';
import type { Check } from './soak/context';

const RUN = path.join(__dirname, 'soak', 'run.js');

test('the soak scenarios at smoke size all pass', { skip: redisSkip('the soak smoke run'), timeout: 240_000 }, async () => {
  const proc = spawn(process.execPath, [RUN, '--smoke'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
  const summaryLine = out.split('\n').find((l) => l.startsWith('SOAK-SUMMARY '));
  const printed = out.split('\n').filter((l) => !l.startsWith('SOAK-SUMMARY ')).join('\n');
  // The figures belong in the test log whatever the outcome.
  process.stdout.write(`${printed}\n`);
  assert.ok(summaryLine, `the soak run printed no summary (exit ${code})`);
  const { checks } = JSON.parse(summaryLine.slice('SOAK-SUMMARY '.length)) as { checks: Check[] };
  const failed = checks.filter((c) => c.verdict === 'fail');
  assert.deepEqual(
    failed.map((c) => `(${c.scenario}) ${c.what}: ${c.figures}`),
    [],
  );
  assert.equal(new Set(checks.map((c) => c.scenario)).size, 5, 'every scenario reported');
  assert.equal(code, 0);
});
