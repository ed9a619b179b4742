/**
 * The resources a soak scenario keeps changing at the test origin, and what
 * every client should hold as a result. Stable resources are only ever
 * updated, never removed, so a client seeing one removed is always wrong;
 * ephemeral glob members come and go, and a client may see each one removed
 * at most as often as the origin removed it.
 */
import type { DeltaClient } from '../support/delta-client';
import { CLUSTER, xdstp } from '../support/names';
import type { TestOrigin } from '../support/origin';
import { Rand } from '../support/prng';
import { SotwClient } from '../support/sotw-client';

/** The authority the relay child is started with (bench/lib/servers.ts startRelay). */
export const AUTHORITY = 'bench';

export interface WorldSpec {
  /** Path prefix of every name (one world per scenario). */
  prefix: string;
  /** Glob members that are never removed. */
  stableMembers: number;
  /** Glob members added and removed over time. */
  ephemeralMembers: number;
  /** Singletons (never removed). */
  singletons: number;
  seed: number;
}

export class World {
  readonly glob: string;
  readonly stable: string[] = [];
  readonly ephemeral: string[] = [];
  readonly singletons: string[] = [];
  readonly rand: Rand;
  /** name → current version (absent = does not exist at the origin). */
  readonly versions = new Map<string, string>();
  /** name → how many times the origin removed it. */
  readonly removals = new Map<string, number>();
  /** Version → when it was published (performance.now()), for delivery latency. */
  readonly publishedAt = new Map<string, number>();
  changes = 0;
  private seq = 0;

  constructor(
    private origin: TestOrigin,
    spec: WorldSpec,
  ) {
    this.rand = new Rand(spec.seed);
    const n = (rest: string): string => xdstp(AUTHORITY, CLUSTER, `${spec.prefix}/${rest}`);
    this.glob = n('g/*');
    for (let i = 0; i < spec.stableMembers; i++) this.stable.push(n(`g/m${i}`));
    for (let i = 0; i < spec.ephemeralMembers; i++) this.ephemeral.push(n(`g/e${i}`));
    for (let i = 0; i < spec.singletons; i++) this.singletons.push(n(`s${i}`));
    for (const name of [...this.stable, ...this.singletons]) this.put(name);
    // Half of the ephemeral members exist at the start.
    this.ephemeral.forEach((name, i) => i % 2 === 0 && this.put(name));
  }

  /** Changes go to this origin from now on (a restarted relay keeps the same origin; a test may swap it). */
  useOrigin(origin: TestOrigin): void {
    this.origin = origin;
  }

  static payload(name: string, version: string): string {
    return `${name}|${version}`;
  }

  /** Creates or updates `name` with a fresh version. */
  put(name: string): string {
    const version = `v${++this.seq}`;
    this.versions.set(name, version);
    this.publishedAt.set(version, performance.now());
    this.origin.setResource(CLUSTER, name, World.payload(name, version), version);
    this.changes++;
    return version;
  }

  /** A fresh version of one stable resource (glob member or singleton). */
  updateOne(): { name: string; version: string } {
    const all = this.rand.chance(0.5) ? this.stable : this.singletons;
    const name = this.rand.pick(all.length > 0 ? all : this.stable);
    return { name, version: this.put(name) };
  }

  /** Adds an absent ephemeral member or removes a present one. */
  toggleOne(): void {
    if (this.ephemeral.length === 0) return;
    const name = this.rand.pick(this.ephemeral);
    if (this.versions.has(name)) {
      this.versions.delete(name);
      this.removals.set(name, (this.removals.get(name) ?? 0) + 1);
      this.origin.removeResource(CLUSTER, name);
      this.changes++;
    } else {
      this.put(name);
    }
  }

  /** What a client subscribed to the glob and `singletons` should hold: name → version. */
  expected(singletons: readonly string[]): Map<string, string> {
    const out = new Map<string, string>();
    for (const name of [...this.stable, ...this.ephemeral, ...singletons]) {
      const v = this.versions.get(name);
      if (v !== undefined) out.set(name, v);
    }
    return out;
  }

  /** Differences between what a delta client holds and what it should (empty = converged). */
  deltaMismatch(client: DeltaClient, singletons: readonly string[]): string[] {
    const held = client.held(CLUSTER);
    const want = this.expected(singletons);
    const out: string[] = [];
    for (const [name, v] of want) if (held.get(name) !== v) out.push(`${name}: holds ${held.get(name) ?? 'nothing'}, origin ${v}`);
    for (const name of held.keys()) if (!want.has(name)) out.push(`${name}: held, origin has none`);
    return out;
  }

  /** Removals a delta client saw of resources that still existed (stable ones, or ephemeral ones more often than removed). */
  wrongRemovals(client: DeltaClient): string[] {
    const seen = new Map<string, number>();
    const out: string[] = [];
    for (const r of client.removed) {
      if (r.typeUrl !== CLUSTER || r.name === this.glob) continue;
      const n = (seen.get(r.name) ?? 0) + 1;
      seen.set(r.name, n);
      if (n > (this.removals.get(r.name) ?? 0)) out.push(`${r.name} (removal #${n}, origin removed it ${this.removals.get(r.name) ?? 0}×)`);
    }
    return out;
  }

  /** name → version in a SotW client's last Cluster response (payloads are `name|version`). */
  static sotwHeld(client: SotwClient): Map<string, string> {
    const rs = client.of(CLUSTER);
    const last = rs[rs.length - 1];
    const out = new Map<string, string>();
    if (!last) return out;
    for (const p of SotwClient.payloads(last)) {
      const bar = p.lastIndexOf('|');
      out.set(p.slice(0, bar), p.slice(bar + 1));
    }
    return out;
  }

  /**
   * Cluster responses to a SotW client are its whole state: a name it had
   * been sent and that is missing from a later response was removed for it.
   */
  static sotwWrongRemovals(client: SotwClient): string[] {
    const had = new Set<string>();
    const out: string[] = [];
    for (const resp of client.of(CLUSTER)) {
      const names = new Set(SotwClient.payloads(resp).map((p) => p.slice(0, p.lastIndexOf('|'))));
      for (const n of had) if (!names.has(n)) out.push(`${n} missing from response ${resp.nonce ?? ''}`);
      for (const n of names) had.add(n);
    }
    return out;
  }
}
