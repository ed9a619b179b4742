/**
 * Finds the reference model (test/model/model.ts). It is written alongside the
 * checker; until it exists the checker runs with only the checks that need no
 * model (older versions, Envoy-style rejects, streams ending).
 */
import type { ModelOptions, ReferenceModel } from '../types';

export type ModelFactory = (opts: ModelOptions) => ReferenceModel;

function isModel(x: unknown): x is ReferenceModel {
  return typeof x === 'object' && x !== null && typeof (x as { apply?: unknown }).apply === 'function' &&
    typeof (x as { expected?: unknown }).expected === 'function';
}

export function defaultModelFactory(): ModelFactory | null {
  let mod: Record<string, unknown>;
  try {
    // Loaded at run time: the model module may not exist yet.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require('../model') as Record<string, unknown>;
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND' && /[/\\]model['"]?/.test((err as Error).message)) return null;
    throw err;
  }
  const factory = mod.createModel;
  if (typeof factory === 'function') return (o) => (factory as ModelFactory)(o);
  for (const value of Object.values(mod)) {
    if (typeof value !== 'function' || !value.prototype || typeof value.prototype.apply !== 'function') continue;
    const Ctor = value as new (o: ModelOptions) => unknown;
    return (o) => {
      const m = new Ctor(o);
      if (!isModel(m)) throw new Error('test/model/model.ts: the exported class is not a ReferenceModel');
      return m;
    };
  }
  throw new Error('test/model/model.ts exports neither createModel(options) nor a ReferenceModel class');
}
