/**
 * runSteps: replay a run against the real relay and the reference model side
 * by side. Each step goes to the model first (so the per-response checks know
 * it may already be in effect), then to the real world; after every entry
 * that is not inside a burst comes a quiet point: every open client's view
 * must reach what the model expects, and the control planes must be asked for
 * what the model says the relay subscribes upstream.
 */
import { authorityOf, isXdstp, keyOf } from '../../support/names';
import { sleep } from '../../support/wait';
import type { Authority, ModelOptions, ReferenceModel, Step } from '../types';

export type ModelFactory = (opts: ModelOptions) => ReferenceModel;
import { ClientHandle, type ResponseEvent } from './clients';
import { Invariants, type Failure } from './invariants';
import { Model } from '../model';
import type { RuleCoverage } from '../coverage';
import { describeStep, stepsOf, type RunEntry } from './steps';
import { AUTHORITIES, FULL_STATE_TYPES, TYPES, modelOptions, shortType } from './universe';
import { World } from './world';

export interface RunOptions {
  /** The relay's unsubscribeGraceMs (default 0). */
  unsubscribeGraceMs?: number;
  /** Run with a real redis-server and two relays on it. */
  redis?: boolean;
  /** The reference model; default: test/model/model.ts (null: only the checks that need no model). */
  model?: ModelFactory | null;
  /** Kinds of failure not to stop at (e.g. a known relay bug that would hide everything else). */
  ignore?: ReadonlyArray<Failure['kind']>;
  /** Counts, at every quiet point, which situations of the promise the run reached. */
  coverage?: RuleCoverage;
  /** Quiet-point bound in ms (default 4000; after control-plane or relay faults 10000). */
  quietMs?: number;
  /** Progress lines (step by step). */
  log?: (line: string) => void;
}

export interface Divergence extends Failure {
  /** Index of the run entry at or after which it was seen. */
  entry: number;
  /** Index of that entry among the executed ones (RunResult.executed). */
  executedEntry: number;
  step: Step | undefined;
}

export interface RunResult {
  ok: boolean;
  divergence?: Divergence;
  /** Entries executed (all of them when ok). */
  entries: number;
  /** Steps skipped because they made no sense at that point (e.g. after shrinking). */
  skipped: number;
  /** The entries run, without the skipped steps (up to the divergence). */
  executed: RunEntry[];
  ms: number;
}

const FAULT_OPS = new Set(['cpStop', 'cpStart', 'cpRestart', 'failover', 'relayRestart', 'moveClient', 'redisRestartEmpty']);

class Driver {
  private world!: World;
  private readonly model: ReferenceModel | null;
  private readonly inv: Invariants;
  private readonly clients = new Map<string, ClientHandle>();
  private readonly grace: number;
  private skipped = 0;
  /** Entries since the last control-plane or relay fault (the relay may be in backoff). */
  private sinceFault = 99;
  /** The last quiet point came right after a wait longer than the grace. */
  private pastGrace = true;
  private current: Step | undefined;
  /** Responses received by all clients so far (a quiet point needs a moment without any). */
  private responsesSeen = 0;
  /** The last comparison dropped names clients no longer ask for. */
  private hidden = false;
  /**
   * Authorities the relay could not ask since the last quiet point (every
   * server down for a while): what changed there meanwhile it cannot know, so
   * its last word stands — like convergence, removals are not judged there.
   */
  private readonly awaySinceQuiet = new Set<Authority>();

  constructor(private readonly opts: RunOptions) {
    const factory = opts.model === undefined ? (o: ModelOptions) => new Model(o) : opts.model;
    this.model = factory ? factory(modelOptions()) : null;
    this.inv = new Invariants(this.model, new Set(opts.ignore ?? []), (name) => this.awaySinceQuiet.has(authorityOfName(name)));
    this.grace = opts.unsubscribeGraceMs ?? 0;
  }

