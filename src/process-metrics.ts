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
 * - `nodejs_active_resources{type}` and `_total`: prom-client asks the
 *   runtime for the list of resources once per gauge, twice per scrape. Here
 *   one list serves all four gauges of a scrape — a scrape collects every
 *   gauge synchronously in one turn of the event loop, so the list is kept
 *   until the microtasks of that turn run.
 * - `nodejs_active_handles{type}` and `nodejs_active_handles_total`: counted
 *   from that same list (see HandleTypes) instead of the runtime's list of
 *   handle objects (listing 10,000 of them took ~3 ms, the resource list ~0.4 ms).
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

  const resources = perScrape(activeResourceList);
  const handleTypes = new HandleTypes();
  const handles = perScrape(() => handleTypes.count(resources()));
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
  const resourceTypes = perScrape(() => {
    const list = resources() ?? [];
    return { byType: countRuns(list, (type) => type), total: list.length };
  });
  new client.Gauge({
    name: 'nodejs_active_resources',
    help: 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    labelNames: ['type'],
    registers,
    collect() {
      setByType(this, resourceTypes().byType);
    },
  });
  new client.Gauge({
    name: 'nodejs_active_resources_total',
    help: 'Total number of active resources.',
    registers,
    collect() {
      this.set(resourceTypes().total);
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
function perScrape<T>(read: () => T): () => T {
  let fresh = false;
  let kept: T;
  return () => {
    if (!fresh) {
      kept = read();
      fresh = true;
      queueMicrotask(() => (fresh = false));
    }
    return kept;
  };
}

/** The runtime's list of active resources (undefined before Node 17, which lacks it). */
function activeResourceList(): string[] | undefined {
  return typeof process.getActiveResourcesInfo === 'function' ? process.getActiveResourcesInfo() : undefined;
}

/** The runtime's undocumented lists (prom-client reads them too): the handle objects and the pending requests. */
interface RuntimeLists {
  _getActiveHandles?: () => unknown[];
  _getActiveRequests?: () => unknown[];
}

/**
 * Active handles by type, as prom-client reports them: the constructor name
 * of each handle's JavaScript object (`Socket`, `Server`), read from
 * `process._getActiveHandles()`. That list hands out an object per handle
 * (~0.3 µs per open socket to list in a large heap, more to read), while the
 * active-resource list the scrape reads anyway names the same handles, in
 * the same order, by their C++ class (`TCPSocketWrap`, `TCPServerWrap`):
 * after the pending requests, before the timers. So the handle objects are
 * read only to learn which constructors each class stands for; then the
 * handles are counted from the resource list alone. Most classes stand for
 * one constructor (every accepted connection is a `Socket`). One that stands
 * for several (`TCPServerWrap`: the gRPC and the admin server) keeps the
 * split last read while its count stays the same, and is read again when
 * that count changes. If the two lists ever disagree, the handle objects are
 * read at every scrape, as prom-client does.
 */
export class HandleTypes {
  /** C++ class → its constructor, for classes seen with one. */
  private readonly single = new Map<string, string>();
  /** C++ class → the split by constructor last read, for classes seen with several; valid while its count is the same. */
  private readonly mixed = new Map<string, { count: number; split: Map<string, number> }>();
  private trustResources = true;

  count(resources: readonly string[] | undefined): TypeCounts {
    const runtime = process as unknown as RuntimeLists;
    if (resources !== undefined && this.trustResources) {
      const handles = handleSlice(resources, runtime._getActiveRequests?.().length ?? 0);
      const byType = this.byKnownType(handles);
      if (byType !== undefined) return { byType, total: handles.length };
      const objects = runtime._getActiveHandles?.() ?? [];
      const counted = this.learn(handles, objects);
      if (counted) return counted;
      this.trustResources = false;
      return countObjects(objects);
    }
    return countObjects(runtime._getActiveHandles?.() ?? []);
  }

  /** Counts by constructor name when every class in `handles` is known; undefined when one needs the objects read. */
  private byKnownType(handles: readonly string[]): Map<string, number> | undefined {
    const byType = new Map<string, number>();
    for (const [cls, n] of countRuns(handles, (c) => c)) {
      const type = this.single.get(cls);
      if (type !== undefined) {
        byType.set(type, (byType.get(type) ?? 0) + n);
        continue;
      }
      const mixed = this.mixed.get(cls);
      if (mixed === undefined || mixed.count !== n) return undefined;
      for (const [t, k] of mixed.split) byType.set(t, (byType.get(t) ?? 0) + k);
    }
    return byType;
  }

  /**
   * Learns each class's constructors from the two lists side by side, and
   * counts the handles by constructor as it goes (prom-client's reading);
   * undefined when the lists do not line up. Handles of one kind are mostly
   * listed together, so it counts runs of one class and constructor.
   */
  private learn(classes: readonly string[], objects: readonly unknown[]): TypeCounts | undefined {
    if (classes.length !== objects.length) return undefined;
    // Class → constructor → how many; a handle without a constructor under null (counted in the total only).
    const seen = new Map<string, Map<unknown, number>>();
    let cls: string | undefined;
    let ctor: unknown;
    let run = 0;
    const endRun = (): void => {
      if (run === 0 || cls === undefined) return;
      let split = seen.get(cls);
      if (!split) seen.set(cls, (split = new Map()));
      split.set(ctor, (split.get(ctor) ?? 0) + run);
    };
    for (let i = 0; i < classes.length; i++) {
      const c = (objects[i] as { constructor?: unknown } | null)?.constructor ?? null;
      if (classes[i] === cls && c === ctor) {
        run++;
        continue;
      }
      endRun();
      cls = classes[i];
      ctor = c;
      run = 1;
    }
    endRun();
    const byType = new Map<string, number>();
    for (const [name, split] of seen) {
      const named = new Map<string, number>();
      let nameless = false;
      for (const [c, n] of split) {
        const type = (c as { name?: string } | null)?.name;
        if (type === undefined) nameless = true;
        else named.set(type, (named.get(type) ?? 0) + n);
      }
      for (const [type, n] of named) byType.set(type, (byType.get(type) ?? 0) + n);
      this.remember(name, named, nameless);
    }
    return { byType, total: objects.length };
  }

  /** What `cls` stands for, as just read: one constructor, or a split that holds while its count stays the same. */
  private remember(cls: string, split: Map<string, number>, nameless: boolean): void {
    const [only] = split.keys();
    if (!nameless && split.size === 1 && !this.mixed.has(cls)) {
      this.single.set(cls, only!);
      return;
    }
    this.single.delete(cls);
    // A class with a nameless handle keeps being read from the objects (its count includes handles no type counts).
    if (nameless) this.mixed.delete(cls);
    else this.mixed.set(cls, { count: [...split.values()].reduce((a, b) => a + b, 0), split });
  }
}

/** The handles' part of the resource list: after the pending requests, before the trailing timers and immediates. */
function handleSlice(resources: readonly string[], requests: number): readonly string[] {
  let end = resources.length;
  while (end > requests && resources[end - 1] === 'Immediate') end--;
  while (end > requests && resources[end - 1] === 'Timeout') end--;
  return resources.slice(requests, end);
}

/** prom-client's own reading of the handle objects: by constructor name; the total counts every one. */
function countObjects(list: readonly unknown[]): TypeCounts {
  // Counted by constructor first, named after: thousands of sockets share one constructor, and
  // reading `constructor.name` per handle costs several times the lookup of `constructor`.
  const byConstructor = countRuns(list, (h) => (h as { constructor?: unknown } | null)?.constructor);
  const byType = new Map<string, number>();
  for (const [c, n] of byConstructor) {
    const type = (c as { name?: string }).name;
    if (type !== undefined) byType.set(type, (byType.get(type) ?? 0) + n);
  }
  return { byType, total: list.length };
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
