/**
 * Scenario 7: the Redis path, against the same redis-server's own speed in
 * the same run. Per round (medians over rounds are reported):
 *
 *  - baselines: `redis-benchmark -t set -r N -d 1024 -P 16` and `-t get …`
 *    (ops/s over N distinct keys, what the store touches: the targets'
 *    baselines), the same without `-r` (one key written or read over and
 *    over; for context), and a bare warm pass over the stored keys:
 *    `redis-cli --scan` listing them, then `redis-cli --pipe` sending one MGET
 *    per 1,000 keys and reading every reply;
 *  - the write target's bound without the store: the same N new records and
 *    their globs' member sets written the leanest way Redis has, one MSET and
 *    one SADD per 1,000, piped by `redis-cli --pipe` into the emptied Redis
 *    (emptied again after);
 *  - a first `RedisStore.warmLoad` of the empty Redis (what a relay's first
 *    start does: it finds no index, scans, and marks the empty index complete);
 *  - `RedisStore.write` of N resources of 1 KB, one `write()` per upstream
 *    response of 1,000 without awaiting it, as the engine does, until every one
 *    has resolved (reached Redis);
 *  - `RedisStore.warmLoad` of them back (through the index), the median of
 *    three loads;
 *  - the Redis client's own pass over the same records, for the warm load's
 *    bound on this side (redis-client-pass.ts, in a process of its own):
 *    ioredis, the client the store is built on, MGETs them in pages and with
 *    pages in flight as the warm load does, and drops each reply (as the timed
 *    loads drop their pages); the median of three passes;
 *  - a relay (`--redis`, origin down) started against them: time from spawn
 *    until a client, connecting once `/readyz` says ready (what a balancer
 *    does), holds a glob of 1,000; and until all N are in its memory;
 *  - FOREIGN keys of another application added (small values, `DEBUG
 *    POPULATE`), and `warmLoad` timed just before and with them (three loads
 *    each, their medians), the latter once Redis has finished rehashing its
 *    keyspace after taking them in: the index keeps it to the relay's own
 *    data. The Redis client's own pass is timed just before and with them
 *    too (the median of three each), for how much Redis itself slows beside
 *    them. Then, for context, the same load of a Redis without
 *    the index (its completion mark deleted): the one-time SCAN an upgraded
 *    relay does, over the foreign keys too.
 *
 * Placement: redis-server on core 0; everything talking to it (redis-benchmark,
 * redis-cli, the store in this coordinator, the relay) on core 1, so client and
 * server never share a core and the baselines run where the relay runs.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { StoredResource } from '../../src/cache/types';
import { createRedisStore } from '../../src/cache/redis-store';
import { RedisKeyLayout, tagOfSource } from '../../src/cache/redis-keys';
import { encodeRecord } from '../../src/cache/redis-record';
import { encodeResource, payloadOf } from '../origin';
import type { BenchContext, ScenarioResult, TargetCheck } from '../lib/context';
import type { ClientPassRun } from './redis-client-pass';
import { TYPE_URL, urn, type Plan } from '../lib/names';
import { usedCpuSecs } from '../lib/redis-info';
import { LOAD_CORE, SERVER_CORE, costOf, freePort, memStatus, sleep, spawnPinned, stopChild } from '../lib/proc';
import { GenPool, cliHasFlag, metricValue, startRelay } from '../lib/servers';
import { fmt, fmtRatio, median } from '../lib/stats';

const PER_GLOB = 1000;
const BATCH = 1000;
const WRITE_TARGET = 0.8;
const WARM_TARGET = 0.6;
const FOREIGN_TARGET = 1.2;
const FIRST_CLIENT_TARGET = 1.5;
/** Warm loads timed per measurement (their median). */
const LOADS = 3;

function which(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function resourceAt(i: number, payload: Buffer, version = 'v1'): StoredResource {
  const g = Math.floor(i / PER_GLOB);
  const key = urn(`warm/g${g}/r${i}`);
  return { key, typeUrl: TYPE_URL, version, resource: encodeResource(key, version, payload), glob: urn(`warm/g${g}/*`) };
}

/**
 * The push as upstream responses of BATCH resources each, as the engine hands
 * them to the store: each key and glob already looked up in its maps (which
 * leaves V8's strings flat and their hashes computed), so the store's own work
 * is what is timed, not that of strings built here by concatenation.
 */
function pushOf(total: number, payload: Buffer, version: string): StoredResource[][] {
  const batches: StoredResource[][] = [];
  const engineMaps = new Map<string, true>();
  for (let i = 0; i < total; i += BATCH) {
    const put: StoredResource[] = [];
    for (let j = i; j < Math.min(total, i + BATCH); j++) {
      const r = resourceAt(j, payload, version);
      engineMaps.set(r.key, true);
      engineMaps.set(r.glob!, true);
      put.push(r);
    }
    batches.push(put);
  }
  return batches;
}

/** Runs a command pinned to the load core, its stdin `stdin` or the file `stdin.file`; resolves its stdout when it exits (killed after 120 s). */
function run(cmd: string, args: string[], stdin?: Buffer | { file: string }): Promise<{ out: string; code: number | null }> {
  const fromFile = stdin !== undefined && !Buffer.isBuffer(stdin) ? fs.openSync(stdin.file, 'r') : undefined;
  const child = spawnPinned(LOAD_CORE, cmd, args, { stdio: [fromFile ?? (stdin ? 'pipe' : 'ignore'), 'pipe', 'pipe'] });
  if (fromFile !== undefined) fs.closeSync(fromFile); // the child has its own copy
  const chunks: Buffer[] = [];
  child.stdout?.on('data', (d: Buffer) => chunks.push(d));
  child.stderr?.on('data', (d: Buffer) => chunks.push(d));
  if (Buffer.isBuffer(stdin)) child.stdin?.end(stdin);
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ out: Buffer.concat(chunks).toString('utf8'), code });
    }),
  );
}

