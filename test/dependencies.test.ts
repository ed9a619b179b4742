/**
 * The import rules of .dependency-cruiser.cjs hold over src/ and bench/: no
 * cycles, no import running back up the layers (docs/architecture.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

const REPO = path.resolve(__dirname, '..', '..');
const DEPCRUISE = path.join(REPO, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
  cycle?: { name: string }[];
}

interface CruiseResult {
  summary: { violations: Violation[]; totalCruised: number };
}

test('imports in src/ and bench/ follow the layers, without cycles', { timeout: 60_000 }, () => {
  const run = spawnSync(
    process.execPath,
    [DEPCRUISE, 'src', 'bench', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
    { cwd: REPO, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  assert.equal(run.error, undefined, String(run.error));
  let result: CruiseResult;
  try {
    result = JSON.parse(run.stdout) as CruiseResult;
  } catch {
    assert.fail(`depcruise printed no result (exit ${run.status}): ${run.stderr}`);
  }
  // A wrong path in the config would check nothing and pass.
  assert.ok(result.summary.totalCruised > 100, `only ${result.summary.totalCruised} modules cruised`);
  const lines = result.summary.violations.map((v) =>
    v.cycle && v.cycle.length > 0
      ? `${v.rule.name}: ${v.from} → ${v.cycle.map((c) => c.name).join(' → ')}`
      : `${v.rule.name}: ${v.from} → ${v.to}`,
  );
  assert.deepEqual(lines, [], `import rules broken:\n${lines.join('\n')}`);
});
