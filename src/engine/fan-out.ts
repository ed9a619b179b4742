/** Something that collects changes during a fan-out and sends them when it ends (a client's per-type state). */
export interface FanOutTarget {
  flush(fan: FanOut): void;
}

/**
 * One round of changes: every target touched while it runs is flushed once at
 * the end, so a client gets one response per round, and targets that must
 * send the same content share one encoding through `memo` (keyed by protocol,
 * then by whatever identifies the content). The engine is protocol-neutral:
 * it only opens and finishes rounds.
 *
 * A round is flushed in one go, however many clients it touched: yielding in
 * the middle of a fan-out lets the ACKs of the clients already sent to in
 * first, and the last client waits for them (one change to 10,000 clients
 * took ~1.6 times as long, bench row 1).
 */
export class FanOut {
  /**
   * Targets to flush, in the order touched. A list, not a set: a target
   * touches a round once (see touch), and with tens of thousands of targets
   * a set's insertions were a measurable part of a fan-out.
   */
  private touched: FanOutTarget[] = [];
  private memos: Map<string, Map<unknown, unknown>> | undefined;

  /** `cause`: hrtime (ns) of the upstream receipt that started the round, for the push-latency histogram. */
  constructor(readonly cause?: bigint) {}

  /**
   * `target` has changes to send when the round ends. A target tells each
   * round once (not for each change); one flushed meanwhile and touched
   * again is flushed again.
   */
  touch(target: FanOutTarget): void {
    this.touched.push(target);
  }

  /** The shared-encoding memo of one protocol for this round. */
  memo(protocol: string): Map<unknown, unknown> {
    this.memos ??= new Map();
    let m = this.memos.get(protocol);
    if (!m) this.memos.set(protocol, (m = new Map()));
    return m;
  }

  get size(): number {
    return this.touched.length;
  }

  finish(): void {
    // Targets touched while others flush are flushed in this round too.
    const touched = this.touched;
    for (let i = 0; i < touched.length; i++) touched[i]!.flush(this);
    this.touched = [];
  }
}