/** `redis-benchmark -t <test> -d 1024 -P 16` ops/s; with `keyspace`, over that many random keys (`-r`) instead of one. */
async function redisBenchmark(port: number, test: 'set' | 'get', n: number, keyspace?: number): Promise<number> {
  const args = ['-h', '127.0.0.1', '-p', String(port), '-t', test, '-d', '1024', '-P', '16', '-q', '-n', String(n)];
  if (keyspace !== undefined) args.push('-r', String(keyspace));
  const { out } = await run('redis-benchmark', args);
  // "SET: 312500.00 requests per second, p50=…" (progress lines are \r-separated; the summary is last).
  const re = new RegExp(`${test.toUpperCase()}: ([\\d.]+) requests per second`, 'g');
  const all = [...out.matchAll(re)];
  return all.length > 0 ? Number(all[all.length - 1]![1]) : NaN;
}

function cli(port: number, ...args: string[]): string {
  return spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
}

/**
 * Waits until redis-server has finished rehashing its keyspace (`DEBUG
 * HTSTATS 0` names no rehashing target). Adding a million keys grows the
 * keyspace's hash table, and Redis moves its entries to the larger table a
 * step at a time: one step per lookup, and a millisecond every 100 ms of its
 * timer (~30 s for a million keys left alone). Meanwhile every lookup, whoever
 * makes it, costs more. Lookups of one absent key (`redis-benchmark -t get`)
 * drive the rehash to its end in a second or two. Resolves the milliseconds
 * it took (0 at once for a server whose `DEBUG HTSTATS` names no rehashing
 * target at all); throws after `timeoutMs`.
 */
async function rehashed(port: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  while (/rehashing target/i.test(cli(port, 'debug', 'htstats', '0'))) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`redis-server still rehashing its keyspace after ${timeoutMs} ms`);
    await redisBenchmark(port, 'get', 200_000);
  }
  return Date.now() - t0;
}

/** CPU seconds redis-server has used so far. */
function serverCpuSecs(port: number): number {
  return usedCpuSecs(cli(port, 'info', 'cpu'));
}

/** Total commands the server has executed (INFO commandstats). */
function commandsExecuted(port: number): number {
  let n = 0;
  for (const m of cli(port, 'info', 'commandstats').matchAll(/calls=(\d+)/g)) n += Number(m[1]);
  return n;
}

/** One command in RESP, as redis-cli --pipe reads it. */
function resp(args: Array<string | Buffer>): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const body = typeof a === 'string' ? Buffer.from(a, 'utf8') : a;
    parts.push(Buffer.from(`$${body.length}\r\n`), body, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

let scanCount: boolean | undefined;
/** redis-cli ≥ 7.2 takes `--scan --count N`; older ones scan with the server's default COUNT (10). */
function scanCountFlag(): boolean {
  if (scanCount === undefined) {
    const help = spawnSync('redis-cli', ['--help'], { encoding: 'utf8' });
    scanCount = /--count/.test(`${help.stdout}${help.stderr}`);
  }
  return scanCount;
}

/**
 * The bare pass a warm start is compared with: `redis-cli --scan` lists the
 * keys, `redis-cli --pipe` fetches them with one MGET per 1,000 and reads every
 * reply. Wall time from the first spawn to the last exit; the MGET commands are
 * built in between (counted in the time).
 */
async function barePass(port: number, pattern: string): Promise<{ ms: number; keys: number; values: number; count: number }> {
  const t0 = process.hrtime.bigint();
  const scan = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), '--scan', '--pattern', pattern, ...(scanCountFlag() ? ['--count', '1000'] : [])]);
  const keys = scan.out.split('\n').filter((k) => k !== '');
  const commands: Buffer[] = [];
  for (let i = 0; i < keys.length; i += 1000) commands.push(resp(['MGET', ...keys.slice(i, i + 1000)]));
  const replies = await pipe(port, Buffer.concat(commands));
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ms, keys: keys.length, values: replies, count: scanCountFlag() ? 1000 : 10 };
}

