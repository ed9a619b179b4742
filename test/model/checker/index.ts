/** The model checker: generate seeded runs, replay them against the real relay, shrink what fails. */
export { runSteps, type ModelFactory, type RunOptions, type RunResult, type Divergence } from './driver';
export { generate, type GenerateOptions } from './generator';
export { shrink, type ShrinkResult } from './shrink';
export { formatRun, type RunEntry } from './steps';
