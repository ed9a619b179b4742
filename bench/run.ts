/**
 * `npm run bench` — the relay's benchmarks (see bench/README.md).
 *
 *   npm run bench                    quick run (< 3 min)
 *   npm run bench -- --full          full sizes (10k clients)
 *   npm run bench -- --only 1,3      some scenarios (0/1/1s/2 always run together: they are interleaved)
 *   npm run bench -- --rounds 30     fan-out rounds (default 20)
 *   npm run bench -- --profile       also --cpu-prof the relay (1, 3, 6, 8) and summarize it
 *
 * Everything runs on 127.0.0.1: servers under test pinned to core 0, load
 * generators, origin and this coordinator on core 1 (taskset).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Cleanup, type BenchContext, type ScenarioResult } from './lib/context';
import { verdictLine } from './lib/targets';
import { LOAD_CORE, foreignLoad, machineBusySeconds, pinSelf, selfAndChildrenSeconds, tasksetAvailable } from './lib/proc';
import { runFanout } from './scenarios/fanout';
import { runStorm } from './scenarios/storm';
import { runIdle } from './scenarios/idle';
import { runDedup } from './scenarios/dedup';
import { runChurn } from './scenarios/churn';
import { runRedis } from './scenarios/redis';
import { runScale } from './scenarios/scale';

const USAGE = `usage: npm run bench [-- --full] [--only 0,3,…] [--rounds N] [--profile]
  --full      full sizes (10k clients; several minutes)
  --only IDS  scenarios to run (0/1/1s/2 always run together: they are interleaved)
  --rounds N  measured fan-out rounds (default 20)
  --profile   run the relay (and its ceiling) of scenarios 1, 3, 6 and 8 under --cpu-prof and summarize the profiles
  --no-ack    fan-out clients do not ACK (sensitivity check; ACKs are on by default, as Envoy sends them)
  --clients N override N of the fan-out and storm scenarios
`;

interface Args {
  full: boolean;
  only: Set<string> | undefined;
  rounds: number | undefined;
  profile: boolean;
  ack: boolean;
  clients: number | undefined;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { full: false, only: undefined, rounds: undefined, profile: false, ack: true, clients: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const eq = a.indexOf('=');
      if (eq >= 0) return a.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--full') args.full = true;
    else if (a === '--quick') args.full = false;
    else if (a === '--profile') args.profile = true;
    else if (a === '--no-ack') args.ack = false;
    else if (a.startsWith('--clients')) args.clients = Number(value());
    else if (a.startsWith('--only')) args.only = new Set(value().split(',').map((s) => s.trim()).filter(Boolean));
    else if (a.startsWith('--rounds')) args.rounds = Number(value());
    else if (a === '--help' || a === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else throw new Error(`unknown option ${a} (try --help)`);
  }
  return args;
}

interface ScenarioGroup {
  ids: string[];
  name: string;
  /** Hard bound on the scenario's wall time. */
  timeoutMs: (full: boolean) => number;
  run(ctx: BenchContext): Promise<ScenarioResult[]>;
}

const GROUPS: ScenarioGroup[] = [
  // 0/1/2 interleaved, then the SotW fan-out (row 1s) interleaved with its own ceiling.
  { ids: ['0', '1', '1s', '2'], name: 'fan-out (ceiling, relay, SotW, ablation)', timeoutMs: (f) => (f ? 1_200_000 : 180_000), run: runFanout },
  { ids: ['3'], name: 'initial sync / reconnect storm', timeoutMs: (f) => (f ? 600_000 : 60_000), run: async (c) => [await runStorm(c)] },
  { ids: ['4'], name: 'idle memory', timeoutMs: (f) => (f ? 600_000 : 60_000), run: async (c) => [await runIdle(c)] },
  { ids: ['5'], name: 'dedup', timeoutMs: (f) => (f ? 300_000 : 45_000), run: async (c) => [await runDedup(c)] },
  { ids: ['6'], name: 'sustained churn', timeoutMs: (f) => (f ? 600_000 : 75_000), run: async (c) => [await runChurn(c)] },
  { ids: ['7'], name: 'redis path', timeoutMs: (f) => (f ? 600_000 : 120_000), run: async (c) => [await runRedis(c)] },
  { ids: ['8'], name: 'scale: streams multiplexed per connection', timeoutMs: (f) => (f ? 900_000 : 120_000), run: async (c) => [await runScale(c)] },
];

function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' });
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    os: `${os.type()} ${os.arch()}`,
    node: process.version,
    commit: git.status === 0 ? `${git.stdout.trim()}${dirty.stdout.trim() ? '+dirty' : ''}` : 'unknown',
  };
}

function esc(s: string): string {
  return s.replace(/\|/g, '\\|');
}