/** `redis-cli --pipe` of `input` (RESP commands, or a file of them); resolves the number of replies, throws on any error reply. */
async function pipe(port: number, input: Buffer | { file: string }): Promise<number> {
  const { out } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), '--pipe'], input);
  // "All data transferred. Waiting for the last reply... / errors: 0, replies: 100"
  const m = /errors: (\d+), replies: (\d+)/.exec(out);
  if (!m || m[1] !== '0') throw new Error(`redis-cli --pipe failed: ${out}`);
  return Number(m[2]);
}

/**
 * The same new records written the leanest way Redis has, for the write
 * target's bound: per 1,000 records one MSET of their records (the store's
 * keys and record bytes) and one SADD of their glob's member set, what the
 * store's write leaves in Redis but for its few index commands. Written once
 * to `file` (the rounds pipe it from there, so it takes no memory here).
 */
function writeBareInput(file: string, total: number, payload: Buffer, layout: RedisKeyLayout): void {
  const fd = fs.openSync(file, 'w');
  try {
    for (let i = 0; i < total; i += PER_GLOB) {
      const batch = Array.from({ length: Math.min(PER_GLOB, total - i) }, (_, k) => resourceAt(i + k, payload));
      const glob = batch[0]!.glob!; // one glob per PER_GLOB records
      const tag = tagOfSource(glob); // a glob's direct members share its hash tag, as the store writes them
      fs.writeSync(fd, resp(['MSET', ...batch.flatMap((r) => [layout.resource(r.key, tag), encodeRecord(r)])]));
      fs.writeSync(fd, resp(['SADD', layout.members(glob, tag), ...batch.map((r) => r.key)]));
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** `redis-cli --pipe` of `file` (writeBareInput): wall time from spawn to exit. */
async function bareWrite(port: number, file: string, commands: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  const replies = await pipe(port, { file });
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  if (replies !== commands) throw new Error(`redis-cli --pipe of the bare write: ${replies} replies to ${commands} commands`);
  return secs;
}

/** One timed warm load in this process: wall time, this process's CPU µs per record, its minor page faults. */
interface Timed {
  secs: number;
  cpuUs: number;
  faults: number;
}

const CLIENT_PASS_PATH = path.resolve(__dirname, 'redis-client-pass.js');

/** `passes` of the Redis client's own pass over the globs' records under `prefix` (redis-client-pass.ts), on the load core. */
async function clientPasses(url: string, prefix: string, passes: number): Promise<ClientPassRun[]> {
  const { out, code } = await run(process.execPath, [CLIENT_PASS_PATH, url, prefix, String(passes)]);
  if (code !== 0) throw new Error(`redis-client-pass failed: ${out}`);
  return (JSON.parse(out.trim().split('\n').pop()!) as { runs: ClientPassRun[] }).runs;
}

interface Round {
  setPerSec: number;
  getPerSec: number;
  setSpreadPerSec: number;
  getSpreadPerSec: number;
  writeRate: number;
  writeSecs: number;
  /** The same new records written bare (writeBareInput): records/s. */
  bareWriteRate: number;
  updateRate: number;
  commandsPerResource: number;
  warmRate: number;
  warmSecs: number;
  /** This process's minor page faults in a timed warm load (the median). */
  warmFaults: number;
  /**
   * warmLoad right before the foreign keys are added (the foreign target's baseline: same process
   * state, minutes after the write phase), with them present, and by the one-time scan of an unindexed Redis.
   */
  warmBeforeForeignSecs: number;
  warmForeignSecs: number;
  /** How long redis-server took to finish rehashing its keyspace after the foreign keys were added (rehashed(); before the loads beside them). */
  rehashMs: number;
  scanForeignSecs: number;
  bareMs: number;
  /** The Redis client's own pass over the same records (redis-client-pass.ts): records/s, redis-server's CPU µs per record in it, the pass's page faults. */
  clientPassRate: number;
  clientPassServerUs: number;
  clientPassFaults: number;
  /** The Redis client's own pass, its median wall time just before the foreign keys were added and beside them. */
  clientPassBeforeForeignSecs: number;
  clientPassForeignSecs: number;
  /** This process's CPU µs per resource (user + system) in store.write of new records and in the timed warmLoad: the client side of each. */
  clientUs: { write: number; warm: number; clientPass: number };
  /** redis-server CPU µs per operation / resource: redis-benchmark SET and GET (one key; over TOTAL keys), the bare write of the new records, store.write new and update, warmLoad (without and with the foreign keys). */
  serverUs: { set: number; get: number; setSpread: number; getSpread: number; bareWrite: number; write: number; update: number; warm: number; warmBeforeForeign: number; warmForeign: number };
  relay?: { readyMs: number; firstClientMs: number; served: boolean; loadedMs: number; cached: number; rss: number };
}

export async function runRedis(ctx: BenchContext): Promise<ScenarioResult> {
  const na = (why: string): ScenarioResult => ({ id: '7', title: 'Redis path', figures: `n/a: ${why}`, ratio: 'n/a', targets: [], data: { skipped: why } });
  if (!which('redis-server') || !which('redis-benchmark') || !which('redis-cli')) return na('redis-server / redis-benchmark / redis-cli not installed');

  const TOTAL = ctx.full ? 100_000 : 20_000;
  const FOREIGN = ctx.full ? 1_000_000 : 200_000;
  const ROUNDS = ctx.full ? 5 : 3;
  const port = await freePort();
  const server = spawnPinned(
    SERVER_CORE,
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning', '--daemonize', 'no', '--enable-debug-command', 'local'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  ctx.defer(() => stopChild(server));
  const url = `redis://127.0.0.1:${port}`;
  const prefix = 'xdstp-relay:';
  const pattern = `${prefix}r:*`;

  const store = createRedisStore(url, { writeTimeoutMs: 30_000, maxPendingWrites: TOTAL });
  ctx.defer(() => store.close());
  if (!(await store.waitUntilHealthy(10_000))) throw new Error(`redis-server on ${port} did not come up`);
  const reader = createRedisStore(url, { warmTimeoutMs: 30_000 });
  ctx.defer(() => reader.close());
  const withRelay = cliHasFlag('--redis');
  const gens = withRelay ? await GenPool.start(1) : undefined;
  if (gens) ctx.defer(() => gens.stop());

  const payload = payloadOf(ctx.payloadBytes);
  const bareDir = fs.mkdtempSync(path.join(os.tmpdir(), 'xdstp-bench-redis-'));
  ctx.defer(() => fs.rmSync(bareDir, { recursive: true, force: true }));
  const bareFile = path.join(bareDir, 'bare-write.resp');
  writeBareInput(bareFile, TOTAL, payload, new RedisKeyLayout(prefix));
  const rounds: Round[] = [];
  const n = TOTAL.toLocaleString('en-US');
  let dbsize = 0;
  let redisRss = NaN;
  for (let round = 0; round < ROUNDS; round++) {
    cli(port, 'flushall');
    const ops = ctx.full ? 1_000_000 : 400_000;
    // For context: redis-benchmark's defaults, one key written / read over and over.
    let cpu = serverCpuSecs(port);
    /** redis-server CPU µs per unit since the last call. */
    const serverUs = (units: number): number => {
      const now = serverCpuSecs(port);
      const us = ((now - cpu) * 1e6) / units;
      cpu = now;
      return us;
    };
    const setPerSec = await redisBenchmark(port, 'set', ops);
    const setUs = serverUs(ops);
    const getPerSec = await redisBenchmark(port, 'get', ops);
    const getUs = serverUs(ops);
    // The targets' baselines: the same over TOTAL distinct keys (-r), what a store of TOTAL resources touches.
    cli(port, 'flushall');
    serverUs(1);
    const setSpreadPerSec = await redisBenchmark(port, 'set', ops, TOTAL);
    const setSpreadUs = serverUs(ops);
    const getSpreadPerSec = await redisBenchmark(port, 'get', ops, TOTAL);
    const getSpreadUs = serverUs(ops);
    // The write target's bound: the same new records written bare, into an empty Redis as the store's are.
    cli(port, 'flushall');
    serverUs(1);
    const bareWriteSecs = await bareWrite(port, bareFile, (2 * TOTAL) / PER_GLOB);
    const bareWriteUs = serverUs(TOTAL);
    const bareKeys = Number(cli(port, 'dbsize'));
    if (bareKeys !== TOTAL + TOTAL / PER_GLOB) throw new Error(`the bare write left ${bareKeys} keys, not ${TOTAL + TOTAL / PER_GLOB}`);
    cli(port, 'flushall');
    cli(port, 'config', 'resetstat');
    // A relay's first start on this (empty) Redis: no index yet, one scan of nothing, the index marked complete.
    for await (const page of reader.warmLoad({ waitMs: 5000 })) throw new Error(`an empty Redis warm-loaded ${page.length}`);

    // Writes: one write() per upstream response, not awaited (the engine does not), until all reached Redis.
    // First push: every key new. Then an update push: every resource at a new version.
    let batches = pushOf(TOTAL, payload, 'v1');
    const commandsBefore = commandsExecuted(port);
    serverUs(1);
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await Promise.all(batches.map((put) => store.write({ put, remove: [], absent: [] })));
    const writeSecs = Number(process.hrtime.bigint() - t0) / 1e9;
    const writeCpu = process.cpuUsage(c0);
    const writeUs = serverUs(TOTAL);
    const commandsPerResource = (commandsExecuted(port) - commandsBefore - 2) / TOTAL; // -2: the INFOs themselves
    batches = pushOf(TOTAL, payload, 'v2');
    serverUs(1);
    const t2 = process.hrtime.bigint();
    await Promise.all(batches.map((put) => store.write({ put, remove: [], absent: [] })));
    const updateSecs = Number(process.hrtime.bigint() - t2) / 1e9;
    const updateUs = serverUs(TOTAL);
    batches = [];
    dbsize = Number(cli(port, 'dbsize'));
    const stored = Number(cli(port, 'eval', `return #redis.call('keys', ARGV[1])`, '0', pattern));
    if (stored !== TOTAL) throw new Error(`store.write left ${stored} of ${TOTAL} records in Redis`);
    redisRss = memStatus(server.pid ?? -1).rss;

    // Warm load back through the store: the median of LOADS loads (one load swings by a third with the
    // garbage collector's state, left by the write phase in this same process).
    const oneLoad = async (): Promise<Timed> => {
      const cost = await costOf(async () => {
        let loaded = 0;
        for await (const page of reader.warmLoad({ waitMs: 5000 })) loaded += page.length;
        return loaded;
      });
      if (cost.result !== TOTAL) throw new Error(`warmLoad read ${cost.result} of ${TOTAL}`);
      return { secs: cost.secs, cpuUs: cost.cpuUs / TOTAL, faults: cost.faults };
    };
    const timedLoads = async (times: number): Promise<Timed> => {
      const runs: Timed[] = [];
      for (let k = 0; k < times; k++) runs.push(await oneLoad());
      return { secs: median(runs.map((x) => x.secs)), cpuUs: median(runs.map((x) => x.cpuUs)), faults: median(runs.map((x) => x.faults)) };
    };
    serverUs(1);
    const warm = await timedLoads(LOADS);
    const warmSecs = warm.secs;
    const warmUs = serverUs(LOADS * TOTAL);

    const bare = await barePass(port, pattern);
    if (bare.keys !== TOTAL) throw new Error(`redis-cli --scan listed ${bare.keys} of ${TOTAL}`);
    const passes = await clientPasses(url, prefix, LOADS);
    if (passes.length !== LOADS) throw new Error(`redis-client-pass made ${passes.length} of ${LOADS} passes`);
    serverUs(1); // the pass measured its own share of redis-server's CPU: the next measurement starts here

    const r: Round = {
      setPerSec,
      getPerSec,
      setSpreadPerSec,
      getSpreadPerSec,
      writeRate: TOTAL / writeSecs,
      writeSecs,
      bareWriteRate: TOTAL / bareWriteSecs,
      updateRate: TOTAL / updateSecs,
      commandsPerResource,
      warmRate: TOTAL / warmSecs,
      warmSecs,
      warmFaults: warm.faults,
      warmBeforeForeignSecs: NaN,
      warmForeignSecs: NaN,
      rehashMs: NaN,
      scanForeignSecs: NaN,
      bareMs: bare.ms,
      clientPassRate: TOTAL / median(passes.map((x) => x.secs)),
      clientPassServerUs: median(passes.map((x) => x.serverUs)),
      clientPassFaults: median(passes.map((x) => x.faults)),
      clientPassBeforeForeignSecs: NaN,
      clientPassForeignSecs: NaN,
      clientUs: { write: (writeCpu.user + writeCpu.system) / TOTAL, warm: warm.cpuUs, clientPass: median(passes.map((x) => x.cpuUs)) },
      serverUs: { set: setUs, get: getUs, setSpread: setSpreadUs, getSpread: getSpreadUs, bareWrite: bareWriteUs, write: writeUs, update: updateUs, warm: warmUs, warmBeforeForeign: NaN, warmForeign: NaN },
    };

    // A relay started against them with its origin down: whatever a client gets comes from Redis.
    if (gens) {
      const deadPort = await freePort();
      const ts = Date.now();
      const relay = await startRelay({
        originPort: deadPort,
        extraArgs: ['--redis', url, '--redis-warm-timeout', '120000'],
        waitReady: true,
        core: LOAD_CORE,
        pollMs: 5,
        timeoutMs: 60_000,
      });
      const readyMs = Date.now() - ts;
      const plan: Plan = { kind: 'same', names: [urn('warm/g0/*')], expect: PER_GLOB };
      await gens.open(`warm${round}`, relay.port, 1, plan);
      const s = await gens.waitSynced(`warm${round}`, 30_000);
      const firstClientMs = Date.now() - ts;
      let cached = 0;
      for (; Date.now() - ts < 120_000; await sleep(20)) {
        cached = metricValue(await relay.metrics(), 'xdstp_relay_cache_resources') || 0;
        if (cached >= TOTAL) break;
      }
      const loadedMs = Date.now() - ts;
      r.relay = { readyMs, firstClientMs, served: s.synced === 1, loadedMs, cached, rss: relay.mem().rss };
      await gens.close(`warm${round}`);
      await relay.stop();
    }

    // Another application's keys beside the relay's: the warm start should not notice them.
    serverUs(1);
    r.warmBeforeForeignSecs = (await timedLoads(LOADS)).secs;
    r.serverUs.warmBeforeForeign = serverUs(LOADS * TOTAL);
    // The foreign target's bound on the client's side: the Redis client's own pass before and beside them.
    r.clientPassBeforeForeignSecs = median((await clientPasses(url, prefix, LOADS)).map((x) => x.secs));
    const before = Number(cli(port, 'dbsize'));
    cli(port, 'debug', 'populate', String(FOREIGN), 'foreign', '16');
    const foreign = Number(cli(port, 'dbsize')) - before;
    if (foreign !== FOREIGN) throw new Error(`DEBUG POPULATE added ${foreign} of ${FOREIGN} foreign keys`);
    // Timed once Redis has settled with them: a relay starting beside another application's keys meets
    // them in a settled keyspace, not in the rehash that inserting them all at once leaves behind.
    r.rehashMs = await rehashed(port, 60_000);
    serverUs(1);
    r.warmForeignSecs = (await timedLoads(LOADS)).secs;
    r.serverUs.warmForeign = serverUs(LOADS * TOTAL);
    r.clientPassForeignSecs = median((await clientPasses(url, prefix, LOADS)).map((x) => x.secs));
    // For context: an upgraded relay's one-time scan of a Redis without the index (it indexes it again).
    cli(port, 'del', `${prefix}i:complete`);
    r.scanForeignSecs = (await timedLoads(1)).secs;

    rounds.push(r);
    ctx.log(
      `  round ${round + 1}/${ROUNDS}: SET ${fmt(setPerSec)}/s, GET ${fmt(getPerSec)}/s (over ${n} keys: ${fmt(setSpreadPerSec)}/s, ${fmt(getSpreadPerSec)}/s); bare MSET + SADD of the same records ${fmt(r.bareWriteRate)}/s new; store.write ${fmt(r.writeRate)}/s new, ${fmt(r.updateRate)}/s updates ` +
        `(${fmt(commandsPerResource, 3)} commands/resource); warmLoad ${fmt(r.warmRate)}/s (${fmt(r.warmFaults)} page faults), ioredis's own MGET pass ${fmt(r.clientPassRate)}/s (${fmt(r.clientPassFaults)} page faults); ` +
        `beside ${fmt(FOREIGN)} foreign keys: warmLoad ${fmt(r.warmForeignSecs * 1000)} ms (${fmt(r.warmBeforeForeignSecs * 1000)} ms just before they were added; ioredis's pass ${fmt(r.clientPassForeignSecs * 1000)} ms, ${fmt(r.clientPassBeforeForeignSecs * 1000)} ms before; both once Redis had rehashed its keyspace, ${fmt(r.rehashMs)} ms after they were added), unindexed scan ${fmt(r.scanForeignSecs * 1000)} ms; ` +
        `this process's CPU µs: write ${fmt(r.clientUs.write, 2)}, warm ${fmt(r.clientUs.warm, 2)}, ioredis pass ${fmt(r.clientUs.clientPass, 2)}; redis-server CPU µs: SET ${fmt(setUs, 2)}, GET ${fmt(getUs, 2)} (over ${n} keys ${fmt(setSpreadUs, 2)}, ${fmt(getSpreadUs, 2)}), bare write ${fmt(bareWriteUs, 2)}, write ${fmt(writeUs, 2)}, update ${fmt(updateUs, 2)}, warm ${fmt(r.serverUs.warm, 2)}, ioredis pass ${fmt(r.clientPassServerUs, 2)} (warm ${fmt(r.serverUs.warmBeforeForeign, 2)} just before the foreign keys, ${fmt(r.serverUs.warmForeign, 2)} beside them); bare scan+MGET ${fmt(bare.ms)} ms` +
        (r.relay ? `; relay ready ${r.relay.readyMs} ms, first client ${r.relay.firstClientMs} ms (${r.relay.served ? 'served' : 'NOT served'}), all ${fmt(r.relay.cached)} in memory ${r.relay.loadedMs} ms` : ''),
    );
  }

  const med = (f: (r: Round) => number): number => median(rounds.map(f));
  // Ratios are taken within each round (same minute, same machine state), then the median.
  const writeRatio = med((r) => r.writeRate / r.setSpreadPerSec);
  const warmRatio = med((r) => r.warmRate / r.getSpreadPerSec);
  const foreignRatio = med((r) => r.warmForeignSecs / r.warmBeforeForeignSecs);
  // Where redis-server alone would put each ratio, were it the only bound: redis-benchmark is bound by it
  // (its rate is one operation per redis-server CPU time of one), so the ratio of their CPU per unit is the
  // highest rate ratio Redis allows the store, and the CPU beside the foreign keys ÷ before the lowest time ratio.
  const writeBound = med((r) => r.serverUs.setSpread / r.serverUs.write);
  const warmBound = med((r) => r.serverUs.getSpread / r.serverUs.warm);
  const foreignBound = med((r) => r.serverUs.warmForeign / r.serverUs.warmBeforeForeign);
  // The same bounds without the store: its new records written bare (writeBareInput) against SET, and
  // the Redis client's own pass beside the foreign keys against just before them.
  const bareWriteRatio = med((r) => r.bareWriteRate / r.setSpreadPerSec);
  const bareWriteBound = med((r) => r.serverUs.setSpread / r.serverUs.bareWrite);
  const writeOfBare = med((r) => r.writeRate / r.bareWriteRate);
  const foreignClientBound = med((r) => r.clientPassForeignSecs / r.clientPassBeforeForeignSecs);
  const bound = (x: number, how: string): string => ` (redis-server's own bound in this run: ${fmtRatio(x)}, ${how})`;
  // The client side's bound for the warm load: the client library alone, reading the same records (redis-client-pass.ts).
  const warmClientBound = med((r) => r.clientPassRate / r.getSpreadPerSec);
  const warmOfClient = med((r) => r.warmRate / r.clientPassRate);
  const relayRounds = rounds.filter((r) => r.relay !== undefined);
  const firstRatio = relayRounds.length > 0 ? median(relayRounds.map((r) => r.relay!.firstClientMs / r.bareMs)) : NaN;
  const loadedRatio = relayRounds.length > 0 ? median(relayRounds.map((r) => r.relay!.loadedMs / r.bareMs)) : NaN;
  const allServed = relayRounds.every((r) => r.relay!.served);
  const rm = (f: (x: NonNullable<Round['relay']>) => number): number => median(relayRounds.map((r) => f(r.relay!)));

  const targets: TargetCheck[] = [
    {
      target: `store.write ≥ ${WRITE_TARGET}× redis-benchmark SET -r ${TOTAL} -d 1024 -P 16`,
      value:
        fmtRatio(writeRatio) +
        bound(writeBound, 'its CPU per SET ÷ per record written') +
        ` (the same new records and member sets written bare, MSET + SADD through redis-cli --pipe: ${fmtRatio(bareWriteRatio)} of SET, redis-server's bound by the same measure ${fmtRatio(bareWriteBound)}; store.write ${fmtRatio(writeOfBare)} of the bare write)`,
      verdict: writeRatio >= WRITE_TARGET ? 'met' : 'missed',
    },
    {
      target: `warm load ≥ ${WARM_TARGET}× redis-benchmark GET -r ${TOTAL} -d 1024 -P 16`,
      value:
        fmtRatio(warmRatio) +
        bound(warmBound, 'its CPU per GET ÷ per record loaded') +
        ` (the Redis client's own bound: ioredis MGETs of the same records, replies dropped, ${fmtRatio(warmClientBound)} of GET; the warm load ${fmtRatio(warmOfClient)} of that pass)`,
      verdict: warmRatio >= WARM_TARGET ? 'met' : 'missed',
    },
    {
      target: `warm load beside ${fmt(FOREIGN)} foreign keys ≤ ${FOREIGN_TARGET}× the time without (just before they were added)`,
      value:
        fmtRatio(foreignRatio) +
        bound(foreignBound, 'its CPU per record loaded beside them ÷ before') +
        ` (the Redis client's own pass over the same records, beside them ÷ before: ${fmtRatio(foreignClientBound)})`,
      verdict: foreignRatio <= FOREIGN_TARGET ? 'met' : 'missed',
    },
  ];
  if (relayRounds.length > 0) {
    targets.push({
      target: `first client served < ${FIRST_CLIENT_TARGET}× a bare redis-cli --scan + MGET pass`,
      value: `${fmtRatio(firstRatio)}${allServed ? '' : ' (a client was NOT served)'}`,
      verdict: firstRatio < FIRST_CLIENT_TARGET && allServed ? 'met' : 'missed',
    });
  }
  return {
    id: '7',
    title: `Redis path: ${n} resources of ${ctx.payloadBytes} B`,
    figures:
      `store.write ${fmt(med((r) => r.writeRate))} resources/s into an empty Redis (the same records and member sets written bare, MSET + SADD through redis-cli --pipe: ${fmt(med((r) => r.bareWriteRate))}/s; store.write ` +
      `${fmt(med((r) => r.writeSecs), 2)} s for ${n}, ${fmt(med((r) => r.commandsPerResource), 3)} Redis commands per resource), ${fmt(med((r) => r.updateRate))} resources/s for an update of all ${n}; ` +
      `warmLoad ${fmt(med((r) => r.warmRate))} resources/s (${fmt(med((r) => r.warmSecs), 2)} s, ${fmt(med((r) => r.warmFaults))} page faults in this process); ` +
      `beside ${fmt(FOREIGN)} foreign keys warmLoad ${fmt(med((r) => r.warmForeignSecs), 2)} s (${fmt(med((r) => r.warmBeforeForeignSecs), 2)} s just before they were added; ioredis's own pass ${fmt(med((r) => r.clientPassForeignSecs), 2)} s beside them, ${fmt(med((r) => r.clientPassBeforeForeignSecs), 2)} s before; both beside them once Redis had rehashed its keyspace, driven to its end by lookups in ${fmt(med((r) => r.rehashMs))} ms after they were added; the one-time scan of an unindexed Redis ${fmt(med((r) => r.scanForeignSecs), 2)} s); ` +
      `this process's CPU per resource: store.write ${fmt(med((r) => r.clientUs.write), 2)} µs new, warmLoad ${fmt(med((r) => r.clientUs.warm), 2)} µs; ` +
      `redis-server CPU per resource: bare write ${fmt(med((r) => r.serverUs.bareWrite), 2)} µs new, store.write ${fmt(med((r) => r.serverUs.write), 2)} µs new / ${fmt(med((r) => r.serverUs.update), 2)} µs update, warmLoad ${fmt(med((r) => r.serverUs.warm), 2)} µs (${fmt(med((r) => r.serverUs.warmBeforeForeign), 2)} µs just before the foreign keys, ${fmt(med((r) => r.serverUs.warmForeign), 2)} µs beside them) ` +
      `(redis-benchmark -r ${n}: ${fmt(med((r) => r.serverUs.setSpread), 2)} µs per SET, ${fmt(med((r) => r.serverUs.getSpread), 2)} µs per GET; one key: ${fmt(med((r) => r.serverUs.set), 2)}, ${fmt(med((r) => r.serverUs.get), 2)}); ` +
      `ioredis's own MGET pass over the same records, in a process of its own, ${fmt(med((r) => r.clientPassRate))} records/s (its CPU ${fmt(med((r) => r.clientUs.clientPass), 2)} µs per record, ${fmt(med((r) => r.clientPassFaults))} page faults; redis-server ${fmt(med((r) => r.clientPassServerUs), 2)} µs per record); ` +
      `bare redis-cli --scan (COUNT ${scanCountFlag() ? 1000 : 10}) + MGET ${fmt(med((r) => r.bareMs))} ms; ` +
      (relayRounds.length > 0
        ? `relay (origin down): /readyz ${fmt(rm((x) => x.readyMs))} ms, first client holds a glob of ${PER_GLOB} at ${fmt(rm((x) => x.firstClientMs))} ms, all ${n} in memory at ${fmt(rm((x) => x.loadedMs))} ms after spawn; `
        : 'relay warm start n/a (--redis not in the CLI); ') +
      `${ROUNDS} rounds`,
    ratio:
      `over ${n} distinct keys (-r): store.write ÷ SET ${fmtRatio(writeRatio)} (update push ${fmtRatio(med((r) => r.updateRate / r.setSpreadPerSec))}; SET ${fmt(med((r) => r.setSpreadPerSec))}/s; bare write of the same new records ÷ SET ${fmtRatio(bareWriteRatio)}, store.write ÷ bare write ${fmtRatio(writeOfBare)}), ` +
      `warmLoad ÷ GET ${fmtRatio(warmRatio)} (GET ${fmt(med((r) => r.getSpreadPerSec))}/s; ioredis's own MGET pass ÷ GET ${fmtRatio(warmClientBound)}, warmLoad ÷ that pass ${fmtRatio(warmOfClient)}); ` +
      `one key: store.write ÷ SET ${fmtRatio(med((r) => r.writeRate / r.setPerSec))}, warmLoad ÷ GET ${fmtRatio(med((r) => r.warmRate / r.getPerSec))}; ` +
      `warmLoad beside foreign keys ÷ just before ${fmtRatio(foreignRatio)} (ioredis's own pass ${fmtRatio(foreignClientBound)})` +
      (relayRounds.length > 0 ? `; relay first client ÷ bare pass ${fmtRatio(firstRatio)}, all in memory ÷ bare pass ${fmtRatio(loadedRatio)}` : ''),
    targets,
    data: { total: TOTAL, foreign: FOREIGN, batch: BATCH, rounds, dbsize, redisRss, writeRatio, warmRatio, foreignRatio, writeBound, bareWriteRatio, bareWriteBound, writeOfBare, warmBound, warmClientBound, warmOfClient, foreignBound, foreignClientBound, firstRatio, loadedRatio, scanCount: scanCountFlag() ? 1000 : 10 },
  };
}
