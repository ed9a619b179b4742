import { EventEmitter } from 'node:events';

export const DEFAULT_TIMEOUT_MS = 5000;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolve once `predicate()` is true, re-checking every time `emitter` emits
 * 'change'. Rejects with `what` (and the optional `explain()` text) on timeout,
 * or as soon as `abort()` returns a reason.
 */
export function waitUntil<T>(
  emitter: EventEmitter,
  predicate: () => T | undefined | false | null,
  opts: {
    timeoutMs?: number;
    what?: string;
    explain?: () => string;
    abort?: () => string | undefined;
  } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const finish = (err: Error | null, value?: T): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      emitter.off('change', check);
      if (err) reject(err);
      else resolve(value as T);
    };
    const describe = (prefix: string): Error =>
      new Error(
        `${prefix}: ${opts.what ?? 'condition'}${opts.explain ? `\n${opts.explain()}` : ''}`,
      );
    const check = (): void => {
      let value: T | undefined | false | null;
      try {
        value = predicate();
      } catch (err) {
        finish(err as Error);
        return;
      }
      if (value) {
        finish(null, value as T);
        return;
      }
      const reason = opts.abort?.();
      if (reason) finish(describe(`gave up waiting (${reason})`));
    };
    const timer = setTimeout(() => finish(describe(`timed out after ${timeoutMs} ms waiting for`)), timeoutMs);
    emitter.on('change', check);
    check();
  });
}

/** Run `fn` but give up after `ms` (used by cleanups so a stuck stop() cannot hang the suite). */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}
