/**
 * A directory of YAML / JSON files as the origin of one authority: the xDS protocol's
 * filesystem subscription, used as an upstream (`--authority NAME=file://DIR`,
 * or `--default-upstream file://DIR` for legacy names).
 *
 * The files and their format: file-format.ts; the directory, its watching
 * and the last good content of every file: file-directory.ts.
 *
 * BEHAVIOUR. Like an upstream server, it hands the engine only what is subscribed
 * (singletons by canonical name, globs by membership, legacy names and `*` for
 * the default upstream), answers does-not-exist with the name in `removed`
 * (an empty glob with the glob URL), and after a change sends only the
 * resources whose version changed plus removals; a resource with a ttl gets
 * heartbeats while its file holds it. An empty file is treated as a write in
 * progress; write `resources: []` to empty a file on purpose, or delete it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { WILDCARD } from '../proto/xds-names';
import { formatName, isXdstpName, parseUrl } from '../xdstp';
import { ResourceDirectory } from './file-directory';
import type { FileResource } from './file-format';
import { checkContent } from './response-check';
import type { UpstreamPort, UpstreamSink } from './types';

export interface FileOriginOptions {
  /** The authority it speaks for; null for the default upstream (legacy names). */
  authority: string | null;
  /** Absolute path of the directory. */
  dir: string;
  sink: UpstreamSink;
  logger: Logger;
  metrics: RelayMetrics;
  /** Quiet time after the last file event before rescanning (default 75 ms). */
  debounceMs?: number;
  /** Stat poll interval, a safety net for missed events (default 2000 ms; 0 = off). */
  pollMs?: number;
}

type OriginState = 'idle' | 'ready' | 'closed';

const MIN_HEARTBEAT_MS = 100;

/**
 * Serves one directory as an upstream. The engine drives it exactly like a
 * GrpcUpstream (subscribe / unsubscribe / refetch); it answers through the
 * same sink, with encoded `Resource`s.
 */
export class FileOrigin implements UpstreamPort {
  readonly authority: string | null;
  readonly label: string;
  private state: OriginState = 'idle';
  private readonly dir: string;
  private readonly pollMs: number;
  private readonly directory: ResourceDirectory;
  /** What the engine subscribed: type URL → names as it sent them. */
  private readonly desired = new Map<string, Set<string>>();
  /** What the engine was told: type URL → key → version. */
  private readonly sent = new Map<string, Map<string, string>>();
  /** Subscribed names the engine was told do not exist (or are empty globs). */
  private readonly toldAbsent = new Map<string, Set<string>>();
  private readonly dirtyTypes = new Set<string>();
  private flushTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private beatEveryMs = 0;

