/**
 * Which situations of the promise a run has reached: a random run that never
 * held a glob member under two names, never kept a NACKed version or never
 * shared an upstream key between clients has not tested those rules, however
 * long it ran. The checker observes the model at each quiet point; the report
 * counts the quiet points at which each situation held.
 */
import { isGlob, keyOf, matchesGlob } from '../support/names';
import { classify, type Model } from './model';
import type { Authority, ModelOptions } from './types';

export const SITUATIONS = [
  'a delta client holds one singleton under two spellings',
  'a delta client holds a glob member under its spelling and its canonical name',
  'a glob with members is held',
  'a subscribed glob is empty',
  'a subscribed name does not exist',
  'a subscription is refused',
  'the legacy wildcard holds resources',
  'the legacy wildcard continues next to named resources',
  'an explicit * is subscribed',
  'a NACK decides what a client holds',
  'a SotW client holds a full-state type',
  'a SotW client holds a per-name type',
  'two clients share an upstream key',
] as const;

export type Situation = (typeof SITUATIONS)[number];

export class RuleCoverage {
  private readonly counts = new Map<Situation, number>(SITUATIONS.map((s) => [s, 0]));
  private quietPoints = 0;

  constructor(private readonly opts: ModelOptions) {}

  /** Counts the situations that hold in the model now (call it at a quiet point). */
  observe(model: Model): void {
    this.quietPoints++;
    for (const s of this.situations(model)) this.counts.set(s, (this.counts.get(s) ?? 0) + 1);
  }

  /** Situations no observed quiet point reached. */
  missed(): Situation[] {
    return SITUATIONS.filter((s) => this.counts.get(s) === 0);
  }

  report(): string {
    const lines = SITUATIONS.map((s) => `  ${String(this.counts.get(s)).padStart(5)}  ${s}`);
    return `situations reached (quiet points out of ${this.quietPoints}):\n${lines.join('\n')}`;
  }

  /** The situations that hold in `model` now. */
  situations(model: Model): Set<Situation> {
    const found = new Set<Situation>();
    const keyUsers = new Map<string, Set<string>>();
    for (const client of model.clients()) {
      const sotw = model.protocolOf(client) === 'sotw';
      for (const typeUrl of model.typesOf(client)) {
        const { names, legacyWildcard } = model.subscriptions(client, typeUrl);
        const expected = model.expected(client, typeUrl);
        if (sotw && expected.size > 0) {
          found.add(this.opts.fullStateTypes.has(typeUrl) ? 'a SotW client holds a full-state type' : 'a SotW client holds a per-name type');
        }
        if (model.nackedNames(client, typeUrl).length > 0) found.add('a NACK decides what a client holds');
        if (legacyWildcard) {
          if (this.holdsLegacy(expected)) found.add('the legacy wildcard holds resources');
          if (names.some((n) => n !== '*')) found.add('the legacy wildcard continues next to named resources');
        }
        if (names.includes('*')) found.add('an explicit * is subscribed');
        if (!sotw) {
          const byKey = new Map<string, number>();
          for (const name of expected.keys()) byKey.set(keyOf(name), (byKey.get(keyOf(name)) ?? 0) + 1);
          for (const [key, n] of byKey) {
            if (n < 2) continue;
            const viaGlob = names.some((s) => isGlob(s) && matchesGlob(key, s));
            found.add(viaGlob ? 'a delta client holds a glob member under its spelling and its canonical name' : 'a delta client holds one singleton under two spellings');
          }
        }
        for (const s of names) {
          const sub = classify(this.opts, typeUrl, s);
          if (sub.kind === 'refused') found.add('a subscription is refused');
          else if (sub.kind === 'glob') {
            const members = [...expected.keys()].filter((n) => matchesGlob(n, sub.key));
            found.add(members.length > 0 ? 'a glob with members is held' : 'a subscribed glob is empty');
          } else if (sub.kind === 'singleton' || sub.kind === 'legacy') {
            const held = sotw ? expected.has(sub.key) : expected.has(s);
            if (!held && model.nackedNames(client, typeUrl).length === 0) found.add('a subscribed name does not exist');
          }
          if (sub.kind !== 'refused') {
            const key = `${typeUrl}\n${sub.kind === 'wildcard' ? '*' : sub.key}`;
            let users = keyUsers.get(key);
            if (!users) keyUsers.set(key, (users = new Set()));
            users.add(client);
          }
        }
      }
    }
    const upstream = new Set<string>();
    for (const a of [null, ...this.opts.authorities] as Authority[]) for (const k of model.upstreamKeys(a)) upstream.add(k);
    for (const [key, users] of keyUsers) if (users.size > 1 && upstream.has(key)) found.add('two clients share an upstream key');
    return found;
  }

  private holdsLegacy(expected: Map<string, string>): boolean {
    return [...expected.keys()].some((n) => !n.startsWith('xdstp:'));
  }
}