  async run(run: readonly RunEntry[]): Promise<RunResult> {
    const t0 = Date.now();
    let entry = 0;
    let divergence: Divergence | undefined;
    const executed: RunEntry[] = [];
    this.world = await World.start({ unsubscribeGraceMs: this.grace, redis: this.opts.redis ?? false });
    try {
      this.inv.reset();
      for (; entry < run.length; entry++) {
        const steps = stepsOf(run[entry]!);
        const ran: Step[] = [];
        let fault = false;
        let waitedPastGrace = false;
        for (const step of steps) {
          if (!this.valid(step)) {
            this.skipped++;
            this.opts.log?.(`  #${entry} skip ${describeStep(step)}`);
            continue;
          }
          this.current = step;
          ran.push(step);
          this.opts.log?.(`  #${entry} ${describeStep(step)}`);
          if (FAULT_OPS.has(step.op)) fault = true;
          if (step.op === 'wait' && step.ms > this.grace) waitedPastGrace = true;
          this.model?.apply(step);
          this.inv.afterStep();
          if (step.op === 'cpStop' || step.op === 'cpRestart' || step.op === 'failover') this.awaySinceQuiet.add(step.authority);
          if (step.op === 'relayRestart' && step.upstreamDownFirst) for (const a of [...AUTHORITIES, null] as Authority[]) this.awaySinceQuiet.add(a);
          await this.execute(step);
          if (this.inv.failure) break;
        }
        if (ran.length > 0) executed.push(Array.isArray(run[entry]) && ran.length > 1 ? ran : ran[0]!);
        this.sinceFault = fault ? 0 : this.sinceFault + 1;
        this.pastGrace = this.grace === 0 || waitedPastGrace;
        if (!this.inv.failure) await this.quiet();
        if (this.inv.failure) {
          divergence = { ...this.inv.failure, entry, executedEntry: executed.length - 1, step: this.current };
          this.dump();
          break;
        }
        if (this.opts.coverage && this.model instanceof Model) this.opts.coverage.observe(this.model);
        this.inv.reset(new Set([...this.clients.values()].filter((c) => c.stalled).map((c) => c.id)));
        this.awaySinceQuiet.clear();
        for (const a of [...AUTHORITIES, null] as Authority[]) if (!this.world.anyRunning(a)) this.awaySinceQuiet.add(a);
      }
    } catch (err) {
      divergence = { kind: 'error', message: (err as Error).stack ?? String(err), entry, executedEntry: executed.length, step: this.current };
    } finally {
      for (const c of this.clients.values()) c.endStream();
      await this.world.stop();
    }
    return {
      ok: divergence === undefined,
      ...(divergence ? { divergence } : {}),
      entries: entry,
      skipped: this.skipped,
      executed,
      ms: Date.now() - t0,
    };
  }

  /** With a log: what every control plane was asked and what every client got, to read a divergence by. */
  private dump(): void {
    const log = this.opts.log;
    if (!log) return;
    for (const s of this.world.allServers()) log(`  ${s.describe().replace(/\n/g, '\n  ')}`);
    for (const c of this.clients.values()) log(`  ${c.describe().replace(/\n/g, '\n  ')}`);
  }

  // ----------------------------------------------------------------- steps

  /** Whether a step makes sense now (a shrunk run may have lost what it needed). */
  private valid(step: Step): boolean {
    const w = this.world;
    const redis = this.opts.redis ?? false;
    switch (step.op) {
      case 'connect':
        return !this.clients.has(step.client);
      case 'request': {
        const c = this.clients.get(step.client);
        if (!c) return false;
        if (step.subscribe.length === 0 && step.unsubscribe.length === 0) {
          // Only an empty first Cluster/Listener request means something (the legacy wildcard).
          return c.isFirstRequest(step.typeUrl) && modelOptions().legacyWildcardTypes.has(step.typeUrl);
        }
        return true;
      }
      case 'nackNext':
      case 'reconnect':
      case 'disconnect':
        return this.clients.has(step.client);
      case 'stall': {
        const c = this.clients.get(step.client);
        return c !== undefined && c.protocol === 'delta' && !c.stalled;
      }
      case 'resume':
        return this.clients.get(step.client)?.stalled === true;
      case 'put':
        return true;
      case 'delete':
        return w.exists(step.authority, step.typeUrl, step.name);
      case 'cpStop':
        return w.anyRunning(step.authority);
      case 'cpStart':
        return !w.allRunning(step.authority);
      case 'cpRestart':
        return w.anyRunning(step.authority);
      case 'failover':
        return w.serversOf(step.authority).length > 1 && w.anyRunning(step.authority);
      case 'relayRestart':
      case 'redisRestartEmpty':
        return redis;
      case 'moveClient':
        return redis && this.clients.has(step.client);
      case 'wait':
        return true;
    }
  }

