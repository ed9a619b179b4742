/**
 * Shrinking a failing run: replay it with chunks of entries left out (halves,
 * quarters, … single entries, then single steps inside bursts) and keep each
 * shorter run that still fails the same way. Bounded in replays and time,
 * since every replay drives a real relay.
 */
import { runSteps, type RunOptions, type RunResult } from './driver';
import { countSteps, type RunEntry } from './steps';

export interface ShrinkResult {
  run: RunEntry[];
  /** The failure of the shortest run found. */
  result: RunResult;
  replays: number;
  ms: number;
}

export interface ShrinkOptions {
  maxReplays?: number;
  maxMs?: number;
  log?: (line: string) => void;
}

export async function shrink(
  run: readonly RunEntry[],
  failed: RunResult,
  runOpts: RunOptions,
  opts: ShrinkOptions = {},
): Promise<ShrinkResult> {
  const maxReplays = opts.maxReplays ?? 40;
  const deadline = Date.now() + (opts.maxMs ?? 240_000);
  const t0 = Date.now();
  const kind = failed.divergence?.kind;
  const marks = signature(failed);
  let replays = 0;
  // Nothing after the entry where it failed can matter.
  let best: RunEntry[] = run.slice(0, (failed.divergence?.entry ?? run.length - 1) + 1);
  let bestResult = failed;
  const budget = (): boolean => replays < maxReplays && Date.now() < deadline;

  const attempt = async (candidate: RunEntry[]): Promise<boolean> => {
    if (candidate.length === 0) return false;
    replays++;
    const r = await runSteps(candidate, { ...runOpts, log: undefined });
    // The same kind of failure, about at least one of the same things (versions aside).
    const same = !r.ok && r.divergence?.kind === kind && [...signature(r)].some((x) => marks.has(x));
    opts.log?.(`  shrink replay ${replays}: ${countSteps(candidate)} steps -> ${r.ok ? 'ok' : r.divergence!.kind}${same ? ' (kept)' : ''}`);
    if (same) {
      // Steps the replay skipped (they lost what they needed) go, and so does
      // everything after the failure, which may now come earlier.
      best = r.executed.slice(0, r.divergence!.executedEntry + 1);
      if (best.length === 0) best = candidate.slice(0, r.divergence!.entry + 1);
      bestResult = r;
    }
    return same;
  };

  for (let chunk = Math.max(1, Math.floor(best.length / 2)); chunk >= 1 && budget(); chunk = Math.floor(chunk / 2)) {
    // From the end backwards: setup steps at the start are the likeliest to be needed.
    for (let start = best.length - chunk; start >= 0 && budget(); start -= chunk) {
      const candidate = [...best.slice(0, start), ...best.slice(start + chunk)];
      await attempt(candidate);
    }
    if (chunk === 1) break;
  }
  // Single steps inside bursts.
  for (let i = best.length - 1; i >= 0 && budget(); i--) {
    const e = best[i];
    if (!Array.isArray(e) || e.length < 2) continue;
    for (let j = e.length - 1; j >= 0 && budget(); j--) {
      const cur = best[i];
      if (!Array.isArray(cur) || j >= cur.length) continue;
      const smaller = cur.filter((_, k) => k !== j);
      const candidate = [...best.slice(0, i), smaller.length === 1 ? smaller[0]! : smaller, ...best.slice(i + 1)];
      await attempt(candidate);
    }
  }
  return { run: best, result: bestResult, replays, ms: Date.now() - t0 };
}

/** The lines of a failure message with versions and time bounds taken out: what it is about. */
function signature(r: RunResult): Set<string> {
  const msg = r.divergence?.message ?? '';
  const lines = msg
    .split('\n')
    .map((l) => l.trim().replace(/@\d+/g, '@').replace(/version \d+/g, 'version').replace(/holding \d+/g, 'holding').replace(/within \d+ ms/, ''))
    .filter((l) => l && !l.startsWith('upstream [') && !l.startsWith('#') && !/^no quiet state/.test(l));
  // Envoy-style rejects name a response nonce; what matters is the problem.
  return new Set(lines.map((l) => l.replace(/response \S+:/g, 'response:')));
}
