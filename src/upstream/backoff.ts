/** Exponential backoff with jitter, so a fleet of relays doesn't reconnect in lockstep. */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly baseMs = 250,
    private readonly maxMs = 30_000,
    private readonly jitter = 0.2,
  ) {}

  next(): number {
    const raw = Math.min(this.maxMs, this.baseMs * 2 ** this.attempt);
    this.attempt++;
    const spread = raw * this.jitter;
    return Math.max(0, Math.round(raw - spread + Math.random() * 2 * spread));
  }

  reset(): void {
    this.attempt = 0;
  }
}