  private async execute(step: Step): Promise<void> {
    const w = this.world;
    switch (step.op) {
      case 'connect': {
        this.inv.setProtocol(step.client, step.protocol);
        const c = new ClientHandle(step.client, step.protocol, (i) => w.address(i), {
          onResponse: (ev) => this.onResponse(ev),
          onUnexpectedEnd: (client, why) => this.inv.fail({ kind: 'stream-ended', message: `[${client}] ${why}` }),
        });
        this.clients.set(step.client, c);
        return;
      }
      case 'request':
        this.clients.get(step.client)!.request(step.typeUrl, step.subscribe, step.unsubscribe);
        return;
      case 'nackNext':
        this.clients.get(step.client)!.armNack(step.typeUrl);
        return;
      case 'stall':
        this.clients.get(step.client)!.stall();
        return;
      case 'resume':
        this.clients.get(step.client)!.resume();
        return;
      case 'reconnect':
        this.clients.get(step.client)!.reconnect(step.omitGlobMembers);
        return;
      case 'disconnect':
        this.clients.get(step.client)!.endStream();
        this.clients.delete(step.client);
        return;
      case 'put':
        w.put(step.authority, step.typeUrl, step.name, step.version);
        return;
      case 'delete':
        w.delete(step.authority, step.typeUrl, step.name);
        return;
      case 'cpStop':
        await w.cpStop(step.authority);
        return;
      case 'cpStart':
        await w.cpStart(step.authority);
        return;
      case 'cpRestart':
        await w.cpRestart(step.authority, step.times, step.gapMs);
        return;
      case 'failover':
        await w.failover(step.authority);
        return;
      case 'relayRestart':
        await this.relayRestart(step.upstreamDownFirst);
        return;
      case 'moveClient': {
        const c = this.clients.get(step.client)!;
        c.relayIndex = 1 - c.relayIndex;
        c.reconnect(true);
        return;
      }
      case 'redisRestartEmpty':
        await w.redisRestartEmpty();
        return;
      case 'wait':
        await sleep(step.ms);
        return;
    }
  }

  /** Relay 0 restarts on the shared Redis; its clients reconnect the way Envoy does. */
  private async relayRestart(upstreamDownFirst: boolean): Promise<void> {
    const w = this.world;
    const onIt = [...this.clients.values()].filter((c) => c.relayIndex === 0);
    for (const c of onIt) c.expectEnd();
    await w.stopRelay(0);
    const down: Array<Authority> = [];
    if (upstreamDownFirst) {
      for (const a of [...AUTHORITIES, null]) {
        if (w.anyRunning(a)) {
          down.push(a);
          await w.cpStop(a);
        }
      }
    }
    await w.startRelay(0);
    for (const c of onIt) c.reconnect(true);
    if (upstreamDownFirst) {
      // The warm start serves from Redis first; the control planes come back after.
      await sleep(300);
      for (const a of down) await w.cpStart(a);
    }
  }

  private onResponse(ev: ResponseEvent): void {
    this.responsesSeen++;
    this.inv.onResponse(ev);
    const c = this.clients.get(ev.client);
    if (c) {
      const v = c.envoyViolations();
      if (v.length > 0) {
        const dup = v.every((x) => /duplicate resource/.test(x));
        this.inv.fail({ kind: dup ? 'duplicate' : 'envoy-reject', message: `[${ev.client}] ${v.join('; ')}` });
      }
    }
    if (ev.nacked && this.model) {
      // What the client keeps instead of what it rejected (see Model.noteNack).
      const canon = ev.protocol === 'sotw';
      const k = (n: string): string => (canon ? keyOf(n) : n);
      const fullState = canon && FULL_STATE_TYPES.has(ev.typeUrl);
      for (const r of ev.resources) {
        const kept = ev.heldBefore.get(k(r.name));
        if (fullState && kept === r.version) continue;
        this.model.noteNack(ev.client, ev.typeUrl, r.name, r.version, kept);
      }
      for (const n of ev.removed) this.model.noteNack(ev.client, ev.typeUrl, n, '', ev.heldBefore.get(k(n)));
      this.inv.afterStep();
    }
  }

  // ------------------------------------------------------------ quiet point

  /**
   * A client's view against the model. Names no subscription covers any more
   * are dropped first (Envoy forgets what it unsubscribes by itself; a SotW
   * client drops what it stops asking for). SotW names are compared
   * canonically, and on per-name types a name may linger.
   */
  private diffView(m: ReferenceModel, id: string, c: ClientHandle, t: string): string | undefined {
    const canon = c.protocol === 'sotw';
    const expected = normalize(m.expected(id, t), canon);
    // A client forgets what it stops asking for (the relay need not confirm it).
    const all = c.view(t);
    const view = new Map([...all].filter(([name]) => m.covers(id, t, name)));
    if (view.size !== all.size) this.hidden = true;
    const linger = canon && !FULL_STATE_TYPES.has(t);
    // While all servers of an authority are down the relay cannot learn what changed there.
    const unreachable = (name: string): boolean => !this.world.anyRunning(authorityOfName(name));
    return diffMaps(expected, normalize(view, canon), (name) => linger && m.mayLinger(id, t, name), unreachable);
  }

