/**
 * A token bucket: `burst` tokens at most, refilled at `ratePerSecond`. Used
 * for per-connection HTTP/2 control-frame budgets and for the
 * subscription changes a stream may make per second.
 */
/** The default clock: one function for every bucket (a bucket per stream and per connection). */
const monotonicMs = (): number => performance.now();

export class TokenBucket {
  private tokens: number;
  private last: number;

  /**
   * @param ratePerSecond refill rate (0 = never refills)
   * @param burst capacity, and the tokens a new bucket starts with
   * @param now monotonic clock in ms (injectable for tests)
   */
  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
    private readonly now: () => number = monotonicMs,
  ) {
    if (!(ratePerSecond >= 0) || !(burst >= 0)) throw new RangeError('token bucket rate and burst must be non-negative');
    this.tokens = burst;
    this.last = now();
  }

  private refill(): void {
    const t = this.now();
    if (t > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.ratePerSecond) / 1000);
    }
    this.last = t;
  }

  /** Takes `n` tokens if there are that many; false (and nothing taken) otherwise. */
  take(n = 1): boolean {
    this.refill();
    if (n > this.tokens) return false;
    this.tokens -= n;
    return true;
  }

  /** Tokens available now (fractional). */
  available(): number {
    this.refill();
    return this.tokens;
  }
}
