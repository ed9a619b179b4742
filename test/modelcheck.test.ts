/**
 * The model checker in CI: a fixed handful of seeded random runs against the
 * real relay (memory only with and without an unsubscribe grace, and on a
 * shared Redis), each compared with the reference model at every quiet point
 * and at every response. A failure names the seed; reproduce and shrink it with
 *   npm run modelcheck -- --seeds N --steps K [--grace MS] [--redis]
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { generate, runSteps, type RunResult } from './model/checker';
import { REGRESSIONS } from './model/checker/regressions';
import { redisSkip } from './support/redis-server';

interface Case {
  seed: number;
  steps: number;
  grace: number;
  redis: boolean;
}

const CASES: Case[] = [
  { seed: 1, steps: 60, grace: 0, redis: false },
  { seed: 3, steps: 60, grace: 0, redis: false },
  { seed: 7, steps: 60, grace: 0, redis: false },
  { seed: 34, steps: 60, grace: 0, redis: false },
  { seed: 11, steps: 60, grace: 400, redis: false },
  { seed: 12, steps: 60, grace: 400, redis: false },
  { seed: 63, steps: 60, grace: 400, redis: false },
  { seed: 25, steps: 40, grace: 0, redis: true },
  { seed: 26, steps: 40, grace: 0, redis: true },
];

function explain(c: Case, r: RunResult): string {
  const d = r.divergence;
  if (!d) return '';
  const flags = `--seeds ${c.seed} --steps ${c.steps}${c.grace ? ` --grace ${c.grace}` : ''}${c.redis ? ' --redis' : ''}`;
  return `seed ${c.seed}: ${d.kind} at entry ${d.entry} ${JSON.stringify(d.step)}\n${d.message}\nshrink it: npm run modelcheck -- ${flags}`;
}

for (const c of CASES) {
  const what = `${c.steps} random steps (seed ${c.seed}, grace ${c.grace} ms${c.redis ? ', two relays on Redis' : ''})`;
  test(`after ${what} every client holds what the reference model says and no response broke a promise`, {
    skip: c.redis ? redisSkip('modelcheck on Redis') : false,
    timeout: 120_000,
  }, async () => {
    const run = generate(c.seed, { steps: c.steps, redis: c.redis, unsubscribeGraceMs: c.grace });
    const r = await runSteps(run, { unsubscribeGraceMs: c.grace, redis: c.redis });
    assert.ok(r.ok, explain(c, r));
  });
}

// Shrunk runs that failed: each replays exactly (see test/model/checker/regressions.ts).
for (const r of REGRESSIONS) {
  test(r.behaviour, {
    ...(r.todo ? { todo: r.todo } : {}),
    skip: r.redis ? redisSkip('modelcheck regression on Redis') : false,
    timeout: 60_000,
  }, async () => {
    const result = await runSteps(r.run, { unsubscribeGraceMs: r.unsubscribeGraceMs, redis: r.redis });
    const d = result.divergence;
    assert.ok(result.ok, d ? `${d.kind} at entry ${d.entry} ${JSON.stringify(d.step)}\n${d.message}` : '');
  });
}
