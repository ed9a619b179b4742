/** Small statistics helpers; percentiles are nearest-rank on a sorted copy. */

export function sorted(xs: readonly number[]): number[] {
  return xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
}

/** Nearest-rank percentile, p in [0, 100]; NaN for an empty sample. */
export function percentile(xs: readonly number[], p: number): number {
  const s = sorted(xs);
  if (s.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]!;
}

export function median(xs: readonly number[]): number {
  const s = sorted(xs);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function sum(xs: readonly number[]): number {
  let t = 0;
  for (const x of xs) t += x;
  return t;
}

export function max(xs: readonly number[]): number {
  let m = -Infinity;
  for (const x of xs) if (x > m) m = x;
  return m;
}

/** A number with `digits` significant-ish decimals, or 'n/a'. */
export function fmt(x: number | undefined, digits = 1): string {
  if (x === undefined || !Number.isFinite(x)) return 'n/a';
  if (Math.abs(x) >= 1000) return Math.round(x).toLocaleString('en-US');
  return x.toFixed(digits);
}

export function fmtRatio(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? 'n/a' : `${x.toFixed(2)}×`;
}

/** Deterministic PRNG (mulberry32), the same the tests use. */
export { prng } from '../../test/support/prng';
