/**
 * Resource names and per-client subscription plans. The coordinator, the load
 * generators and the ceiling server all import this, so "client i subscribes
 * to X" is computed identically everywhere without shipping name lists over IPC.
 */
import { prng } from './stats';

export const AUTHORITY = 'bench';
export const RESOURCE_TYPE = 'envoy.config.cluster.v3.Cluster';
export const TYPE_URL = `type.googleapis.com/${RESOURCE_TYPE}`;

/** `xdstp://bench/envoy.config.cluster.v3.Cluster/<path>[?<ctx>]` (canonical when ctx is sorted). */
export function urn(path: string, ctx = ''): string {
  return `xdstp://${AUTHORITY}/${RESOURCE_TYPE}/${path}${ctx ? `?${ctx}` : ''}`;
}

export const fanGlob = (tag: string): string => urn(`fan${tag}/*`);
export const fanMember = (tag: string, j: number): string => urn(`fan${tag}/m${j}`);
export const poolName = (i: number): string => urn(`pool/r${i}`);
export const syncGlob = (): string => urn('sync/*');
export const syncMember = (j: number): string => urn(`sync/m${j}`);
export const churnName = (i: number): string => urn(`churn/r${i}`);

// ------------------------------------------------------------------ dedup pool

/** Every 10th entry of the dedup pool is a glob of DEDUP_GLOB_MEMBERS members. */
export const DEDUP_GLOB_MEMBERS = 3;

export function dedupIsGlob(idx: number): boolean {
  return idx % 10 === 9;
}

function dedupCtx(idx: number, swapped: boolean): string {
  const a = `a=${idx % 7}`;
  const b = `b=z${idx % 5}`;
  return swapped ? `${b}&${a}` : `${a}&${b}`;
}

/** A spelling of dedup pool entry `idx`; `swapped` puts the context parameters out of canonical order. */
export function dedupSpelling(idx: number, swapped: boolean): string {
  return dedupIsGlob(idx) ? urn(`dg${idx}/*`, dedupCtx(idx, swapped)) : urn(`d/r${idx}`, dedupCtx(idx, swapped));
}

/** Canonical names of the resources behind dedup pool entry `idx`. */
export function dedupResources(idx: number): string[] {
  if (!dedupIsGlob(idx)) return [dedupSpelling(idx, false)];
  const out: string[] = [];
  for (let j = 0; j < DEDUP_GLOB_MEMBERS; j++) out.push(urn(`dg${idx}/m${j}`, dedupCtx(idx, false)));
  return out;
}

// ------------------------------------------------------------------- plans

export type Plan =
  /** Every client subscribes to the same names. */
  | { kind: 'same'; names: string[]; expect: number }
  /** Client i: pool names (i·perClient + k) mod size, k < perClient, plus `extra`. */
  | { kind: 'pool'; size: number; perClient: number; extra: string[]; extraResources: number }
  /** Client i: `perClient` distinct churn names drawn uniformly (seeded by i). */
  | { kind: 'churn'; size: number; perClient: number; seed: number }
  /** Client i: `perClient` distinct dedup pool entries drawn Zipf(s) over `size`, spelled either way. */
  | { kind: 'zipf'; size: number; perClient: number; s: number; seed: number };

/** `n` distinct indexes below `size`, drawn uniformly. */
export function distinctUniform(size: number, n: number, rand: () => number): number[] {
  const picked = new Set<number>();
  while (picked.size < Math.min(n, size)) picked.add(Math.floor(rand() * size));
  return [...picked];
}

const zipfCdfs = new Map<string, Float64Array>();

function zipfCdf(size: number, s: number): Float64Array {
  const key = `${size}/${s}`;
  let cdf = zipfCdfs.get(key);
  if (!cdf) {
    cdf = new Float64Array(size);
    let total = 0;
    for (let k = 0; k < size; k++) total += 1 / Math.pow(k + 1, s);
    let acc = 0;
    for (let k = 0; k < size; k++) {
      acc += 1 / Math.pow(k + 1, s) / total;
      cdf[k] = acc;
    }
    zipfCdfs.set(key, cdf);
  }
  return cdf;
}

function zipfDraw(cdf: Float64Array, u: number): number {
  let lo = 0;
  let hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cdf[mid]! < u) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The dedup pool entries client i picks, with the spelling it uses for each. */
export function zipfPicks(plan: Extract<Plan, { kind: 'zipf' }>, i: number): Array<{ idx: number; swapped: boolean }> {
  const rand = prng(plan.seed * 1_000_003 + i);
  const cdf = zipfCdf(plan.size, plan.s);
  const seen = new Set<number>();
  const out: Array<{ idx: number; swapped: boolean }> = [];
  for (let attempts = 0; out.length < plan.perClient && attempts < plan.perClient * 50; attempts++) {
    const idx = zipfDraw(cdf, rand());
    if (seen.has(idx)) continue;
    seen.add(idx);
    out.push({ idx, swapped: rand() < 0.5 });
  }
  return out;
}

export function churnPicks(plan: Extract<Plan, { kind: 'churn' }>, i: number): number[] {
  return distinctUniform(plan.size, plan.perClient, prng(plan.seed * 7919 + i));
}

/**
 * The `k` distinct names one churn tick changes: drawn uniformly over `size`
 * resources, except a `hotShare` of the draws, which come from `hot`. The
 * churn scenario's origin and its baseline draw with it, so one seed gives
 * both the same changes.
 */
export function drawChurnChanges(rand: () => number, k: number, size: number, hot: readonly string[], hotShare: number): string[] {
  const names = new Set<string>();
  while (names.size < k) names.add(rand() < hotShare && hot.length > 0 ? hot[Math.floor(rand() * hot.length)]! : churnName(Math.floor(rand() * size)));
  return [...names];
}

/** What client i subscribes to. */
export function namesFor(plan: Plan, i: number): string[] {
  switch (plan.kind) {
    case 'same':
      return plan.names;
    case 'pool': {
      const out: string[] = [];
      for (let k = 0; k < plan.perClient; k++) out.push(poolName((i * plan.perClient + k) % plan.size));
      return out.concat(plan.extra);
    }
    case 'churn':
      return churnPicks(plan, i).map(churnName);
    case 'zipf':
      return zipfPicks(plan, i).map((p) => dedupSpelling(p.idx, p.swapped));
  }
}

/** How many resources client i holds once synced. */
export function expectedResources(plan: Plan, i: number): number {
  switch (plan.kind) {
    case 'same':
      return plan.expect;
    case 'pool':
      return Math.min(plan.perClient, plan.size) + plan.extraResources;
    case 'churn':
      return Math.min(plan.perClient, plan.size);
    case 'zipf':
      return zipfPicks(plan, i).reduce((n, p) => n + (dedupIsGlob(p.idx) ? DEDUP_GLOB_MEMBERS : 1), 0);
  }
}

/**
 * A version string carrying the time the change was decided (CLOCK_MONOTONIC
 * µs, shared by every process on the box) and optionally a round number, so a
 * load generator measures latency from the bytes alone: `@@T<µs>;r<round>;`.
 */
export function stampedVersion(t0Us: number, round?: number): string {
  return round === undefined ? `@@T${t0Us};` : `@@T${t0Us};r${round};`;
}
