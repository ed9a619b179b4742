/**
 * Heap diagnostics for leak hunting (the soak suite's stream-churn scenario),
 * off unless the relay is started with the hidden `--debug-heap` flag. They
 * sit under /debug/, so the admin token (or loopback-only) guards them like
 * the other debug endpoints.
 *
 *  - POST /debug/gc: a full, compacting GC (node must run with --expose-gc),
 *    then the heap figures, so "heap after GC" is measured inside the process
 *    rather than guessed from RSS outside it; `?live=1` adds the bytes of
 *    live data objects (code excluded) counted from a heap snapshot.
 *  - POST /debug/heap-snapshot: writes a .heapsnapshot into the temp
 *    directory (or ?dir=) and answers its path; comparing two of them shows
 *    which objects a workload leaves behind.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import type { AdminServer } from './server';

/** The `gc` function --expose-gc installs; absent otherwise. */
function exposedGc(): (() => void) | undefined {
  const g = (globalThis as { gc?: unknown }).gc;
  return typeof g === 'function' ? (g as () => void) : undefined;
}

export interface HeapFigures {
  usedHeapBytes: number;
  totalHeapBytes: number;
  externalBytes: number;
  rssBytes: number;
  /** Used bytes per V8 heap space (old_space, new_space, large_object_space, …). */
  spaces: Record<string, number>;
  /** With `?live=1`: bytes of live data objects counted from a heap snapshot (liveHeapBytes). */
  liveBytes?: number;
}

/**
 * Bytes of the data objects alive in a heap snapshot (it is taken after a
 * full GC): code (bytecode, feedback, compiled code) and external buffers
 * excluded. Steadier than the used-heap figure, which moves by a few hundred
 * KB between identical idle states as V8 flushes and recompiles the bytecode
 * of functions not run lately; a leak of what streams leave behind is data.
 * Only for diagnostics: the snapshot of a heap of N MB costs a second or so
 * and several times N in transient memory.
 */
export async function liveHeapBytes(): Promise<number> {
  const chunks: string[] = [];
  for await (const chunk of v8.getHeapSnapshot()) chunks.push(typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8'));
  const snap = JSON.parse(chunks.join('')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const sizeAt = fields.indexOf('self_size');
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!];
    if (type !== 'native' && type !== 'synthetic' && type !== 'code') total += snap.nodes[i + sizeAt]!;
  }
  return total;
}

export function heapFigures(): HeapFigures {
  const h = v8.getHeapStatistics();
  const spaces: Record<string, number> = {};
  for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name] = s.space_used_size;
  const mem = process.memoryUsage();
  return { usedHeapBytes: h.used_heap_size, totalHeapBytes: h.total_heap_size, externalBytes: mem.external, rssBytes: mem.rss, spaces };
}

/** Adds POST /debug/gc and POST /debug/heap-snapshot to `admin`. */
export function registerHeapDebugRoutes(admin: AdminServer): AdminServer {
  return admin
    .route('POST /debug/gc', async (_req, url) => {
      const gc = exposedGc();
      if (!gc) return { status: 409, body: { error: 'no gc(): start node with --expose-gc' } };
      // Several passes: objects freed by one pass (weak callbacks, finalizers) can release more in the next.
      for (let i = 0; i < 3; i++) gc();
      const figures = heapFigures();
      if (url.searchParams.get('live') === '1') figures.liveBytes = await liveHeapBytes();
      return { status: 200, body: figures };
    })
    .route('POST /debug/heap-snapshot', (_req, url) => {
      const dir = url.searchParams.get('dir') ?? os.tmpdir();
      const file = path.join(dir, `xdstp-relay-${process.pid}-${Date.now()}.heapsnapshot`);
      return { status: 200, body: { file: v8.writeHeapSnapshot(file) } };
    });
}
