/**
 * Fair turns for clients' request work.
 *
 * Node runs one callback at a time: a client whose request takes 100 ms to
 * apply (ten thousand names) would hold every other client's updates for
 * that long. Streams with work that is large, or that arrives while earlier
 * work of theirs is still waiting, queue here instead; each turn of the event
 * loop gives every waiting stream one slice, round-robin, until a time budget
 * is spent, then yields so upstream updates and other clients' small requests
 * go through between turns. A stream never has two slices running at once,
 * and its own requests keep their order.
 */

/** A stream's queued work: `runSlice` does a bounded piece and says whether more remains. */
export interface ScheduledWork {
  runSlice(): boolean;
}

/** Default time one turn may spend before it yields (ms). */
export const TURN_BUDGET_MS = 8;

export class RequestScheduler {
  private queue: ScheduledWork[] = [];
  private head = 0;
  private scheduled = false;

  constructor(
    private readonly budgetMs = TURN_BUDGET_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Streams waiting for a turn. */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  /** Queues `work` for a slice in a coming turn (the caller queues each piece of work once). */
  enqueue(work: ScheduledWork): void {
    this.queue.push(work);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.turn());
  }

  /** One turn: a slice for each waiting stream in order, until the budget is spent. */
  turn(): void {
    this.scheduled = false;
    const deadline = this.now() + this.budgetMs;
    // Work re-queued during this turn waits for the next one.
    let left = this.waiting;
    while (left-- > 0) {
      const work = this.queue[this.head++];
      if (work.runSlice()) this.queue.push(work);
      if (this.now() >= deadline) break;
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (this.waiting > 0) this.schedule();
  }
}
