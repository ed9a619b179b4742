/**
 * Token buckets: `burst` tokens at most, refilled at `ratePerSecond`. Used
 * for per-connection HTTP/2 control-frame budgets and for the subscription
 * changes a stream may make per second.
 */
/** The default clock: one function for every bucket (a bucket per connection). */
const monotonicMs = (): number => performance.now();

/**
 * The rule of a token bucket, applied to a level its owner keeps as one
 * number: a bucket per stream then costs a field, not an object. The level
 * is the time (monotonic ms) at which the bucket is full again; with no
 * refill (rate 0), the tokens taken so far. A level of 0 is a full bucket.
 */
export class TokenBudget {
  /**
   * @param ratePerSecond refill rate (0 = never refills)
   * @param burst capacity, and the tokens a new bucket starts with
   */
  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
  ) {
    if (!(ratePerSecond >= 0) || !(burst >= 0)) throw new RangeError('token bucket rate and burst must be non-negative');
  }

  /** The level after taking `n` tokens at `now`; NaN (nothing taken) when there are fewer. */
  take(level: number, n: number, now: number): number {
    if (this.ratePerSecond === 0) return level + n <= this.burst ? level + n : NaN;
    const start = Math.max(level, now);
    if (n > this.burst - ((start - now) * this.ratePerSecond) / 1000) return NaN;
    return start + (n * 1000) / this.ratePerSecond;
  }

  /** Tokens available at `now` (fractional). */
  available(level: number, now: number): number {
    if (this.ratePerSecond === 0) return this.burst - level;
    return this.burst - (Math.max(0, level - now) * this.ratePerSecond) / 1000;
  }
}

/** A token bucket that keeps its own level and clock. */
export class TokenBucket {
  private readonly budget: TokenBudget;
  private level = 0;

  /**
   * @param ratePerSecond refill rate (0 = never refills)
   * @param burst capacity, and the tokens a new bucket starts with
   * @param now monotonic clock in ms (injectable for tests)
   */
  constructor(
    ratePerSecond: number,
    burst: number,
    private readonly now: () => number = monotonicMs,
  ) {
    this.budget = new TokenBudget(ratePerSecond, burst);
  }

  /** Takes `n` tokens if there are that many; false (and nothing taken) otherwise. */
  take(n = 1): boolean {
    const next = this.budget.take(this.level, n, this.now());
    if (Number.isNaN(next)) return false;
    this.level = next;
    return true;
  }

  /** Tokens available now (fractional). */
  available(): number {
    return this.budget.available(this.level, this.now());
  }
}
