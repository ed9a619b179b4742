/**
 * A run: a list of entries, each one Step or a burst (Steps sent back to back
 * with no quiet point between them). Plain data, printable as TypeScript.
 */
import type { Step } from '../types';

export type RunEntry = Step | Step[];

export function stepsOf(entry: RunEntry): Step[] {
  return Array.isArray(entry) ? entry : [entry];
}

export function countSteps(run: readonly RunEntry[]): number {
  return run.reduce((n, e) => n + stepsOf(e).length, 0);
}

function literal(step: Step): string {
  // JSON is a valid TypeScript object literal; keys unquoted read better.
  return JSON.stringify(step).replace(/"(\w+)":/g, '$1: ');
}

/** The run as a TypeScript array literal, one entry per line, ready to paste into a regression test. */
export function formatRun(run: readonly RunEntry[]): string {
  const lines = run.map((e) => (Array.isArray(e) ? `  [${e.map(literal).join(', ')}],` : `  ${literal(e)},`));
  return `[\n${lines.join('\n')}\n]`;
}

export function describeStep(step: Step): string {
  return literal(step);
}
