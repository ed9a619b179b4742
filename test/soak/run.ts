/**
 * `npm run soak` — the relay run the way production runs it, for a while:
 * streams coming and going, a control plane flapping, the relay and Redis
 * killed under load, bad clients next to good ones. Each scenario prints its
 * figures and a ✅/❌ verdict per check (⚠️ for a check that only warns).
 *
 *   npm run soak                  full size (< 15 min)
 *   npm run soak -- --smoke       every scenario small (< 2 min; run by test/soak-smoke.test.ts in CI)
 *   npm run soak -- --only a,c    some scenarios
 *
 * Everything runs on 127.0.0.1 and stops by itself: every loop and wait is
 * bounded, each scenario has a hard time limit. Exit status 1 on any ❌.
 * The last line of output is a JSON summary (`SOAK-SUMMARY {…}`) for tools.
 */
import { SoakContext, type Check } from './context';
import { runChurn } from './churn';
import { runFlap } from './flap';
import { runRedisFlap, runWarmRestart } from './redis';
import { runStorm } from './storm';

interface Scenario {
  id: string;
  title: string;
  /** Hard bound on the scenario's wall time, ms. */
  limitMs: (smoke: boolean) => number;
  run(ctx: SoakContext): Promise<void>;
}

const SCENARIOS: Scenario[] = [
  { id: 'a', title: 'stream churn with a leak check', limitMs: (s) => (s ? 60_000 : 300_000), run: runChurn },
  { id: 'b', title: 'control-plane flapping', limitMs: (s) => (s ? 60_000 : 150_000), run: runFlap },
  { id: 'c', title: 'relay SIGKILL and warm restart on Redis', limitMs: (s) => (s ? 60_000 : 120_000), run: runWarmRestart },
  { id: 'd', title: 'Redis flapping under load', limitMs: (s) => (s ? 60_000 : 120_000), run: runRedisFlap },
  { id: 'e', title: 'bad-input storm next to 50 good clients', limitMs: (s) => (s ? 60_000 : 240_000), run: runStorm },
];

interface Args {
  smoke: boolean;
  only: Set<string> | undefined;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { smoke: false, only: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--smoke') args.smoke = true;
    else if (a === '--full') args.smoke = false;
    else if (a === '--only') args.only = new Set((argv[++i] ?? '').split(',').filter(Boolean));
    else if (a.startsWith('--only=')) args.only = new Set(a.slice(7).split(',').filter(Boolean));
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npm run soak [-- --smoke] [--only a,b,…]\n');
      process.exit(0);
    } else throw new Error(`unknown option ${a} (try --help)`);
  }
  return args;
}

function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function runOne(s: Scenario, smoke: boolean): Promise<Check[]> {
  const ctx = new SoakContext(smoke, s.id, print);
  const t0 = Date.now();
  print(`\n(${s.id}) ${s.title}${smoke ? ' — smoke size' : ''}`);
  let timer: NodeJS.Timeout | undefined;
  const limit = s.limitMs(smoke);
  try {
    await Promise.race([
      s.run(ctx),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`did not finish within ${limit / 1000} s`)), limit);
      }),
    ]);
  } catch (err) {
    ctx.check('scenario ran to the end', false, (err as Error).message.split('\n').slice(0, 6).join(' | '));
  } finally {
    clearTimeout(timer);
    await ctx.runCleanups();
  }
  print(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  return ctx.checks;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  const checks: Check[] = [];
  for (const s of SCENARIOS) {
    if (args.only && !args.only.has(s.id)) continue;
    checks.push(...(await runOne(s, args.smoke)));
  }
  const failed = checks.filter((c) => c.verdict === 'fail');
  const warned = checks.filter((c) => c.verdict === 'warn');
  print(
    `\nsoak ${args.smoke ? 'smoke' : 'full'}: ${checks.length - failed.length - warned.length} ✅, ${warned.length} ⚠️, ${failed.length} ❌ ` +
      `in ${((Date.now() - t0) / 1000).toFixed(0)} s`,
  );
  print(`SOAK-SUMMARY ${JSON.stringify({ smoke: args.smoke, seconds: (Date.now() - t0) / 1000, checks })}`);
  process.exit(failed.length > 0 ? 1 : 0);
}

main().catch((err: unknown) => {
  process.stderr.write(`soak: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(2);
});
