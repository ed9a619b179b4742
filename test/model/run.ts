/**
 * npm run modelcheck -- --seeds 1..N --steps K [--redis] [--grace MS] [--verbose] [--no-shrink] [--ignore KIND,…]
 * npm run modelcheck -- --regressions     (replay the shrunk runs of checker/regressions.ts)
 *
 * One line per seed (ok / DIVERGENCE); a divergence prints what went wrong and
 * the shrunk run as a TypeScript array to paste into a regression test. Exit
 * code 1 when any seed diverged.
 */
import { formatRun, generate, runSteps, shrink, type RunOptions } from './checker';
import type { Failure } from './checker/invariants';
import { modelOptions } from './checker/universe';
import { RuleCoverage } from './coverage';
import { REGRESSIONS } from './checker/regressions';

interface Args {
  seeds: number[];
  steps: number;
  redis: boolean;
  grace: number;
  verbose: boolean;
  shrink: boolean;
  regressions: boolean;
  ignore: Failure['kind'][];
}

function parseSeeds(text: string): number[] {
  const out: number[] = [];
  for (const part of text.split(',')) {
    const m = /^(\d+)(?:\.\.(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`--seeds: expected N, A..B or a comma list, got ${JSON.stringify(part)}`);
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    for (let s = a; s <= b; s++) out.push(s);
  }
  return out;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seeds: [1], steps: 40, redis: false, grace: 0, verbose: false, shrink: true, regressions: false, ignore: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--seeds') args.seeds = parseSeeds(value());
    else if (a === '--steps') args.steps = Number(value());
    else if (a === '--grace') args.grace = Number(value());
    else if (a === '--redis') args.redis = true;
    else if (a === '--verbose') args.verbose = true;
    else if (a === '--no-shrink') args.shrink = false;
    else if (a === '--regressions') args.regressions = true;
    else if (a === '--ignore') args.ignore.push(...(value().split(',') as Failure['kind'][]));
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(args.steps) || args.steps < 1) throw new Error('--steps: expected a positive integer');
  if (!Number.isFinite(args.grace) || args.grace < 0) throw new Error('--grace: expected milliseconds >= 0');
  return args;
}

/** Replays every shrunk run; one line each (still failing / fixed). */
async function replayRegressions(log: ((l: string) => void) | undefined): Promise<number> {
  let failing = 0;
  for (const r of REGRESSIONS) {
    const result = await runSteps(r.run, { unsubscribeGraceMs: r.unsubscribeGraceMs, redis: r.redis, ...(log ? { log } : {}) });
    const d = result.divergence;
    if (d) failing++;
    process.stdout.write(`${d ? 'FAILS' : 'ok   '} ${r.behaviour}${d ? `\n      ${d.kind}: ${d.message.split('\n').slice(0, 3).join(' | ')}` : ''}\n`);
  }
  process.stdout.write(`${REGRESSIONS.length - failing}/${REGRESSIONS.length} regressions pass\n`);
  return failing ? 1 : 0;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const log = args.verbose ? (l: string): void => void process.stdout.write(`${l}\n`) : undefined;
  if (args.regressions) return replayRegressions(log);
  const coverage = new RuleCoverage(modelOptions());
  const runOpts: RunOptions = { unsubscribeGraceMs: args.grace, redis: args.redis, coverage, ignore: args.ignore, ...(log ? { log } : {}) };
  const failed: number[] = [];
  const t0 = Date.now();
  for (const seed of args.seeds) {
    const run = generate(seed, { steps: args.steps, redis: args.redis, unsubscribeGraceMs: args.grace });
    const result = await runSteps(run, runOpts);
    const tag = `seed ${seed} (steps ${args.steps}, grace ${args.grace}${args.redis ? ', redis' : ''})`;
    if (result.ok) {
      process.stdout.write(`${tag}: ok in ${(result.ms / 1000).toFixed(1)} s (${result.skipped} steps skipped)\n`);
      continue;
    }
    failed.push(seed);
    const d = result.divergence!;
    process.stdout.write(`${tag}: DIVERGENCE (${d.kind}) at entry ${d.entry} ${JSON.stringify(d.step)}\n  ${d.message}\n`);
    if (!args.shrink) continue;
    const s = await shrink(run, result, { unsubscribeGraceMs: args.grace, redis: args.redis, ignore: args.ignore }, { ...(log ? { log } : {}) });
    const sd = s.result.divergence!;
    process.stdout.write(
      `  shrunk to ${s.run.length} entries in ${s.replays} replays (${(s.ms / 1000).toFixed(0)} s); it fails with (${sd.kind}):\n  ${sd.message}\n` +
        `  replay: runSteps(steps, ${JSON.stringify({ unsubscribeGraceMs: args.grace, redis: args.redis })})\n` +
        `const steps: RunEntry[] = ${formatRun(s.run)};\n`,
    );
  }
  process.stdout.write(`${coverage.report()}\n`);
  const secs = ((Date.now() - t0) / 1000).toFixed(0);
  process.stdout.write(
    `${args.seeds.length - failed.length}/${args.seeds.length} seeds ok in ${secs} s` +
      (failed.length ? `; DIVERGENCE in seeds ${failed.join(', ')}` : '') +
      '\n',
  );
  return failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`${err.stack ?? err.message}\n`);
    process.exit(2);
  },
);
