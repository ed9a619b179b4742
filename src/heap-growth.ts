import * as v8 from 'node:v8';

/**
 * How far, in percent, the relay lets V8's old generation grow past what
 * survived the last full collection before it collects again.
 *
 * Most of the relay's heap lives long: the cache and every client's state.
 * Left to itself, V8 set the next limit only ~25 MB above the relay's ~60 MB
 * live heap after a full collection and started marking again well before
 * reaching it, so under steady configuration churn (each change retires a
 * cached version) the relay ran a full collection every 2–4 s, marking its
 * whole live heap on helper threads each time (docs/performance.md, churn).
 * With room to grow by its live size they came ~18 s apart under the same
 * churn; the price is up to that much garbage held in between, still bounded
 * by --max-old-space-size.
 */
export const HEAP_GROWING_PERCENT = 100;

const OPERATOR_SETTING = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * The V8 flag the relay sets for itself, or undefined when the operator
 * already chose one: in node's own arguments (`execArgv`) or in NODE_OPTIONS.
 */
export function heapGrowthFlag(execArgv: readonly string[], nodeOptions: string | undefined): string | undefined {
  const operator = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((arg) => OPERATOR_SETTING.test(arg));
  return operator ? undefined : `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
}

/**
 * Sets the relay's heap growth for this process unless the operator chose
 * one. V8 reads the setting whenever it sets a new limit, so setting it at
 * start-up takes effect from the next full collection. Only the CLI calls it:
 * it owns the process (an embedding application keeps its own settings).
 */
export function setHeapGrowth(): void {
  const flag = heapGrowthFlag(process.execArgv, process.env['NODE_OPTIONS']);
  if (flag !== undefined) v8.setFlagsFromString(flag);
}
