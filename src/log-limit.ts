/**
 * Warnings bounded by time, not by input. A client (or a flood of
 * connections) can cause a warning per request, per name or per NACK; logging
 * each at warn would let it write the relay's log for it. A WarnLimiter logs,
 * per reason, the first occurrence at warn, then at most one summary line
 * every interval with how many it held back and one of them as a sample.
 * Every occurrence is still logged at debug, and the metrics count them all.
 *
 * A stream owns one (its reasons are its own); relay-wide sources (connection
 * refusals, stream endings, CSDS refusals) share one keyed by reason. The
 * streams' limiters write their warn lines through one relay-wide WarnBudget,
 * so that many streams — each warning once — cannot flood the log either.
 */
import type { Logger } from './log';

/** One summary line per reason at most this often, by default (`--log-repeat-interval`). */
export const DEFAULT_REPEAT_INTERVAL_MS = 10_000;

type Fields = Record<string, unknown>;

/** Warn lines per reason and interval the relay-wide budget lets through before it summarizes. */
export const BUDGET_LINES_PER_INTERVAL = 20;

interface BudgetState {
  /** Warn lines written in the current interval. */
  written: number;
  /** Occurrences the lines held back stood for, and one of those lines. */
  heldBack: number;
  sample: Fields | undefined;
  msg: string;
  timer: NodeJS.Timeout | undefined;
}

/**
 * A relay-wide cap on the warn lines the streams' limiters write: per reason,
 * the first BUDGET_LINES_PER_INTERVAL lines of an interval go out as they
 * are (distinct clients in normal operation each keep their own line); the
 * rest are logged at debug and summed into one line at the interval's end,
 * with how many occurrences they stood for and one of them as a sample.
 */
export class WarnBudget {
  private readonly reasons = new Map<string, BudgetState>();
  private closed = false;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs: number = DEFAULT_REPEAT_INTERVAL_MS,
    private readonly linesPerInterval: number = BUDGET_LINES_PER_INTERVAL,
  ) {}

  /**
   * A warn line for `reason` standing for `occurrences` occurrences (a
   * summary stands for several). `atDebug`: the line is held back at debug
   * when over budget (false for a summary, whose occurrences are at debug already).
   * `summaryMsg`: what the reason's own summary line starts with.
   */
  write(reason: string, fields: Fields, msg: string, occurrences: number, atDebug: boolean, summaryMsg: string = msg): void {
    let state = this.reasons.get(reason);
    if (!state) {
      state = { written: 0, heldBack: 0, sample: undefined, msg: summaryMsg, timer: undefined };
      if (!this.closed) this.reasons.set(reason, state);
    }
    if (state.written < this.linesPerInterval || this.closed) {
      state.written++;
      this.logger.warn(fields, msg);
      this.armReset(reason, state);
      return;
    }
    if (atDebug) this.logger.debug(fields, msg);
    if (state.heldBack === 0) state.sample = fields;
    state.heldBack += occurrences;
  }

  /** Writes what is held back and stops the timers. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const state of this.reasons.values()) {
      clearTimeout(state.timer);
      this.endInterval(state);
    }
    this.reasons.clear();
  }

  private armReset(reason: string, state: BudgetState): void {
    if (state.timer !== undefined || this.closed) return;
    state.timer = setTimeout(() => {
      state.timer = undefined;
      this.endInterval(state);
      if (state.written === 0) this.reasons.delete(reason);
    }, this.intervalMs);
    state.timer.unref();
  }

  private endInterval(state: BudgetState): void {
    state.written = 0;
    if (state.heldBack === 0) return;
    this.logger.warn(
      { key: 'relay-wide', suppressed: state.heldBack, intervalMs: this.intervalMs, sample: state.sample },
      `${state.msg} (many streams; the rest at debug)`,
    );
    state.heldBack = 0;
    state.sample = undefined;
  }
}

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
    /** Relay-wide cap on the warn lines written (absent: none). */
    private readonly budget?: WarnBudget,
  ) {}

  /**
   * Logs `msg` with `fields` for `reason`: at warn the first time, then at
   * debug, with a summary at warn at most once per interval. `reason` must
   * come from a small fixed set (it keys the limiter's state).
   */
  warn(reason: string, fields: Fields, msg: string): void {
    const state = this.reasons.get(reason);
    if (state === undefined || this.closed) {
      this.warnLine(reason, fields, msg, 1, true);
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

  private warnLine(reason: string, fields: Fields, msg: string, occurrences: number, atDebug: boolean, summaryMsg: string = msg): void {
    if (this.budget) this.budget.write(reason, fields, msg, occurrences, atDebug, summaryMsg);
    else this.logger.warn(fields, msg);
  }

  private summarize(reason: string, state: ReasonState): void {
    state.timer = undefined;
    if (state.suppressed === 0) return;
    this.warnLine(
      reason,
      { ...this.context, key: reason, suppressed: state.suppressed, intervalMs: this.intervalMs, sample: state.sample },
      `${state.msg} (repeated; the rest at debug)`,
      state.suppressed,
      false,
      state.msg,
    );
    state.suppressed = 0;
    state.sample = undefined;
    state.nextAt = Date.now() + this.intervalMs;
  }
}
