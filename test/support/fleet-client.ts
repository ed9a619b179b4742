/**
 * A delta-ADS client that behaves like Envoy behind a balancer: when its
 * stream ends it reconnects (new connection, so the balancer places it again)
 * after a short jittered backoff and resumes with initial_resource_versions
 * of everything it holds. It records across reconnects what a user of the
 * client would notice: what it holds, every removal it was sent, and when
 * each stream ended.
 */
import { EventEmitter } from 'node:events';
import { DeltaClient } from './delta-client';
import { waitUntil } from './wait';

export interface StreamEnd {
  at: number;
  code: number;
  details: string;
}

export class FleetClient {
  readonly events = new EventEmitter();
  /** Streams that ended, in order (each one is a move to another relay). */
  readonly ends: StreamEnd[] = [];
  /** Every name sent in removed_resources, over all streams. */
  readonly removed: string[] = [];
  /** Protocol violations seen on any stream. */
  readonly violations: string[] = [];
  /** Every version received per name, over all streams, in order. */
  readonly history = new Map<string, string[]>();
  private client: DeltaClient | undefined;
  private carried = new Map<string, string>();
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private streams = 0;

  constructor(
    readonly target: string,
    readonly nodeId: string,
    readonly typeUrl: string,
    readonly names: string[],
    private readonly backoffMs = 100,
  ) {
    this.events.setMaxListeners(0);
  }

  start(): void {
    this.connect();
  }

  /** Streams opened so far (1 + reconnects). */
  get connections(): number {
    return this.streams;
  }

  get connected(): boolean {
    return this.client !== undefined && this.client.status === undefined;
  }

  /** name → version this client holds now. */
  held(): Map<string, string> {
    return this.client ? this.client.held(this.typeUrl) : new Map(this.carried);
  }

  private connect(): void {
    if (this.closed) return;
    this.streams++;
    const c = new DeltaClient(this.target, { nodeId: this.nodeId });
    this.client = c;
    const initial = Object.fromEntries(this.carried);
    c.subscribe(this.typeUrl, this.names, Object.keys(initial).length > 0 ? { initialVersions: initial } : {});
    let seenRemovals = 0;
    let seenResponses = 0;
    c.events.on('change', () => {
      for (; seenRemovals < c.removed.length; seenRemovals++) this.removed.push(c.removed[seenRemovals]!.name);
      for (; seenResponses < c.responses.length; seenResponses++) {
        for (const r of c.responses[seenResponses]!.resources ?? []) {
          const h = this.history.get(r.name ?? '');
          if (h) h.push(r.version ?? '');
          else this.history.set(r.name ?? '', [r.version ?? '']);
        }
      }
      if (c.status !== undefined && this.client === c) this.onEnd(c);
      this.events.emit('change');
    });
  }

  private onEnd(c: DeltaClient): void {
    this.ends.push({ at: Date.now(), code: c.status!.code, details: c.status!.details });
    this.violations.push(...c.violations);
    this.carried = c.held(this.typeUrl);
    this.client = undefined;
    c.close();
    if (this.closed) return;
    // Envoy-like: reconnect after a short jittered backoff.
    this.timer = setTimeout(() => this.connect(), this.backoffMs / 2 + Math.random() * this.backoffMs);
  }

  waitFor<T>(predicate: () => T | undefined | false | null, what: string, timeoutMs: number): Promise<T> {
    return waitUntil(this.events, predicate, { timeoutMs, what: `[${this.nodeId}] ${what}` });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.client) this.violations.push(...this.client.violations);
    this.client?.close();
    this.client = undefined;
  }
}
