/**
 * Warm start from the shared tier (docs/fleet.md, "Redis").
 *
 * Before any upstream stream opens, every resource stored in Redis under the
 * relay's prefix is put into the in-process cache (L1), so that
 *  - clients are answered at once, even while the control plane is unreachable;
 *  - the first upstream request per type carries `initial_resource_versions`
 *    for whatever clients subscribed meanwhile, and the upstream's answer
 *    reconciles them (updates and removals fan out to the clients).
 *
 * Bounded in time and best effort: what was loaded is valid; what was not is
 * read through on demand. Known-absent markers are not loaded (they are read
 * through on a miss).
 *
 * Collections are admitted whole or not at all: a client subscribing to a
 * glob while the load runs must not be answered from memory with the part of
 * it that happened to be scanned so far (it would never get the rest until
 * the upstream returns). So singletons go into memory as they are read, glob
 * members only once the whole store has been read, one collection at a time;
 * a client asking for a glob meanwhile misses memory and is read through from
 * Redis, whole. If the budget runs out first, the members read are dropped.
 *
 * Warm entries that no subscription claims are kept fresh by nobody. Once every
 * upstream has been connected, they are dropped from memory (they stay in
 * Redis; a later miss reads them through). Until then the engine treats such data
 * with care (see SubscriptionEngine.keepsHeld and ResourceStore.evictUnclaimed).
 */
import type { SharedStore, StoredResource } from './types';

/** A shared store that can stream its whole content (RedisStore). */
export interface WarmSource {
  warmLoad(opts?: { count?: number; waitMs?: number }): AsyncGenerator<StoredResource[], void, undefined>;
}

export function canWarmLoad(store: SharedStore | undefined): store is SharedStore & WarmSource {
  return store !== undefined && typeof (store as Partial<WarmSource>).warmLoad === 'function';
}

export interface WarmStartResult {
  /** Resources put into memory. */
  loaded: number;
  /** Resources read but not admitted (memory already knew the key, or undecodable). */
  skipped: number;
  /** False when the time budget ran out before the store was read to the end. */
  complete: boolean;
  /** Glob members read but not admitted, because the load did not complete in time. */
  dropped: number;
  ms: number;
}

/** Glob members admitted per turn of the event loop, so clients are served between collections. */
const ADMIT_SLICE = 2000;

const TIMED_OUT = Symbol('timed out');

function within<T>(p: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(TIMED_OUT), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * Streams the store into memory through `admit` (which returns whether it took
 * the resource) for at most `budgetMs`; never throws. Waits at most
 * min(budgetMs, 2000) ms for Redis to become reachable.
 */
export async function warmStart(source: WarmSource, admit: (r: StoredResource) => boolean, budgetMs: number): Promise<WarmStartResult> {
  const t0 = Date.now();
  const result: WarmStartResult = { loaded: 0, skipped: 0, complete: false, dropped: 0, ms: 0 };
  if (budgetMs <= 0) return result;
  const deadline = t0 + budgetMs;
  const take = (r: StoredResource): void => {
    if (admit(r)) result.loaded++;
    else result.skipped++;
  };
  /** Glob members by collection, admitted once the store has been read to the end. */
  const collections = new Map<string, StoredResource[]>();
  let held = 0;
  const pages = source.warmLoad({ waitMs: Math.min(budgetMs, 2000) });
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const step = await within(pages.next(), left);
      if (step === TIMED_OUT) break;
      if (step.done) {
        result.complete = true;
        break;
      }
      for (const r of step.value) {
        if (r.glob === undefined) {
          take(r);
          continue;
        }
        const members = collections.get(r.glob);
        if (members) members.push(r);
        else collections.set(r.glob, [r]);
        held++;
      }
    }
  } catch {
    // warmLoad never throws by contract; a surprise only ends the warm start early.
  } finally {
    // Out of time: stop the scan once its current page settles (that page is dropped).
    if (!result.complete) void pages.return(undefined).catch(() => undefined);
  }
  if (result.complete) {
    let slice = 0;
    for (const [glob, members] of collections) {
      if (slice >= ADMIT_SLICE) {
        slice = 0;
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (Date.now() > deadline) break;
      }
      for (const r of members) take(r);
      slice += members.length;
      held -= members.length;
      collections.delete(glob);
    }
  }
  result.dropped = held;
  result.ms = Date.now() - t0;
  return result;
}

/**
 * Calls `then` once every upstream has been connected at least once (checked
 * every `intervalMs`). Returns a cancel function.
 */
export function whenAllConnected(upstreams: Iterable<{ readonly connected: boolean }>, then: () => void, intervalMs = 100): () => void {
  const pending = new Set(upstreams);
  const check = (): boolean => {
    for (const u of pending) if (u.connected) pending.delete(u);
    return pending.size === 0;
  };
  if (check()) {
    then();
    return () => undefined;
  }
  const timer = setInterval(() => {
    if (!check()) return;
    clearInterval(timer);
    then();
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
