import * as fs from 'node:fs';

/**
 * Re-reads a set of files every `intervalMs` and calls `onChange` with their
 * contents whenever any of them differs from the last call. Polling the
 * contents (not fs.watch) is deliberate: Kubernetes updates mounted Secrets
 * and ConfigMaps by swapping a symlinked directory, which inotify watches on
 * the file miss, and a few small reads every second or two cost nothing.
 *
 * A file that cannot be read is reported through `onError` once per distinct
 * error message, and the previous contents stay in force.
 */
export class FilePoller {
  private timer: NodeJS.Timeout | undefined;
  private last: Buffer[];
  private lastError: string | undefined;

  constructor(
    private readonly files: readonly string[],
    initial: readonly Buffer[],
    private readonly onChange: (contents: Buffer[]) => void,
    private readonly onError: (err: Error) => void,
    intervalMs: number,
  ) {
    this.last = [...initial];
    this.timer = setInterval(() => this.poll(), intervalMs);
    this.timer.unref();
  }

  /** Reads the files now; calls onChange if they changed. */
  poll(): void {
    let now: Buffer[];
    try {
      now = this.files.map((f) => fs.readFileSync(f));
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastError) {
        this.lastError = message;
        this.onError(err as Error);
      }
      return;
    }
    this.lastError = undefined;
    if (now.every((b, i) => this.last[i]?.equals(b))) return;
    this.last = now;
    this.onChange(now);
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
