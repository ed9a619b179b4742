/**
 * Heap diagnostics for leak hunting (the soak suite's stream-churn scenario),
 * off unless the relay is started with the hidden `--debug-heap` flag. They
 * sit under /debug/, so the admin token (or loopback-only) guards them like
 * the other debug endpoints.
 *
 *  - POST /debug/gc: a full, compacting GC (node must run with --expose-gc),
 *    then the heap figures, so "heap after GC" is measured inside the process
 *    rather than guessed from RSS outside it.
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
    .route('POST /debug/gc', () => {
      const gc = exposedGc();
      if (!gc) return { status: 409, body: { error: 'no gc(): start node with --expose-gc' } };
      // Several passes: objects freed by one pass (weak callbacks, finalizers) can release more in the next.
      for (let i = 0; i < 3; i++) gc();
      return { status: 200, body: heapFigures() };
    })
    .route('POST /debug/heap-snapshot', (_req, url) => {
      const dir = url.searchParams.get('dir') ?? os.tmpdir();
      const file = path.join(dir, `xdstp-relay-${process.pid}-${Date.now()}.heapsnapshot`);
      return { status: 200, body: { file: v8.writeHeapSnapshot(file) } };
    });
}