  constructor(private readonly opts: FileOriginOptions) {
    this.authority = opts.authority;
    this.label = opts.authority ?? '(default)';
    this.dir = path.resolve(opts.dir);
    this.pollMs = opts.pollMs ?? 2000;
    let st: fs.Stats;
    try {
      st = fs.statSync(this.dir);
    } catch (err) {
      throw new Error(`authority ${this.label}: file://${this.dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (!st.isDirectory()) throw new Error(`authority ${this.label}: file://${this.dir} is not a directory`);
    this.directory = new ResourceDirectory({
      dir: this.dir,
      authority: this.authority,
      label: this.label,
      logger: opts.logger,
      debounceMs: opts.debounceMs ?? 75,
      onChange: () => this.rescanAndFlush(),
    });
    opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  get connected(): boolean {
    return this.state === 'ready';
  }

  get status(): { state: OriginState; dir: string; files: number; resources: number; rejected: Array<{ file: string; error: string }>; types: Record<string, number> } {
    let resources = 0;
    for (const m of this.directory.byType.values()) resources += m.size;
    const rejected = this.directory.rejected;
    const types: Record<string, number> = {};
    for (const [t, names] of this.desired) types[t] = names.size;
    return { state: this.state, dir: this.dir, files: this.directory.fileCount, resources, rejected, types };
  }

  /** Loads the directory (synchronously, so the relay is ready when it logs "listening") and starts watching. */
  start(): void {
    if (this.state !== 'idle') return;
    try {
      this.directory.rescan(true);
    } catch (err) {
      // Never take the relay down: serve what loaded (maybe nothing) and keep watching.
      this.opts.logger.error({ authority: this.label, dir: this.dir, err }, 'file origin failed to load');
    }
    this.state = 'ready';
    this.opts.metrics.upstreamConnected.set({ authority: this.label }, 1);
    if (this.pollMs > 0) {
      this.pollTimer = setInterval(() => this.rescanAndFlush(), this.pollMs);
      this.pollTimer.unref();
    }
    for (const t of this.desired.keys()) this.dirtyTypes.add(t);
    this.flush();
  }

  close(): void {
    this.state = 'closed';
    clearTimeout(this.flushTimer);
    clearInterval(this.pollTimer);
    clearTimeout(this.beatTimer);
    this.directory.close();
    this.opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  subscriptionCount(): number {
    let n = 0;
    for (const names of this.desired.values()) n += names.size;
    return n;
  }

  subscribe(typeUrl: string, name: string): void {
    let names = this.desired.get(typeUrl);
    if (!names) this.desired.set(typeUrl, (names = new Set()));
    names.add(name);
    // A fresh subscription is answered afresh, absence included.
    this.toldAbsent.get(typeUrl)?.delete(name);
    this.markDirty(typeUrl);
  }

  /** Takes effect at once: nothing is deferred (false). */
  unsubscribe(typeUrl: string, name: string): boolean {
    const names = this.desired.get(typeUrl);
    if (!names?.delete(name)) return false;
    this.toldAbsent.get(typeUrl)?.delete(name);
    // Like a server: forget what only this name covered, without telling anyone.
    const sent = this.sent.get(typeUrl);
    if (!sent) return false;
    const covered = new Set<string>();
    for (const n of names) for (const r of this.members(typeUrl, n)) covered.add(r.key);
    for (const key of [...sent.keys()]) if (!covered.has(key)) sent.delete(key);
    return false;
  }

  /** Answers are made after the subscription, in-process: every one can be. */
  canAnswer(): boolean {
    return true;
  }

  refetch(typeUrl: string, name: string): void {
    if (!this.desired.get(typeUrl)?.has(name)) return;
    const sent = this.sent.get(typeUrl);
    for (const r of this.members(typeUrl, name)) sent?.delete(r.key);
    this.toldAbsent.get(typeUrl)?.delete(name);
    this.markDirty(typeUrl);
  }

  // --- subscriptions → deltas ---------------------------------------------

  private markDirty(typeUrl: string): void {
    this.dirtyTypes.add(typeUrl);
    if (this.state !== 'ready' || this.flushTimer) return;
    // A tick later, so one client request's subscriptions travel together.
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.flush();
    }, 0);
  }

  /** What a subscribed name covers right now. */
  private members(typeUrl: string, name: string): FileResource[] {
    const resources = this.directory.byType.get(typeUrl);
    if (!resources) return [];
    if (name === WILDCARD) {
      if (this.authority !== null) return [];
      return [...resources.values()].filter((r) => r.glob === undefined);
    }
    if (isXdstpName(name)) {
      try {
        const parsed = parseUrl(name);
        const key = formatName(parsed, { canonical: true, directives: false });
        if (parsed.glob) {
          const keys = this.directory.globs.get(typeUrl)?.get(key);
          return keys ? [...keys].map((k) => resources.get(k)!).filter(Boolean) : [];
        }
        const r = resources.get(key);
        return r ? [r] : [];
      } catch {
        return [];
      }
    }
    const r = resources.get(name);
    return r && r.glob === undefined ? [r] : [];
  }

  private flush(): void {
    if (this.state !== 'ready') return;
    const types = [...this.dirtyTypes];
    this.dirtyTypes.clear();
    for (const typeUrl of types) this.flushType(typeUrl);
    this.scheduleHeartbeats();
  }

  /** Tells the engine the difference between what it holds and what the files say, for one type. */
  private flushType(typeUrl: string): void {
    const names = this.desired.get(typeUrl) ?? new Set<string>();
    let sent = this.sent.get(typeUrl);
    if (!sent) this.sent.set(typeUrl, (sent = new Map()));
    let absent = this.toldAbsent.get(typeUrl);
    if (!absent) this.toldAbsent.set(typeUrl, (absent = new Set()));
    const covered = new Map<string, FileResource>();
    const emptyNames: string[] = [];
    for (const name of names) {
      const members = this.members(typeUrl, name);
      if (members.length === 0) {
        // '*' has no way to say "empty"; every other name does.
        if (name !== WILDCARD && !absent.has(name)) {
          absent.add(name);
          emptyNames.push(name);
        }
        continue;
      }
      absent.delete(name);
      for (const r of members) covered.set(r.key, r);
    }
    const resources: Buffer[] = [];
    for (const [key, r] of covered) {
      if (sent.get(key) === r.version) continue;
      sent.set(key, r.version);
      resources.push(r.bytes);
    }
    const removed: string[] = [];
    for (const key of [...sent.keys()]) {
      if (covered.has(key)) continue;
      sent.delete(key);
      removed.push(key);
    }
    // Members first, then the names that are now empty (a glob URL last, as the spec orders it).
    for (const n of emptyNames) if (!removed.includes(n)) removed.push(n);
    if (resources.length === 0 && removed.length === 0) return;
    this.deliver(typeUrl, resources, removed);
  }

  private deliver(typeUrl: string, resources: Buffer[], removed: string[]): void {
    const receivedAt = process.hrtime.bigint();
    this.opts.metrics.upstreamResponses.inc({ authority: this.label });
    // The same checks as a control plane's response; the files were checked on
    // load, so a fault here is the origin's own bug, not the operator's.
    const checked = checkContent(typeUrl, resources, removed);
    if (!checked.ok) {
      this.opts.logger.error({ authority: this.label, typeUrl, reason: checked.reason, detail: checked.message }, 'file origin update failed the response checks; not applied');
      return;
    }
    try {
      this.opts.sink.onResponse(this, { typeUrl, resources: checked.resources, removed: checked.removed, errors: [], receivedAt });
    } catch (err) {
      this.opts.logger.error({ authority: this.label, err }, 'failed to apply file origin update');
    }
  }

  // --- TTL heartbeats ------------------------------------------------------

  /** Heartbeats keep a resource with a ttl alive for as long as its file holds it. */
  private scheduleHeartbeats(): void {
    let shortest = Infinity;
    for (const [typeUrl, sent] of this.sent) {
      const resources = this.directory.byType.get(typeUrl);
      for (const key of sent.keys()) {
        const ttl = resources?.get(key)?.ttlMs;
        if (ttl !== undefined) shortest = Math.min(shortest, ttl);
      }
    }
    const every = shortest === Infinity ? 0 : Math.max(MIN_HEARTBEAT_MS, Math.floor(shortest / 2));
    if (every === this.beatEveryMs && (every === 0 || this.beatTimer)) return;
    clearTimeout(this.beatTimer);
    this.beatTimer = undefined;
    this.beatEveryMs = every;
    if (every > 0) this.armHeartbeat();
  }

  private armHeartbeat(): void {
    this.beatTimer = setTimeout(() => {
      this.beatTimer = undefined;
      if (this.state !== 'ready') return;
      this.sendHeartbeats();
      if (this.beatEveryMs > 0) this.armHeartbeat();
    }, this.beatEveryMs);
    this.beatTimer.unref();
  }

  private sendHeartbeats(): void {
    for (const [typeUrl, sent] of this.sent) {
      const resources = this.directory.byType.get(typeUrl);
      const beats: Buffer[] = [];
      for (const [key, version] of sent) {
        const r = resources?.get(key);
        if (r?.heartbeat && r.version === version) beats.push(r.heartbeat);
      }
      if (beats.length > 0) this.deliver(typeUrl, beats, []);
    }
  }

  // --- the directory -------------------------------------------------------

  private rescanAndFlush(): void {
    if (this.state !== 'ready') return;
    try {
      if (!this.directory.rescan(false)) return;
    } catch (err) {
      this.opts.logger.error({ authority: this.label, dir: this.dir, err }, 'file origin rescan failed; serving the last good state');
      return;
    }
    for (const t of this.desired.keys()) this.dirtyTypes.add(t);
    this.flush();
  }
}
