/** What every soak scenario gets from the runner (test/soak/run.ts), and what it reports back. */
import { Cleanup } from '../../bench/lib/context';

export type Verdict = 'pass' | 'fail' | 'warn';

export interface Check {
  scenario: string;
  what: string;
  /** The figures the verdict is based on, as printed. */
  figures: string;
  verdict: Verdict;
}

export class SoakContext {
  readonly checks: Check[] = [];
  private readonly cleanup = new Cleanup();

  constructor(
    /** Small sizes (the CI mode): every scenario in seconds, the same checks. */
    readonly smoke: boolean,
    readonly scenario: string,
    private readonly out: (line: string) => void,
  ) {}

  log(msg: string): void {
    this.out(`  ${msg}`);
  }

  /** Registers a cleanup (stop a process, close clients); run in reverse order when the scenario ends. */
  defer(fn: () => Promise<unknown> | unknown): void {
    this.cleanup.add(fn);
  }

  async runCleanups(): Promise<void> {
    await this.cleanup.run();
  }

  /**
   * Records and prints one verdict. `warnOnly` checks print ❌ figures as a
   * warning (⚠️) without failing the run: a target another change is to meet.
   */
  check(what: string, ok: boolean, figures: string, opts: { warnOnly?: boolean } = {}): boolean {
    const verdict: Verdict = ok ? 'pass' : opts.warnOnly ? 'warn' : 'fail';
    this.checks.push({ scenario: this.scenario, what, figures, verdict });
    const mark = verdict === 'pass' ? '✅' : verdict === 'warn' ? '⚠️ ' : '❌';
    this.out(`  ${mark} ${what}: ${figures}`);
    return ok;
  }
}
