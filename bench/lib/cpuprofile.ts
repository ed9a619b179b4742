/** Reads a V8 .cpuprofile (node --cpu-prof) and summarizes where the time went. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BenchContext } from './context';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  startTime: number;
  endTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  totalMs: number;
  /** ms of samples that were not idle. */
  busyMs: number;
  byCategory: Array<{ category: string; selfMs: number; pct: number }>;
  topSelf: Array<{ fn: string; selfMs: number; pct: number }>;
  topInclusive: Array<{ fn: string; totalMs: number; pct: number }>;
}

function category(url: string, fn: string): string {
  if (fn === '(idle)') return 'idle';
  if (fn === '(garbage collector)') return 'GC';
  if (fn === '(program)') return 'V8/native (program)';
  if (url.includes('@grpc/grpc-js')) return 'grpc-js';
  if (url.includes('prom-client')) return 'prom-client';
  if (url.includes('protobufjs')) return 'protobufjs';
  if (url.includes('pino')) return 'pino';
  const m = /dist\/src\/(.+)\.js$/.exec(url);
  if (m) return `relay: src/${m[1]}.ts`;
  if (url.startsWith('node:')) return `node: ${url.slice(5).replace(/^internal\//, '')}`;
  if (url === '') return `native: ${fn || '(anonymous)'}`;
  return 'other';
}

function label(n: ProfileNode): string {
  const { functionName, url, lineNumber } = n.callFrame;
  const file = url.replace(/^.*\/(node_modules\/)?/, '');
  return `${functionName || '(anonymous)'} ${file}${url ? `:${lineNumber + 1}` : ''}`;
}

/** A stretch of a run, in CLOCK_MONOTONIC µs (nowUs()), a profile summary is restricted to. */
export interface ProfileWindow {
  fromUs: number;
  toUs: number;
}

/**
 * `windows` restrict the summary to samples taken between pairs of
 * CLOCK_MONOTONIC µs instants (V8's profile clock is the same monotonic clock
 * as process.hrtime on Linux), e.g. only the measured rounds of a scenario.
 */
export function summarizeProfile(file: string, top = 20, windows?: readonly ProfileWindow[]): ProfileSummary {
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  const self = new Map<number, number>();
  let total = 0;
  let t = p.startTime;
  p.samples.forEach((id, i) => {
    const delta = p.timeDeltas[i] ?? 0;
    t += delta;
    if (windows && !windows.some((w) => t >= w.fromUs && t <= w.toUs)) return;
    const dt = delta / 1000;
    self.set(id, (self.get(id) ?? 0) + dt);
    total += dt;
  });
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const cats = new Map<string, number>();
  const selfByFn = new Map<string, number>();
  const inclByFn = new Map<string, number>();
  let idle = 0;
  for (const [id, ms] of self) {
    const n = byId.get(id)!;
    const cat = category(n.callFrame.url, n.callFrame.functionName);
    if (cat === 'idle') idle += ms;
    cats.set(cat, (cats.get(cat) ?? 0) + ms);
    const l = label(n);
    selfByFn.set(l, (selfByFn.get(l) ?? 0) + ms);
    // Inclusive: credit every distinct function on the stack once.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const fn = label(byId.get(cur)!);
      if (seen.has(fn)) continue;
      seen.add(fn);
      inclByFn.set(fn, (inclByFn.get(fn) ?? 0) + ms);
    }
  }
  const busy = total - idle;
  const pct = (ms: number): number => Math.round((ms / Math.max(busy, 1e-9)) * 1000) / 10;
  const round = (ms: number): number => Math.round(ms * 10) / 10;
  return {
    totalMs: round(total),
    busyMs: round(busy),
    byCategory: [...cats]
      .filter(([c]) => c !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([c, ms]) => ({ category: c, selfMs: round(ms), pct: pct(ms) })),
    topSelf: [...selfByFn]
      .filter(([f]) => !f.startsWith('(idle)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn, ms]) => ({ fn, selfMs: round(ms), pct: pct(ms) })),
    topInclusive: [...inclByFn]
      .filter(([f]) => !f.startsWith('(root)') && !f.startsWith('(idle)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn, ms]) => ({ fn, totalMs: round(ms), pct: pct(ms) })),
  };
}

/** The summary of the one profile a --cpu-prof process wrote into `dir`, over `windows` only. */
export function profileIn(dir: string, windows: readonly ProfileWindow[]): { file: string; summary: ProfileSummary } | undefined {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')) : [];
  if (files.length === 0) return undefined;
  const file = path.join(dir, files[0]!);
  return { file, summary: summarizeProfile(file, 25, windows) };
}

export function logProfile(ctx: BenchContext, what: string, p: { file: string; summary: ProfileSummary }): void {
  const ps = p.summary;
  ctx.log(`  ${what} CPU profile: ${p.file} (measured rounds only below)`);
  ctx.log(`  busy ${ps.busyMs} ms; by category: ${ps.byCategory.slice(0, 12).map((c) => `${c.category} ${c.pct}%`).join(', ')}`);
  for (const f of ps.topSelf.slice(0, 15)) ctx.log(`    self ${String(f.pct).padStart(5)}%  ${f.fn}`);
  for (const f of ps.topInclusive.slice(0, 25)) ctx.log(`    incl ${String(f.pct).padStart(5)}%  ${f.fn}`);
}
