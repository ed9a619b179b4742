/** Request/response over a child process's IPC channel: `{id, body}` → `{id, ok, result | error}`. */
import type { ChildProcess } from 'node:child_process';

interface Reply {
  id: number;
  ok: boolean;
  error?: string;
  result?: unknown;
}

export class RpcChild {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private exited = false;
  /** Resolves with the child's hello (the message with id 0). */
  readonly hello: Promise<unknown>;

  constructor(
    readonly label: string,
    readonly child: ChildProcess,
  ) {
    let helloResolve!: (v: unknown) => void;
    let helloReject!: (e: Error) => void;
    this.hello = new Promise((res, rej) => {
      helloResolve = res;
      helloReject = rej;
    });
    child.on('message', (raw: unknown) => {
      const m = raw as Reply;
      if (m.id === 0) {
        helloResolve(m.result);
        return;
      }
      const w = this.waiting.get(m.id);
      if (!w) return;
      this.waiting.delete(m.id);
      if (m.ok) w.resolve(m.result);
      else w.reject(new Error(`${label}: ${m.error ?? 'failed'}`));
    });
    child.on('exit', (code, signal) => {
      this.exited = true;
      const err = new Error(`${label} exited (${code ?? signal})`);
      helloReject(err);
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get alive(): boolean {
    return !this.exited;
  }

  call<T>(body: object, timeoutMs = 600_000): Promise<T> {
    if (this.exited) return Promise.reject(new Error(`${this.label} is not running`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${this.label}: no reply to ${JSON.stringify(body).slice(0, 80)} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.send({ id, body });
    });
  }

  /** Asks the child to exit, then kills it (by pid) if it does not. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.call({ cmd: 'exit' }, graceMs).catch(() => undefined);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }
}
