/** Small helpers the soak scenarios share (HTTP to the relay's admin port, percentiles, bounded waits). */
import * as http from 'node:http';
import { metricValue, type RelayProc } from '../../bench/lib/servers';
import { sleep } from '../../bench/lib/proc';
import type { HeapFigures } from '../../src/admin/heap';
import type { DeltaClient } from '../support/delta-client';

export { sleep };
export { percentile } from '../../bench/lib/stats';

/** POST http://127.0.0.1:port/path → status and body. */
export function httpPost(port: number, path: string, timeoutMs = 60_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`POST ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** A full GC in the relay (started with --expose-gc --debug-heap), then its heap figures. */
export async function gcHeap(relay: RelayProc, live = false): Promise<HeapFigures> {
  const r = await httpPost(relay.adminPort, live ? '/debug/gc?live=1' : '/debug/gc');
  if (r.status !== 200) throw new Error(`POST /debug/gc answered ${r.status}: ${r.body}`);
  return JSON.parse(r.body) as HeapFigures;
}

/** Polls the relay's /metrics until `pred(text)` holds, at most `timeoutMs`; returns whether it held. */
export async function waitMetrics(relay: RelayProc, pred: (text: string) => boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (pred(await relay.metrics())) return true;
    } catch {
      // not answering right now
    }
    if (Date.now() > end) return false;
    await sleep(100);
  }
}

export function gauge(text: string, name: string, labels: Record<string, string> = {}): number {
  const v = metricValue(text, name, labels);
  return Number.isNaN(v) ? 0 : v;
}

export const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(2)} MB`;

/**
 * Delivery latency of published versions to delta clients: for every
 * resource a client receives, the time since `publishedAt(version)`; and
 * which versions each client got, so versions that never arrived can be counted.
 */
export class DeliveryRecorder {
  readonly samples: number[] = [];
  /** Per client: every version received. */
  readonly received = new Map<DeltaClient, Set<string>>();
  recording = true;

  constructor(private readonly publishedAt: (version: string) => number | undefined) {}

  attach(client: DeltaClient): void {
    let seen = client.responses.length;
    const got = new Set<string>();
    this.received.set(client, got);
    client.events.on('change', () => {
      const now = performance.now();
      for (; seen < client.responses.length; seen++) {
        for (const r of client.responses[seen]!.resources ?? []) {
          const v = r.version ?? '';
          if (got.has(v)) continue;
          got.add(v);
          const t0 = this.publishedAt(v);
          if (this.recording && t0 !== undefined) this.samples.push(now - t0);
        }
      }
    });
  }
}

/** Polls `pred` every 50 ms up to `timeoutMs`; throws `failure` (unless empty) on timeout, else returns whether it held. */
export async function waitFor(pred: () => boolean, timeoutMs: number, failure: string): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) {
      if (failure) throw new Error(failure);
      return false;
    }
    await sleep(50);
  }
  return true;
}
