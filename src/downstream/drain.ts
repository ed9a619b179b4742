/** Something that can be sent away (a client stream). */
export interface Drainable {
  goAway(reason: string): void;
}

export interface DrainOptions<T extends Drainable> {
  /** Spread the GOAWAYs over this many ms (0 = all at once). */
  periodMs: number;
  /** The streams open right now (a live view: new arrivals are drained too). */
  open(): Iterable<T>;
  openCount(): number;
  /** Sends one stream away (counts it, logs nothing per stream at info). */
  send(stream: T): void;
  /** Batch spacing; default period/50 within [20 ms, 1 s]. */
  tickMs?: number;
}

export type DrainState = 'draining' | 'drained' | 'cancelled';

export interface DrainResult {
  /** Streams sent away by this drain. */
  streams: number;
  batches: number;
  periodMs: number;
}

/**
 * A gradual drain: streams are sent away in small batches spread evenly over
 * the period (by the time a fraction f of it has passed, a fraction f of the
 * streams is gone), so a rolling deploy does not turn into a reconnect storm
 * against the rest of the fleet. Streams that arrive meanwhile join the tail.
 */
export class Drainer<T extends Drainable> {
  private stateValue: DrainState = 'draining';
  private readonly startedAt = Date.now();
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;
  private sent = 0;
  private batches = 0;
  private resolveDone!: (r: DrainResult) => void;
  readonly done: Promise<DrainResult>;

  constructor(private readonly opts: DrainOptions<T>) {
    this.tickMs = opts.tickMs ?? Math.min(1000, Math.max(20, Math.floor(opts.periodMs / 50)));
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    // The first batch goes out one tick in, not synchronously inside the request that asked.
    this.schedule();
  }

  get state(): DrainState {
    return this.stateValue;
  }

  /** Stops sending streams away (shutdown takes over); `done` resolves with what was sent. */
  cancel(): void {
    if (this.stateValue !== 'draining') return;
    this.stateValue = 'cancelled';
    clearTimeout(this.timer);
    this.finish();
  }

  private schedule(): void {
    const remaining = this.startedAt + this.opts.periodMs - Date.now();
    this.timer = setTimeout(() => this.tick(), Math.max(0, Math.min(this.tickMs, remaining)));
  }

  private tick(): void {
    this.timer = undefined;
    if (this.stateValue !== 'draining') return;
    const elapsed = Date.now() - this.startedAt;
    const open = this.opts.openCount();
    const fraction = this.opts.periodMs <= 0 ? 1 : Math.min(1, elapsed / this.opts.periodMs);
    const due = fraction >= 1 ? open : Math.ceil((this.sent + open) * fraction) - this.sent;
    if (due > 0) {
      this.batches++;
      // Pick first, then send: sending a stream away removes it from the live set.
      const batch: T[] = [];
      for (const s of this.opts.open()) {
        if (batch.length >= due) break;
        batch.push(s);
      }
      for (const s of batch) this.opts.send(s);
      this.sent += batch.length;
    }
    if (fraction >= 1) {
      this.stateValue = 'drained';
      this.finish();
    } else {
      this.schedule();
    }
  }

  private finish(): void {
    this.resolveDone({ streams: this.sent, batches: this.batches, periodMs: this.opts.periodMs });
  }
}
