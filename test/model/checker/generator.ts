/**
 * Seeded random runs. The generator keeps a rough picture of the world (who
 * is connected, what exists, which control planes run) only to produce steps
 * that make sense; the driver re-checks every step against the real state, so
 * a shrunk run with steps left out still replays.
 */
import { Rand } from '../../support/prng';
import type { Authority, Step } from '../types';
import type { RunEntry } from './steps';
import { CLUSTER, TYPES, choicesOf, slotsOf, type ResourceSlot } from './universe';

export interface GenerateOptions {
  steps: number;
  redis: boolean;
  unsubscribeGraceMs: number;
}

const CLIENT_IDS = ['c1', 'c2', 'c3', 'c4'];

interface GenClient {
  protocol: 'delta' | 'sotw';
  subs: Map<string, string[]>;
  stalled: boolean;
}

class Gen {
  private readonly r: Rand;
  private readonly clients = new Map<string, GenClient>();
  private readonly existing = new Set<string>();
  private readonly stopped = new Set<string>();
  private version = 0;
  private readonly out: RunEntry[] = [];
  /** Control planes stopped by a cpStop, with the step count at which to start them again. */
  private readonly restartAt = new Map<string, number>();

  constructor(
    seed: number,
    private readonly opts: GenerateOptions,
  ) {
    this.r = new Rand(seed);
  }

  run(): RunEntry[] {
    // Most resources exist from the start, so that subscriptions meet existing names,
    // and two or three clients (often of both protocols) are there to share keys.
    for (const t of TYPES) for (const s of slotsOf(t)) if (this.r.chance(0.6)) this.push(this.putSlot(s));
    const first = this.r.chance(0.5) ? 'sotw' : 'delta';
    this.push(this.connect('c1', first));
    this.push(this.connect('c2', first === 'sotw' ? 'delta' : this.r.chance(0.3) ? 'sotw' : 'delta'));
    if (this.r.chance(0.5)) this.push(this.connect('c3'));
    // The setup does not count: `steps` is what happens afterwards.
    const setup = this.count();
    while (this.count() - setup < this.opts.steps) {
      for (const [a, at] of this.restartAt) {
        if (this.count() >= at) {
          this.restartAt.delete(a);
          this.stopped.delete(a);
          this.push({ op: 'cpStart', authority: a === '' ? null : a });
        }
      }
      this.push(this.next());
    }
    for (const a of [...this.restartAt.keys()]) this.push({ op: 'cpStart', authority: a === '' ? null : a });
    return this.out;
  }

  /** Types weighted towards the two with globs and the legacy wildcard. */
  private pickType(): string {
    const x = this.r.next();
    return x < 0.4 ? TYPES[0] : x < 0.8 ? TYPES[1] : TYPES[2];
  }

  private count(): number {
    return this.out.reduce((n, e) => n + (Array.isArray(e) ? e.length : 1), 0);
  }

  private push(e: RunEntry): void {
    this.out.push(e);
  }

  private open(): string[] {
    return [...this.clients.keys()];
  }

  private next(): RunEntry {
    const r = this.r;
    const open = this.open();
    if (open.length === 0 || (open.length < 3 && r.chance(0.12))) {
      const free = CLIENT_IDS.filter((c) => !this.clients.has(c));
      if (free.length > 0) return this.connect(r.pick(free));
    }
    const x = r.next();
    if (x < 0.33) return this.request(r.pick(open));
    if (x < 0.47) return this.put();
    if (x < 0.55) return this.del() ?? this.put();
    if (x < 0.61) return this.reconnect(r.pick(open));
    if (x < 0.67) return this.burst();
    if (x < 0.71) return this.cpRestart();
    if (x < 0.73) return this.cpStop() ?? this.put();
    if (x < 0.755) return { op: 'failover', authority: 'a1' };
    if (x < 0.79) {
      // The NACK needs a response to act on: a change of the type comes right after.
      const typeUrl = this.pickType();
      return [{ op: 'nackNext', client: r.pick(open), typeUrl }, this.putSlot(r.pick(slotsOf(typeUrl)))];
    }
    if (x < 0.83) return this.stallOrResume(r.pick(open)) ?? this.request(r.pick(open));
    if (x < 0.85) return this.disconnect(r.pick(open));
    if (x < 0.89 && this.opts.unsubscribeGraceMs > 0) {
      return { op: 'wait', ms: this.opts.unsubscribeGraceMs + 100 + r.int(300) };
    }
    if (this.opts.redis && x < 0.95) {
      const y = r.next();
      if (y < 0.4) return { op: 'relayRestart', upstreamDownFirst: r.chance(0.5) };
      if (y < 0.8) return { op: 'moveClient', client: r.pick(open) };
      return { op: 'redisRestartEmpty' };
    }
    return this.request(r.pick(open));
  }

  private connect(client: string, p?: 'delta' | 'sotw'): Step {
    const protocol = p ?? (this.r.chance(0.35) ? 'sotw' : 'delta');
    this.clients.set(client, { protocol, subs: new Map(), stalled: false });
    return { op: 'connect', client, protocol };
  }

