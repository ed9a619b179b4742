/**
 * Warnings bounded by time, not by input. A client (or a flood of
 * connections) can cause a warning per request, per name or per NACK; logging
 * each at warn would let it write the relay's log for it. A WarnLimiter logs,
 * per reason, the first occurrence at warn, then at most one summary line
 * every interval with how many it held back and one of them as a sample.
 * Every occurrence is still logged at debug, and the metrics count them all.
 *
 * A stream owns one (its reasons are its own); relay-wide sources (connection
 * refusals, stream endings, CSDS refusals) share one keyed by reason.
 */
import type { Logger } from './log';

/** One summary line per reason at most this often, by default (`--log-repeat-interval`). */
export const DEFAULT_REPEAT_INTERVAL_MS = 10_000;

type Fields = Record<string, unknown>;

interface ReasonState {
  msg: string;
  /** Occurrences logged only at debug since the last warn line. */
  suppressed: number;
  /** The first of them, for the summary line. */
  sample: Fields | undefined;
  /** When the next summary may be written. */
  nextAt: number;
  timer: NodeJS.Timeout | undefined;
}

export class WarnLimiter {
  private readonly reasons = new Map<string, ReasonState>();
  private closed = false;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs: number = DEFAULT_REPEAT_INTERVAL_MS,
    /** Fields added to every summary line (e.g. the stream it is about). */
    private readonly context: Fields = {},
  ) {}

  /**
   * Logs `msg` with `fields` for `reason`: at warn the first time, then at
   * debug, with a summary at warn at most once per interval. `reason` must
   * come from a small fixed set (it keys the limiter's state).
   */
  warn(reason: string, fields: Fields, msg: string): void {
    const state = this.reasons.get(reason);
    if (state === undefined || this.closed) {
      this.logger.warn(fields, msg);
      if (!this.closed) this.reasons.set(reason, { msg, suppressed: 0, sample: undefined, nextAt: Date.now() + this.intervalMs, timer: undefined });
      return;
    }
    this.logger.debug(fields, msg);
    if (state.suppressed++ === 0) state.sample = fields;
    if (state.timer === undefined) {
      state.timer = setTimeout(() => this.summarize(reason, state), Math.max(0, state.nextAt - Date.now()));
      state.timer.unref();
    }
  }

  /** Writes the pending summaries now and stops the timers; later calls log at warn directly. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const [reason, state] of this.reasons) {
      clearTimeout(state.timer);
      this.summarize(reason, state);
    }
    this.reasons.clear();
  }

  private summarize(reason: string, state: ReasonState): void {
    state.timer = undefined;
    if (state.suppressed === 0) return;
    this.logger.warn(
      { ...this.context, key: reason, suppressed: state.suppressed, intervalMs: this.intervalMs, sample: state.sample },
      `${state.msg} (repeated; the rest at debug)`,
    );
    state.suppressed = 0;
    state.sample = undefined;
    state.nextAt = Date.now() + this.intervalMs;
  }
}