function renderTable(results: ScenarioResult[]): string {
  const lines = ['| # | scenario | figures (medians over rounds) | vs baseline (same run) | targets |', '|---|---|---|---|---|'];
  for (const r of results) {
    const targets = r.targets.length
      ? r.targets.map((t) => `${t.verdict === 'met' ? '✅' : t.verdict === 'missed' ? '❌' : '–'} ${t.target}: ${t.value}`).join('<br>')
      : '–';
    lines.push(`| ${r.id} | ${esc(r.title)} | ${esc(r.figures)} | ${esc(r.ratio)} | ${esc(targets)} |`);
  }
  return lines.join('\n');
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: gave up after ${Math.round(ms / 1000)} s`)), ms);
    }),
  ]);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const resultsDir = path.resolve(__dirname, '..', '..', 'bench', 'results');
  fs.mkdirSync(resultsDir, { recursive: true });
  const runId = new Date().toISOString().replace(/[:.]/g, '-').replace(/Z$/, '');
  const log = (msg: string): void => void process.stderr.write(`[bench] ${msg}\n`);

  if (!tasksetAvailable()) throw new Error('taskset (util-linux) is required to pin the server and the load generator to separate cores');
  if (os.cpus().length < 2) log('WARNING: fewer than 2 cores; the server and the load generator will share one');
  if (!pinSelf(LOAD_CORE)) log('WARNING: could not pin the coordinator to the load core');
  const info = machine();
  const mode = args.full ? 'full' : 'quick';
  const argv = process.argv.slice(2);
  const command = `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`;
  log(`${mode} run ${runId} on ${info.cpu} (${info.cores} cores), node ${info.node}, commit ${info.commit}`);

  const selected = GROUPS.filter((g) => !args.only || g.ids.some((id) => args.only!.has(id)) || args.only.has(g.name));
  if (selected.length === 0) throw new Error(`--only matched no scenario (ids 0–7, 1s)`);
  const results: ScenarioResult[] = [];
  const started = Date.now();
  let failures = 0;
  let cleanup: Cleanup | undefined;
  const interrupt = (): void => {
    log('interrupted; stopping child processes');
    void (cleanup?.run() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);

  for (const g of selected) {
    cleanup = new Cleanup();
    const c = cleanup;
    const ctx: BenchContext = {
      full: args.full,
      rounds: args.rounds,
      profile: args.profile,
      ack: args.ack,
      clients: args.clients,
      resultsDir,
      runId,
      payloadBytes: 1024,
      log,
      defer: (fn) => c.add(fn),
    };
    // Other people's builds and tests on this box would be measured too: wait (bounded) for quiet.
    let background = await foreignLoad(1000);
    const quietBy = Date.now() + (args.full ? 90_000 : 5_000);
    while (background > 0.1 && Date.now() < quietBy) {
      log(`other processes use ${(background * 100).toFixed(0)}% of the machine; waiting for quiet`);
      background = await foreignLoad(2000);
    }
    const busy0 = machineBusySeconds();
    const own0 = selfAndChildrenSeconds();
    const t0 = Date.now();
    log(`scenario ${g.ids.join('/')}: ${g.name}`);
    let rs: ScenarioResult[];
    try {
      rs = await withTimeout(g.run(ctx), g.timeoutMs(args.full), `scenario ${g.ids.join('/')}`);
    } catch (err) {
      failures++;
      log(`scenario ${g.ids.join('/')} FAILED: ${(err as Error).stack ?? String(err)}`);
      rs = g.ids.map((id) => ({
        id,
        title: g.name,
        figures: `FAILED: ${(err as Error).message.split('\n')[0]}`,
        ratio: 'n/a',
        targets: [],
        data: { error: (err as Error).message },
      }));
    } finally {
      await c.run();
    }
    const secs = (Date.now() - t0) / 1000;
    // Children are reaped by now, so their CPU is in our cutime/cstime: the rest of the busy time is foreign.
    const foreign = Math.max(0, machineBusySeconds() - busy0 - (selfAndChildrenSeconds() - own0)) / (secs * os.cpus().length);
    if (foreign > 0.05) log(`WARNING: other processes used ${(foreign * 100).toFixed(0)}% of the machine during scenario ${g.ids.join('/')}; its figures are disturbed`);
    for (const r of rs) {
      if (foreign > 0.05) r.figures += ` ⚠ background load ${(foreign * 100).toFixed(0)}% of the machine`;
      results.push(r);
      const record = {
        scenario: r.id,
        title: r.title,
        mode,
        runId,
        command,
        machine: info,
        seconds: secs,
        backgroundLoad: { before: background, during: foreign },
        figures: r.figures,
        ratio: r.ratio,
        targets: r.targets,
        data: r.data,
      };
      fs.writeFileSync(path.join(resultsDir, `${runId}-s${r.id}.json`), JSON.stringify(record, null, 2));
      process.stdout.write(`${renderTable([r]).split('\n')[2]}\n`);
    }
    log(`scenario ${g.ids.join('/')} took ${secs.toFixed(1)} s`);
  }

  const table = renderTable(results);
  const totalSecs = (Date.now() - started) / 1000;
  const header = `xdstp-relay benchmark, ${mode} run ${runId} (${totalSecs.toFixed(0)} s): ${info.cpu}, ${info.cores} cores, ${info.memGiB} GiB, Linux ${info.kernel}, node ${info.node}, commit ${info.commit}\ncommand: ${command}`;
  process.stdout.write(`\n${header}\n\n${table}\n`);
  const verdicts = results.flatMap((r) => r.targets.map((t) => verdictLine(`row ${r.id}`, t)));
  if (verdicts.length > 0) process.stdout.write(`\ntargets:\n${verdicts.join('\n')}\n`);
  fs.writeFileSync(
    path.join(resultsDir, `${runId}-run.json`),
    JSON.stringify({ runId, mode, command, machine: info, seconds: totalSecs, table, results }, null, 2),
  );
  log(`results: ${path.join(resultsDir, `${runId}-*.json`)}`);
  process.exit(failures > 0 ? 1 : 0);
}

main().catch((err: unknown) => {
  process.stderr.write(`[bench] ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