  private disconnect(client: string): Step {
    this.clients.delete(client);
    return { op: 'disconnect', client };
  }

  private reconnect(client: string): Step {
    const c = this.clients.get(client)!;
    c.stalled = false;
    return { op: 'reconnect', client, omitGlobMembers: this.r.chance(0.7) };
  }

  private stallOrResume(client: string): Step | undefined {
    const c = this.clients.get(client)!;
    if (c.protocol !== 'delta') return undefined;
    c.stalled = !c.stalled;
    return { op: c.stalled ? 'stall' : 'resume', client };
  }

  /** A name to subscribe to, of the kinds the relay must treat differently. */
  private pickName(typeUrl: string): string[] {
    const r = this.r;
    const c = choicesOf(typeUrl);
    const x = r.next();
    if (x < 0.05) {
      // One name under two spellings.
      const spellings = r.pick(c.singletons);
      if (spellings.length > 1) return [spellings[0]!, spellings[1 + r.int(spellings.length - 1)]!];
    }
    if (x < 0.35) return [r.pick(r.pick(c.singletons))];
    if (x < 0.55 && c.globs.length > 0) return [r.pick(r.pick(c.globs))];
    if (x < 0.65 && c.globs.length > 0) {
      // A glob member named next to its glob.
      const glob = r.pick(c.globs[0]!);
      return r.chance(0.5) ? [glob, r.pick(c.singletons[2]!)] : [r.pick(c.singletons[2]!), glob];
    }
    if (x < 0.8 && c.legacy.length > 0) return [r.pick(c.legacy)];
    if (x < 0.88 && c.wildcard) return ['*'];
    if (x < 0.92) return [r.pick(c.missing)];
    return [r.pick(c.refused)];
  }

  private request(client: string): Step {
    const r = this.r;
    const c = this.clients.get(client)!;
    const typeUrl = this.pickType();
    const current = c.subs.get(typeUrl);
    const first = current === undefined;
    if (first && typeUrl === CLUSTER && r.chance(0.4)) {
      c.subs.set(typeUrl, ['*']);
      return { op: 'request', client, typeUrl, subscribe: [], unsubscribe: [] };
    }
    const list = [...(current ?? [])];
    const unsubscribe: string[] = [];
    const subscribe: string[] = [];
    const wantUnsub = list.length > 0 && r.chance(0.35);
    if (wantUnsub) unsubscribe.push(r.pick(list));
    if (!wantUnsub || r.chance(0.4)) {
      for (const n of this.pickName(typeUrl)) if (!unsubscribe.includes(n) && !subscribe.includes(n)) subscribe.push(n);
    }
    const next = list.filter((n) => !unsubscribe.includes(n));
    for (const n of subscribe) if (!next.includes(n)) next.push(n);
    c.subs.set(typeUrl, next);
    return { op: 'request', client, typeUrl, subscribe, unsubscribe };
  }

  private burst(): RunEntry {
    const r = this.r;
    const open = this.open();
    if (r.chance(0.3)) {
      // A reconnect while the relay is itself re-subscribing after a control-plane restart.
      const a = r.pick(['a1', 'a2', null] as Authority[]);
      return [{ op: 'cpRestart', authority: a, times: 1, gapMs: 200 }, this.reconnect(r.pick(open))];
    }
    const n = 2 + r.int(3);
    const out: Step[] = [];
    for (let i = 0; i < n; i++) out.push(this.request(r.pick(open)));
    return out;
  }

  private cpRestart(): Step {
    const r = this.r;
    return { op: 'cpRestart', authority: r.pick(['a1', 'a2', null] as Authority[]), times: 1 + r.int(3), gapMs: 200 + r.int(1301) };
  }

  private cpStop(): Step | undefined {
    const a = this.r.pick(['a1', 'a2', ''] as string[]);
    if (this.stopped.has(a)) return undefined;
    this.stopped.add(a);
    this.restartAt.set(a, this.count() + 1 + this.r.int(4));
    return { op: 'cpStop', authority: a === '' ? null : a };
  }

  private slotKey(s: ResourceSlot): string {
    return `${s.typeUrl}\n${s.name}`;
  }

  private put(): Step {
    return this.putSlot(this.r.pick(slotsOf(this.pickType())));
  }

  private putSlot(s: ResourceSlot): Step {
    this.existing.add(this.slotKey(s));
    return { op: 'put', authority: s.authority, typeUrl: s.typeUrl, name: s.name, version: String(++this.version) };
  }

  private del(): Step | undefined {
    const all = TYPES.flatMap((t) => slotsOf(t)).filter((s) => this.existing.has(this.slotKey(s)));
    if (all.length === 0) return undefined;
    const s = this.r.pick(all);
    this.existing.delete(this.slotKey(s));
    return { op: 'delete', authority: s.authority, typeUrl: s.typeUrl, name: s.name };
  }
}

/** A run of about `steps` steps for `seed` (the same seed and options always give the same run). */
export function generate(seed: number, opts: GenerateOptions): RunEntry[] {
  return new Gen(seed, opts).run();
}