  private async quiet(): Promise<void> {
    const bound = this.opts.quietMs ?? (this.sinceFault < 3 ? 10_000 : 4000);
    const deadline = Date.now() + bound;
    // First the relay has applied every request sent so far: a quiet point is
    // never declared while one is still on its way (its answers, or the
    // updates it stops, would land after the point).
    await Promise.all([...this.clients.values()].map((c) => c.barrier()));
    let problems: string[] = [];
    for (;;) {
      if (this.inv.failure) return;
      this.hidden = false;
      const seen = this.responsesSeen;
      problems = this.mismatches();
      if (problems.length === 0 && !this.hidden) return;
      if (problems.length === 0) {
        // The views match only because clients dropped names they stopped
        // asking for: the barrier above saw the answers to their requests; a
        // short settle covers an update the upstream sent meanwhile.
        await sleep(20);
        if (this.responsesSeen === seen && this.mismatches().length === 0) return;
        if (Date.now() > deadline) return;
        continue;
      }
      if (Date.now() > deadline) break;
      await sleep(50);
    }
    const kind = problems.every((p) => p.startsWith('upstream')) ? 'upstream' : 'converge';
    this.inv.fail({ kind, message: `no quiet state within ${bound} ms:\n    ${problems.join('\n    ')}` });
  }

  private mismatches(): string[] {
    const m = this.model;
    if (!m) return [];
    const out: string[] = [];
    for (const id of m.clients()) {
      const c = this.clients.get(id);
      if (!c) {
        out.push(`[${id}] the model has a client the checker does not`);
        continue;
      }
      // A stalled client cannot converge until it reads again.
      if (c.stalled) continue;
      for (const t of m.typesOf(id)) {
        const diff = this.diffView(m, id, c, t);
        if (diff) out.push(`[${id} ${c.protocol} ${shortType(t)}] ${diff}`);
      }
    }
    if (out.length > 0) return out;
    for (const a of [...AUTHORITIES, null] as Authority[]) {
      // A control plane that is down (or was just brought back) cannot be asked what it was asked.
      if (!this.world.allRunning(a) && a !== 'a1') continue;
      if (!this.world.anyRunning(a)) continue;
      const expected = m.upstreamKeys(a);
      const actual = new Set<string>();
      for (const s of this.world.serversOf(a)) {
        for (const t of TYPES) for (const k of s.subscribedKeys(t)) actual.add(`${t}\n${k}`);
      }
      const missing = [...expected].filter((k) => !actual.has(k));
      const extra = this.pastGrace ? [...actual].filter((k) => !expected.has(k)) : [];
      if (missing.length || extra.length) {
        const fmt = (ks: string[]): string => ks.map((k) => k.replace(/^.*\.(\w+)\n/, '$1 ')).join(', ');
        out.push(`upstream ${a ?? '(default)'}: ${missing.length ? `not subscribed: ${fmt(missing)}` : ''}${missing.length && extra.length ? '; ' : ''}${extra.length ? `subscribed but should not be: ${fmt(extra)}` : ''}`);
        if (this.opts.log) for (const s of this.world.serversOf(a)) out.push(`upstream ${s.describe().split('\n').slice(-12).join('\n      ')}`);
      }
    }
    return out;
  }
}

function normalize(m: Map<string, string>, canon: boolean): Map<string, string> {
  if (!canon) return m;
  const out = new Map<string, string>();
  for (const [k, v] of m) out.set(keyOf(k), v);
  return out;
}

/** The upstream a name lives on (legacy names: the default upstream). */
function authorityOfName(name: string): Authority {
  if (!isXdstp(name)) return null;
  try {
    return authorityOf(name);
  } catch {
    return null;
  }
}

function diffMaps(
  expected: Map<string, string>,
  actual: Map<string, string>,
  mayStay: (name: string) => boolean,
  unreachable: (name: string) => boolean,
): string | undefined {
  const parts: string[] = [];
  for (const [k, v] of expected) {
    if (unreachable(k)) continue;
    const a = actual.get(k);
    if (a === undefined) parts.push(`missing ${k}@${v}`);
    else if (a !== v) parts.push(`${k}@${a} (expected @${v})`);
  }
  for (const [k, v] of actual) if (!expected.has(k) && !mayStay(k) && !unreachable(k)) parts.push(`unexpected ${k}@${v}`);
  return parts.length ? parts.join(', ') : undefined;
}

/** Replay `run` (Steps and bursts) against a fresh relay and the reference model. */
export function runSteps(run: readonly RunEntry[], options: RunOptions = {}): Promise<RunResult> {
  return new Driver(options).run(run);
}
