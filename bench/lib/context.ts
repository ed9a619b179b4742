/** What every scenario gets from the runner, and what it hands back. */

export interface BenchContext {
  full: boolean;
  /** Override of the number of measured rounds (fan-out). */
  rounds: number | undefined;
  /** Profile the relay with --cpu-prof during the fan-out scenario. */
  profile: boolean;
  /** Fan-out clients ACK every response (default true, as Envoy does). */
  ack: boolean;
  /** Override of N in the fan-out and storm scenarios. */
  clients: number | undefined;
  resultsDir: string;
  runId: string;
  /** Size of each resource's opaque payload. */
  payloadBytes: number;
  log(msg: string): void;
  /** Registers a cleanup (stop a process, close a group); run in reverse order when the scenario ends. */
  defer(fn: () => Promise<unknown> | unknown): void;
}

export type Verdict = 'met' | 'missed' | 'n/a' | 'info';

export interface TargetCheck {
  target: string;
  value: string;
  verdict: Verdict;
}

export interface ScenarioResult {
  /** "0" … "7". */
  id: string;
  title: string;
  /** One line of figures for the table. */
  figures: string;
  /** Speeds as ratios to the baseline measured in the same run. */
  ratio: string;
  targets: TargetCheck[];
  /** Everything measured, for the JSON record. */
  data: Record<string, unknown>;
}

/** Runs registered cleanups in reverse, never throwing. */
export class Cleanup {
  private readonly fns: Array<() => Promise<unknown> | unknown> = [];

  add(fn: () => Promise<unknown> | unknown): void {
    this.fns.push(fn);
  }

  async run(): Promise<void> {
    while (this.fns.length > 0) {
      const fn = this.fns.pop()!;
      try {
        await fn();
      } catch {
        // best effort
      }
    }
  }
}
