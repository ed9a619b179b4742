/**
 * The checks made at every response a client receives. The relay lags the
 * steps, so a response is judged against every model state since the last
 * quiet point: a removal is wrong only if the model forbade it at the last
 * quiet point and at every step since; a resource is unwelcome only if no
 * subscription covered it at any of those moments.
 */
import { keyOf } from '../../support/names';
import type { ReferenceModel } from '../types';
import type { ResponseEvent } from './clients';
import { TYPES, candidateNames, shortType } from './universe';

export interface Failure {
  kind: 'removal' | 'unsubscribed' | 'older' | 'envoy-reject' | 'duplicate' | 'payload' | 'stream-ended' | 'converge' | 'upstream' | 'error';
  message: string;
}

interface Window {
  /** Names the model never allowed to be removed in this window. */
  mustKeep: Set<string>;
  /** Names some subscription covered at some moment of this window. */
  mayHave: Set<string>;
}

export class Invariants {
  failure: Failure | undefined;
  private readonly windows = new Map<string, Window>();
  /** Names seen in responses per type: they join the candidates the windows are computed over. */
  private readonly seen = new Map<string, Set<string>>();
  private readonly protocols = new Map<string, 'delta' | 'sotw'>();

  constructor(
    private readonly model: ReferenceModel | null,
    /** Kinds of failure not to stop at (a known relay bug that would hide everything else). */
    private readonly ignore: ReadonlySet<Failure['kind']> = new Set(),
    /** Names whose control plane the relay could not reach lately: a removal there is its last word, not judged. */
    private readonly unreachable: (name: string) => boolean = () => false,
  ) {}

  setProtocol(client: string, protocol: 'delta' | 'sotw'): void {
    this.protocols.set(client, protocol);
  }

  private candidates(typeUrl: string): string[] {
    return [...candidateNames(typeUrl), ...(this.seen.get(typeUrl) ?? [])];
  }

  /** The names `model` forbids removing / allows now, for one client and type (SotW in canonical form). */
  private snapshot(client: string, typeUrl: string): Window {
    const m = this.model!;
    const canon = this.protocols.get(client) === 'sotw';
    const mustKeep = new Set<string>();
    const mayHave = new Set<string>();
    for (const n of this.candidates(typeUrl)) {
      const k = canon ? keyOf(n) : n;
      if (!m.mayRemove(client, typeUrl, n)) mustKeep.add(k);
      if (m.covers(client, typeUrl, n)) mayHave.add(k);
    }
    return { mustKeep, mayHave };
  }

  /** A quiet point: the windows start over from the model's current state. */
  /**
   * `keep`: clients whose windows go on (a stalled client still has in its
   * buffers what the relay sent before; it is judged against those states).
   */
  reset(keep: ReadonlySet<string> = new Set()): void {
    for (const key of [...this.windows.keys()]) if (!keep.has(key.slice(0, key.indexOf('\n')))) this.windows.delete(key);
    if (!this.model) return;
    for (const c of this.model.clients()) {
      if (keep.has(c)) continue;
      for (const t of TYPES) this.windows.set(`${c}\n${t}`, this.snapshot(c, t));
    }
  }

  /** After the model applied a step: narrow what must be kept, widen what may be sent. */
  afterStep(): void {
    if (!this.model) return;
    const live = new Set<string>();
    for (const c of this.model.clients()) {
      for (const t of TYPES) {
        const key = `${c}\n${t}`;
        live.add(key);
        const now = this.snapshot(c, t);
        const w = this.windows.get(key);
        if (!w) {
          this.windows.set(key, now);
          continue;
        }
        for (const n of [...w.mustKeep]) if (!now.mustKeep.has(n)) w.mustKeep.delete(n);
        for (const n of now.mayHave) w.mayHave.add(n);
      }
    }
    for (const key of [...this.windows.keys()]) if (!live.has(key)) this.windows.delete(key);
  }

  fail(f: Failure): void {
    if (this.ignore.has(f.kind)) return;
    this.failure ??= f;
  }

  onResponse(ev: ResponseEvent): void {
    const where = `[${ev.client} ${ev.protocol} ${shortType(ev.typeUrl)}]`;
    for (const p of ev.problems) this.fail({ kind: 'payload', message: `${where} ${p}` });
    for (const n of ev.duplicates) this.fail({ kind: 'duplicate', message: `${where} one response names ${n} twice` });
    let seen = this.seen.get(ev.typeUrl);
    if (!seen) this.seen.set(ev.typeUrl, (seen = new Set()));
    const canon = ev.protocol === 'sotw';
    const k = (n: string): string => (canon ? keyOf(n) : n);
    for (const r of ev.resources) {
      const before = ev.heldBefore.get(k(r.name));
      if (before !== undefined && Number(r.version) < Number(before)) {
        this.fail({ kind: 'older', message: `${where} got ${r.name} version ${r.version} while holding ${before}` });
      }
    }
    if (!this.model) return;
    const w = this.windows.get(`${ev.client}\n${ev.typeUrl}`);
    for (const r of ev.resources) {
      seen.add(r.name);
      const allowed = (w?.mayHave.has(k(r.name)) ?? false) || this.model.covers(ev.client, ev.typeUrl, r.name);
      if (!allowed) {
        this.fail({ kind: 'unsubscribed', message: `${where} got ${r.name}@${r.version}, which none of its subscriptions covered since the last quiet point` });
      }
    }
    for (const n of ev.removed) {
      if (w?.mustKeep.has(k(n)) && !this.unreachable(n)) {
        this.fail({
          kind: 'removal',
          message: `${where} was told ${n} is gone (${ev.protocol === 'sotw' ? 'left out of a full-state response' : 'removed_resources'}) although it exists upstream and stayed subscribed since the last quiet point`,
        });
      }
    }
  }
}
