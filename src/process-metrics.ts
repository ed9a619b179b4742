import * as fs from 'node:fs';
import * as client from 'prom-client';

/**
 * prom-client's default process and Node.js metrics, with the five whose
 * cost grows with open connections measured more cheaply. Their names, help
 * texts, labels and values stay the stock ones, so Node dashboards keep
 * working; only how they are read changes:
 *
 * - `process_open_fds`: prom-client lists `/proc/self/fd` (one string per
 *   descriptor, ~1 µs each). Linux 6.2 and later report the number of open
 *   descriptors as that directory's size, so a `stat` answers in constant
 *   time; older kernels report 0 there and get the listing.
 * - `nodejs_active_handles{type}` and `nodejs_active_handles_total`, and
 *   likewise `nodejs_active_resources{type}` and `_total`: prom-client asks
 *   the runtime for the list of handles (resources) once per gauge, twice per
 *   scrape. Here one list serves both gauges of a pair within a scrape — a
 *   scrape collects every gauge synchronously in one turn of the event loop,
 *   so the list is kept until the microtasks of that turn run.
 */
export function collectProcessMetrics(registry: client.Registry): void {
  client.collectDefaultMetrics({ register: registry });
  for (const name of REPLACED) registry.removeSingleMetric(name);
  const registers = [registry];

  if (process.platform === 'linux') {
    new client.Gauge({
      name: 'process_open_fds',
      help: 'Number of open file descriptors.',
      registers,
      collect() {
        const n = openDescriptors();
        if (n !== undefined) this.set(n);
      },
    });
  }

  const handles = perScrape(activeHandleTypes);
  new client.Gauge({
    name: 'nodejs_active_handles',
    help: 'Number of active libuv handles grouped by handle type. Every handle type is C++ class name.',
    labelNames: ['type'],
    registers,
    collect() {
      setByType(this, handles().byType);
    },
  });
  new client.Gauge({
    name: 'nodejs_active_handles_total',
    help: 'Total number of active handles.',
    registers,
    collect() {
      this.set(handles().total);
    },
  });

  if (typeof process.getActiveResourcesInfo !== 'function') return;
  const resources = perScrape(activeResourceTypes);
  new client.Gauge({
    name: 'nodejs_active_resources',
    help: 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    labelNames: ['type'],
    registers,
    collect() {
      setByType(this, resources().byType);
    },
  });
  new client.Gauge({
    name: 'nodejs_active_resources_total',
    help: 'Total number of active resources.',
    registers,
    collect() {
      this.set(resources().total);
    },
  });
}

const REPLACED = [
  'process_open_fds',
  'nodejs_active_handles',
  'nodejs_active_handles_total',
  'nodejs_active_resources',
  'nodejs_active_resources_total',
];

interface TypeCounts {
  byType: Map<string, number>;
  total: number;
}

/** `read`, called at most once per turn of the event loop: the gauges of one scrape share its answer. */
function perScrape(read: () => TypeCounts): () => TypeCounts {
  let kept: TypeCounts | undefined;
  return () => {
    if (kept === undefined) {
      kept = read();
      queueMicrotask(() => (kept = undefined));
    }
    return kept;
  };
}

function activeHandleTypes(): TypeCounts {
  // process._getActiveHandles is undocumented (prom-client reads it too); it lists the handle objects.
  const list = (process as unknown as { _getActiveHandles?: () => unknown[] })._getActiveHandles?.() ?? [];
  // Counted by constructor first, named after: thousands of sockets share one constructor, and
  // reading `constructor.name` per handle costs several times the lookup of `constructor`.
  const byConstructor = countRuns(list, (h) => (h as { constructor?: unknown } | null)?.constructor);
  const byType = new Map<string, number>();
  for (const [c, n] of byConstructor) {
    const type = (c as { name?: string }).name;
    if (type !== undefined) byType.set(type, (byType.get(type) ?? 0) + n);
  }
  // As prom-client: the total counts every listed handle, also one without a constructor.
  return { byType, total: list.length };
}

function activeResourceTypes(): TypeCounts {
  const list = process.getActiveResourcesInfo();
  return { byType: countRuns(list, (type) => type), total: list.length };
}

/**
 * How many items of `list` have each key (undefined keys left out). The
 * runtime lists handles of one kind together, so counting runs of one key
 * touches the map once per run rather than once per item.
 */
function countRuns<T, K>(list: readonly T[], keyOf: (item: T) => K | undefined): Map<K, number> {
  const counts = new Map<K, number>();
  let key: K | undefined;
  let run = 0;
  for (const item of list) {
    const k = keyOf(item);
    if (k === key) {
      run++;
      continue;
    }
    if (key !== undefined) counts.set(key, (counts.get(key) ?? 0) + run);
    key = k;
    run = 1;
  }
  if (key !== undefined) counts.set(key, (counts.get(key) ?? 0) + run);
  return counts;
}

function setByType(gauge: client.Gauge, byType: Map<string, number>): void {
  gauge.reset();
  for (const [type, n] of byType) gauge.set({ type }, n);
}

/** Open file descriptors of this process (Linux), undefined when /proc cannot be read. */
function openDescriptors(): number | undefined {
  try {
    const size = fs.statSync('/proc/self/fd').size;
    if (size > 0) return size;
    // Before Linux 6.2 the size is 0: list the directory (its own descriptor, open while listing, not counted).
    return fs.readdirSync('/proc/self/fd').length - 1;
  } catch {
    return undefined;
  }
}
