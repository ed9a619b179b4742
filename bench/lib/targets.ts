/**
 * The relay's performance targets as same-run ratios (docs/performance.md,
 * "Targets"), one verdict per target. Scenarios report them with their other
 * checks; bench/run.ts prints every verdict on a line of its own at the end.
 */
import type { TargetCheck } from './context';
import { fmt } from './stats';

/** Fan-out speed (ceiling time ÷ relay time) of 10,000 delta clients, p50 and p99 (row 1). */
export const FANOUT_SPEED = 0.95;
/** Fan-out speed of 10,000 SotW clients, p50 (row 1s). */
export const SOTW_FANOUT_SPEED = 0.95;
/** Reconnect storm clients/s ÷ bare grpc-js's (row 3). */
export const STORM_SPEED = 0.95;
/** Idle RSS per client ÷ bare grpc-js's at 5k and 10k (row 4), and per stream at 50,000 (row 8). */
export const IDLE_RSS_RATIO = 1.1;
/** One GET /metrics, wall ms, at 10k idle clients (row 4) and 50,000 streams (row 8). */
export const SCRAPE_MS = 15;
/** Churn responses per CPU-second ÷ bare grpc-js's (row 6). */
export const CHURN_EFFICIENCY = 0.9;
/** Fan-out speed at 50,000 streams, p50 and p99 (row 8). */
export const SCALE_FANOUT_SPEED = 0.9;
/** Relay CPU ÷ bare grpc-js's per fan-out at 50,000 streams (row 8). */
export const SCALE_CPU_RATIO = 1.15;

/** Judged only at full size: a value the run did not measure (quick mode) is shown as not judged. */
const NOT_AT_THIS_SIZE = 'not at this size (--full)';

/** `value` ≥ `bound` (a speed: higher is better); undefined: not measured in this run. */
export function atLeast(target: string, value: number | undefined, bound: number, digits = 2): TargetCheck {
  const text = `${target} ≥ ${bound}`;
  if (value === undefined) return { target: text, value: NOT_AT_THIS_SIZE, verdict: 'n/a' };
  return { target: text, value: shown(value, bound, digits), verdict: Number.isFinite(value) && value >= bound ? 'met' : 'missed' };
}

/** `value` ≤ `bound` (a cost: lower is better); undefined: not measured in this run. */
export function atMost(target: string, value: number | undefined, bound: number, digits = 2, unit = ''): TargetCheck {
  const text = `${target} ≤ ${bound}${unit}`;
  if (value === undefined) return { target: text, value: NOT_AT_THIS_SIZE, verdict: 'n/a' };
  return { target: text, value: `${shown(value, bound, digits)}${unit}`, verdict: Number.isFinite(value) && value <= bound ? 'met' : 'missed' };
}

/**
 * `value` with `digits` decimals, or more (up to four) while it would read
 * as the bound itself: 0.9499 against 0.95 is shown as 0.9499, not as a
 * missed 0.95.
 */
function shown(value: number, bound: number, digits: number): string {
  let d = digits;
  while (d < 4 && value !== bound && Math.round(value * 10 ** d) === Math.round(bound * 10 ** d)) d++;
  return fmt(value, d);
}

/** One line per verdict: ✅ met, ❌ missed, – not judged. */
export function verdictLine(row: string, t: TargetCheck): string {
  const mark = t.verdict === 'met' ? '✅' : t.verdict === 'missed' ? '❌' : '–';
  return `${mark} ${row}: ${t.target}: ${t.value}`;
}
