/** Something that collects changes during a fan-out and sends them when it ends (a client's per-type state). */
export interface FanOutTarget {
  flush(fan: FanOut): void;
}

/**
 * Time one turn of the event loop may spend flushing a round's targets (ms);
 * the rest of the round is flushed in the turns after it.
 */
export const FLUSH_BUDGET_MS = 8;

/** Targets flushed between two looks at the clock. */
const FLUSHES_PER_CLOCK_READ = 16;

/**
 * One round of changes: every target touched while it runs is flushed once at
 * the end, so a client gets one response per round, and targets that must
 * send the same content share one encoding through `memo` (keyed by protocol,
 * then by whatever identifies the content). The engine is protocol-neutral:
 * it only opens and finishes rounds.
 *
 * A round that touched many targets (one change to ten thousand clients) is
 * flushed in slices of about FLUSH_BUDGET_MS, yielding between them, so that
 * other clients' requests and upstream updates are not held up behind it.
 * Deferring a flush changes nothing but its time: a target flushes what it has
 * pending then, and a later round that flushes it first leaves this one
 * nothing to send.
 */
export class FanOut {
  private readonly touched = new Set<FanOutTarget>();
  private memos: Map<string, Map<unknown, unknown>> | undefined;

  /** `cause`: hrtime (ns) of the upstream receipt that started the round, for the push-latency histogram. */
  constructor(readonly cause?: bigint) {}

  touch(target: FanOutTarget): void {
    this.touched.add(target);
  }

  /** The shared-encoding memo of one protocol for this round. */
  memo(protocol: string): Map<unknown, unknown> {
    this.memos ??= new Map();
    let m = this.memos.get(protocol);
    if (!m) this.memos.set(protocol, (m = new Map()));
    return m;
  }

  get size(): number {
    return this.touched.size;
  }

  /** Flushes every touched target (in slices, see above); `done` runs once the last one is flushed. */
  finish(done?: () => void): void {
    const deadline = performance.now() + FLUSH_BUDGET_MS;
    let flushed = 0;
    for (const t of this.touched) {
      // Deleting the entry being visited is safe while iterating a Set.
      this.touched.delete(t);
      t.flush(this);
      if (++flushed % FLUSHES_PER_CLOCK_READ === 0 && this.touched.size > 0 && performance.now() >= deadline) {
        setImmediate(() => this.finish(done));
        return;
      }
    }
    done?.();
  }
}
