/**
 * A directory of YAML / JSON files as the origin of one authority: the xDS protocol's
 * filesystem subscription, used as an upstream (`--authority NAME=file://DIR`,
 * or `--default-upstream file://DIR` for legacy names).
 *
 * FILE FORMAT. Every `*.yaml`, `*.yml` and `*.json` file under DIR (recursively;
 * names starting with '.' are skipped) holds one or more resources. A file is
 * one of: a single resource, a list of resources, or `{resources: [...]}`; a
 * YAML file may also hold several `---` documents of those forms.
 *
 *   name: xdstp://examples.local/envoy.config.cluster.v3.Cluster/web   # required
 *   version: "7"        # optional; default: a hash of the encoded payload and ttl
 *   ttl: 30s            # optional Resource.ttl (proto3 JSON duration); the origin
 *                       # sends heartbeats while the resource is in the file
 *   resource:           # the payload, typed JSON (proto3 JSON mapping) ...
 *     "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
 *     name: xdstp://examples.local/envoy.config.cluster.v3.Cluster/web
 *     connect_timeout: 1s
 *
 *   resource:           # ... or an already encoded Any (no Envoy protos needed)
 *     type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster
 *     value: CgN3ZWI=   # base64 of the serialized message
 *
 * `name` is an xdstp:// URN of this origin's authority (any spelling: it is
 * canonicalized; context parameters make it a member of the glob with the same
 * parameters), or a plain legacy name when the directory is the default
 * upstream. Its resource type must be the payload's type. Typed JSON is
 * encoded with Envoy's own API protos (src/typed-json/envoy-types.ts, loaded on
 * first use); nested `Any`s use `"@type"` too. A list collection
 * (`…/envoy.config.listener.v3.ListenerCollection/…`) is an ordinary resource
 * whose payload lists `entries`, e.g. `- inline_entry: {name, version, resource}`.
 *
 * BEHAVIOUR. Like an upstream server, it hands the hub only what is subscribed
 * (singletons by canonical name, globs by membership, legacy names and `*` for
 * the default upstream), answers does-not-exist with the name in `removed`
 * (an empty glob with the glob URL), and after a change sends only the
 * resources whose version changed plus removals. The directory is watched
 * (fs.watch per directory, debounced, plus a slow stat poll as a safety net)
 * and every change triggers a full rescan that re-reads only files whose
 * mtime / size / inode changed. A file is accepted or rejected as a whole: a
 * file that fails to parse or encode is logged (file, resource, reason) and
 * the last good version of its resources keeps being served. An empty file is
 * treated as a write in progress; write `resources: []` to empty a file on
 * purpose, or delete it.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import YAML from 'yaml';
import type { Logger } from '../log';
import type { RelayMetrics } from '../metrics';
import { resourceCodec, type Duration, type Resource } from '../proto/messages';
import { WILDCARD } from '../proto/xds-names';
import { formatName, globKeyOf, isXdstpName, parseUrl, parseUrn, typeUrlOf, XdstpNameError } from '../xdstp';
import { envoyTypes, envoyTypesLoaded, TypedJsonError, type EncodedAny } from '../typed-json/envoy-types';
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

const FILE_EXTENSIONS = new Set(['.yaml', '.yml', '.json']);
const RESOURCE_KEYS = new Set(['name', 'version', 'ttl', 'resource']);
const MIN_HEARTBEAT_MS = 100;
/**
 * File timestamps tick coarsely (a few ms on Linux), so a file written again
 * within the same tick, at the same size, keeps its stat signature. A file
 * modified this recently is read again on the next scan ("racy git").
 */
const RACY_MS = 1000;

/** One resource as loaded from a file, ready to hand to the hub. */
interface FileResource {
  /** Canonical xdstp URN, or the legacy name. */
  key: string;
  typeUrl: string;
  version: string;
  /** Encoded `Resource` (name = key). */
  bytes: Buffer;
  /** Encoded heartbeat (`Resource` without payload) when it has a ttl. */
  heartbeat?: Buffer;
  ttlMs?: number;
  /** Canonical key of the glob it is a direct member of (xdstp only). */
  glob?: string;
  /** Hash of payload + ttl, to warn about content changes under an unchanged version. */
  contentHash: string;
  /** Relative path of the file it came from. */
  file: string;
}

interface FileState {
  /** mtime / ctime / size / inode of the last read, good or bad ('' = read again next scan). */
  sig: string;
  /** Hash of the text last read, so a re-read of unchanged text is a no-op. */
  textHash?: string;
  /** The last good content; undefined if the file never parsed. */
  good?: Map<string, FileResource>;
  /** Why the current content was rejected, if it was. */
  error?: string;
}

/** A rejected file: every problem found in it, one per resource where possible. */
class FileRejected extends Error {
  constructor(readonly problems: Array<{ resource: string; reason: string }>) {
    super(problems.map((p) => (p.resource ? `${p.resource}: ${p.reason}` : p.reason)).join('; '));
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function entryKey(typeUrl: string, key: string): string {
  return `${typeUrl}\n${key}`;
}

/** `ttl:` as a proto3 JSON duration string ("30s", "0.5s") or a number of seconds. */
function parseTtl(v: unknown): { duration: Duration; ms: number } {
  let seconds: number;
  let nanos: number;
  if (typeof v === 'number' && Number.isFinite(v) && v > 0) {
    seconds = Math.floor(v);
    nanos = Math.round((v - seconds) * 1e9);
  } else {
    const m = typeof v === 'string' ? /^(\d+)(?:\.(\d{1,9}))?s$/.exec(v.trim()) : null;
    if (!m) throw new Error(`ttl must be a duration like "30s" or a number of seconds, got ${JSON.stringify(v)}`);
    seconds = Number(m[1]);
    nanos = m[2] ? Number(m[2].padEnd(9, '0')) : 0;
  }
  const ms = seconds * 1000 + Math.floor(nanos / 1e6);
  if (ms <= 0) throw new Error(`ttl must be positive, got ${JSON.stringify(v)}`);
  return { duration: { seconds, nanos }, ms };
}

function contentHash(payload: EncodedAny, ttl: Duration | undefined): string {
  const h = createHash('sha256');
  h.update(payload.typeUrl).update('\0').update(payload.value);
  if (ttl) h.update(`\0ttl=${ttl.seconds}.${ttl.nanos}`);
  return h.digest('hex').slice(0, 16);
}

/**
 * Serves one directory as an upstream. The hub drives it exactly like a
 * GrpcUpstream (subscribe / unsubscribe / refetch); it answers through the
 * same sink, with encoded `Resource`s.
 */
export class FileOrigin implements UpstreamPort {
  readonly authority: string | null;
  readonly label: string;
  private state: OriginState = 'idle';
  private readonly dir: string;
  private readonly debounceMs: number;
  private readonly pollMs: number;
  private readonly files = new Map<string, FileState>();
  /** Merged view of every file's last good resources: type URL → key → resource. */
  private byType = new Map<string, Map<string, FileResource>>();
  /** type URL → glob key → member keys. */
  private globs = new Map<string, Map<string, Set<string>>>();
  /** What the hub subscribed: type URL → names as it sent them. */
  private readonly desired = new Map<string, Set<string>>();
  /** What the hub was told: type URL → key → version. */
  private readonly sent = new Map<string, Map<string, string>>();
  /** Subscribed names the hub was told do not exist (or are empty globs). */
  private readonly toldAbsent = new Map<string, Set<string>>();
  private readonly dirtyTypes = new Set<string>();
  private readonly watchers = new Map<string, fs.FSWatcher>();
  private flushTimer: NodeJS.Timeout | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private beatEveryMs = 0;
  private dirMissing = false;
  private protosLogged = false;

  constructor(private readonly opts: FileOriginOptions) {
    this.authority = opts.authority;
    this.label = opts.authority ?? '(default)';
    this.dir = path.resolve(opts.dir);
    this.debounceMs = opts.debounceMs ?? 75;
    this.pollMs = opts.pollMs ?? 2000;
    let st: fs.Stats;
    try {
      st = fs.statSync(this.dir);
    } catch (err) {
      throw new Error(`authority ${this.label}: file://${this.dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (!st.isDirectory()) throw new Error(`authority ${this.label}: file://${this.dir} is not a directory`);
    opts.metrics.upstreamConnected.set({ authority: this.label }, 0);
  }

  get connected(): boolean {
    return this.state === 'ready';
  }

  get status(): { state: OriginState; dir: string; files: number; resources: number; rejected: Array<{ file: string; error: string }>; types: Record<string, number> } {
    let resources = 0;
    for (const m of this.byType.values()) resources += m.size;
    const rejected: Array<{ file: string; error: string }> = [];
    for (const [file, s] of this.files) if (s.error !== undefined) rejected.push({ file, error: s.error });
    const types: Record<string, number> = {};
    for (const [t, names] of this.desired) types[t] = names.size;
    return { state: this.state, dir: this.dir, files: this.files.size, resources, rejected, types };
  }

  /** Loads the directory (synchronously, so the relay is ready when it logs "listening") and starts watching. */
  start(): void {
    if (this.state !== 'idle') return;
    try {
      this.rescan(true);
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
    clearTimeout(this.rescanTimer);
    clearInterval(this.pollTimer);
    clearTimeout(this.beatTimer);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
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

  unsubscribe(typeUrl: string, name: string): void {
    const names = this.desired.get(typeUrl);
    if (!names?.delete(name)) return;
    this.toldAbsent.get(typeUrl)?.delete(name);
    // Like a server: forget what only this name covered, without telling anyone.
    const sent = this.sent.get(typeUrl);
    if (!sent) return;
    const covered = new Set<string>();
    for (const n of names) for (const r of this.members(typeUrl, n)) covered.add(r.key);
    for (const key of [...sent.keys()]) if (!covered.has(key)) sent.delete(key);
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
    const resources = this.byType.get(typeUrl);
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
          const keys = this.globs.get(typeUrl)?.get(key);
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

  /** Tells the hub the difference between what it holds and what the files say, for one type. */
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
    this.opts.metrics.upstreamResponses.inc({ authority: this.label });
    try {
      this.opts.sink.onResponse(this, { typeUrl, resources, removed, errors: [], receivedAt: process.hrtime.bigint() });
    } catch (err) {
      this.opts.logger.error({ authority: this.label, err }, 'failed to apply file origin update');
    }
  }

  // --- TTL heartbeats ------------------------------------------------------

  /** Heartbeats keep a resource with a ttl alive for as long as its file holds it. */
  private scheduleHeartbeats(): void {
    let shortest = Infinity;
    for (const [typeUrl, sent] of this.sent) {
      const resources = this.byType.get(typeUrl);
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
      const resources = this.byType.get(typeUrl);
      const beats: Buffer[] = [];
      for (const [key, version] of sent) {
        const r = resources?.get(key);
        if (r?.heartbeat && r.version === version) beats.push(r.heartbeat);
      }
      if (beats.length > 0) this.deliver(typeUrl, beats, []);
    }
  }

  // --- the directory -------------------------------------------------------

  private scheduleRescan(): void {
    if (this.state === 'closed') return;
    clearTimeout(this.rescanTimer);
    this.rescanTimer = setTimeout(() => {
      this.rescanTimer = undefined;
      this.rescanAndFlush();
    }, this.debounceMs);
  }

  private rescanAndFlush(): void {
    if (this.state !== 'ready') return;
    try {
      if (!this.rescan(false)) return;
    } catch (err) {
      this.opts.logger.error({ authority: this.label, dir: this.dir, err }, 'file origin rescan failed; serving the last good state');
      return;
    }
    for (const t of this.desired.keys()) this.dirtyTypes.add(t);
    this.flush();
  }

  /** Walks the directory; re-reads changed files. Returns true when the merged view changed. */
  private rescan(initial: boolean): boolean {
    const found = new Map<string, fs.Stats>();
    const dirs: string[] = [];
    if (!this.walk(this.dir, found, dirs)) {
      if (!this.dirMissing) {
        this.dirMissing = true;
        this.opts.logger.warn({ authority: this.label, dir: this.dir }, 'file origin directory is gone; serving the last good state');
      }
      return false;
    }
    if (this.dirMissing) {
      this.dirMissing = false;
      this.opts.logger.info({ authority: this.label, dir: this.dir }, 'file origin directory is back');
    }
    this.syncWatchers(dirs);
    const changed: string[] = [];
    for (const [rel, st] of found) {
      const sig = `${st.mtimeMs}:${st.ctimeMs}:${st.size}:${st.ino}`;
      const prev = this.files.get(rel);
      if (prev && prev.sig === sig) continue;
      const state: FileState = prev ?? { sig };
      state.sig = Date.now() - st.mtimeMs < RACY_MS ? '' : sig;
      this.files.set(rel, state);
      if (this.load(rel, state)) changed.push(rel);
    }
    const deleted: string[] = [];
    for (const rel of [...this.files.keys()]) {
      if (found.has(rel)) continue;
      const hadResources = (this.files.get(rel)?.good?.size ?? 0) > 0;
      this.files.delete(rel);
      if (hadResources) deleted.push(rel);
    }
    if (!initial && changed.length === 0 && deleted.length === 0) return false;
    this.rebuild();
    let resources = 0;
    for (const m of this.byType.values()) resources += m.size;
    const rejected = [...this.files.values()].filter((s) => s.error !== undefined).length;
    const log = { authority: this.label, dir: this.dir, files: this.files.size, resources, rejected };
    if (initial) this.opts.logger.info(log, 'file origin loaded');
    else this.opts.logger.info({ ...log, changed, deleted }, 'file origin updated');
    this.logProtoLoad();
    return true;
  }

  private logProtoLoad(): void {
    if (this.protosLogged || !envoyTypesLoaded()) return;
    this.protosLogged = true;
    const { files, loadMs } = envoyTypes().stats;
    this.opts.logger.info({ authority: this.label, protoFiles: files, loadMs }, 'envoy API protos loaded for typed JSON');
  }

  /** Collects resource files and directories; false when the root itself is unreadable. */
  private walk(dir: string, found: Map<string, fs.Stats>, dirs: string[]): boolean {
    let entries: string[];
    try {
      entries = fs.readdirSync(dir);
    } catch {
      return dir !== this.dir;
    }
    dirs.push(dir);
    for (const name of entries.sort()) {
      if (name.startsWith('.')) continue;
      const full = path.join(dir, name);
      let st: fs.Stats;
      try {
        st = fs.statSync(full); // follows symlinks (Kubernetes ConfigMap volumes are symlinks)
      } catch {
        continue; // vanished between readdir and stat, or a dangling link
      }
      if (st.isDirectory()) this.walk(full, found, dirs);
      else if (st.isFile() && FILE_EXTENSIONS.has(path.extname(name).toLowerCase())) {
        found.set(path.relative(this.dir, full).split(path.sep).join('/'), st);
      }
    }
    return true;
  }

  private syncWatchers(dirs: string[]): void {
    if (this.state === 'closed') return;
    const want = new Set(dirs);
    for (const [dir, w] of this.watchers) {
      if (want.has(dir)) continue;
      w.close();
      this.watchers.delete(dir);
    }
    for (const dir of want) {
      if (this.watchers.has(dir)) continue;
      try {
        const w = fs.watch(dir, { persistent: false }, () => this.scheduleRescan());
        w.on('error', () => {
          w.close();
          if (this.watchers.get(dir) === w) this.watchers.delete(dir);
          this.scheduleRescan();
        });
        this.watchers.set(dir, w);
      } catch (err) {
        this.opts.logger.debug({ authority: this.label, dir, err: (err as Error).message }, 'cannot watch directory; relying on polling');
      }
    }
  }

  /** Reads one file into `state`. Returns true when its good content changed. */
  private load(rel: string, state: FileState): boolean {
    let text: string;
    try {
      text = fs.readFileSync(path.join(this.dir, rel), 'utf8');
    } catch (err) {
      // Vanished or unreadable mid-scan: the next event or poll sorts it out.
      this.opts.logger.debug({ authority: this.label, file: rel, err: (err as Error).message }, 'file unreadable');
      state.sig = '';
      return false;
    }
    const textHash = createHash('sha256').update(text).digest('hex');
    if (textHash === state.textHash) return false;
    state.textHash = textHash;
    try {
      const resources = this.parseFile(rel, text);
      const before = state.good;
      state.good = resources;
      const wasBad = state.error !== undefined;
      state.error = undefined;
      if (wasBad) this.opts.logger.info({ authority: this.label, file: rel, resources: resources.size }, 'file accepted again');
      this.warnSameVersion(before, resources);
      return true;
    } catch (err) {
      const problems =
        err instanceof FileRejected ? err.problems : [{ resource: '', reason: (err as Error).message }];
      state.error = problems.map((p) => (p.resource ? `${p.resource}: ${p.reason}` : p.reason)).join('; ');
      const keeping = state.good?.size ?? 0;
      for (const p of problems) {
        this.opts.logger.error(
          { authority: this.label, file: rel, resource: p.resource || undefined, reason: p.reason, servingLastGood: keeping },
          keeping > 0 ? 'file rejected; serving its last good resources' : 'file rejected',
        );
      }
      return false;
    }
  }

  private warnSameVersion(before: Map<string, FileResource> | undefined, after: Map<string, FileResource>): void {
    if (!before) return;
    for (const [id, r] of after) {
      const old = before.get(id);
      if (old && old.version === r.version && old.contentHash !== r.contentHash) {
        this.opts.logger.warn(
          { authority: this.label, file: r.file, resource: r.key, version: r.version },
          'resource content changed but its explicit version did not; clients that hold this version will not get the change',
        );
      }
    }
  }

  /** Merges every file's last good resources; the first file (in path order) wins a duplicate name. */
  private rebuild(): void {
    const byType = new Map<string, Map<string, FileResource>>();
    const globs = new Map<string, Map<string, Set<string>>>();
    for (const rel of [...this.files.keys()].sort()) {
      const good = this.files.get(rel)?.good;
      if (!good) continue;
      for (const r of good.values()) {
        let resources = byType.get(r.typeUrl);
        if (!resources) byType.set(r.typeUrl, (resources = new Map()));
        const existing = resources.get(r.key);
        if (existing) {
          this.opts.logger.warn({ authority: this.label, resource: r.key, file: r.file, keptFrom: existing.file }, 'resource defined in two files; ignoring the later one');
          continue;
        }
        resources.set(r.key, r);
        if (r.glob !== undefined) {
          let byGlob = globs.get(r.typeUrl);
          if (!byGlob) globs.set(r.typeUrl, (byGlob = new Map()));
          let members = byGlob.get(r.glob);
          if (!members) byGlob.set(r.glob, (members = new Set()));
          members.add(r.key);
        }
      }
    }
    this.byType = byType;
    this.globs = globs;
  }

  // --- parsing -------------------------------------------------------------

  private parseFile(rel: string, text: string): Map<string, FileResource> {
    if (text.trim() === '') throw new FileRejected([{ resource: '', reason: 'file is empty (still being written?); write "resources: []" to empty it on purpose' }]);
    const docs: unknown[] = [];
    if (rel.toLowerCase().endsWith('.json')) {
      try {
        docs.push(JSON.parse(text));
      } catch (err) {
        throw new FileRejected([{ resource: '', reason: `invalid JSON: ${(err as Error).message}` }]);
      }
    } else {
      for (const doc of YAML.parseAllDocuments(text)) {
        const error = doc.errors[0];
        if (error) throw new FileRejected([{ resource: '', reason: `invalid YAML: ${error.message.split('\n')[0]}` }]);
        docs.push(doc.toJS());
      }
    }
    const entries: unknown[] = [];
    for (const doc of docs) {
      if (doc === null || doc === undefined) continue;
      if (Array.isArray(doc)) entries.push(...doc);
      else if (isObject(doc) && 'resources' in doc && !('name' in doc)) {
        const extra = Object.keys(doc).filter((k) => k !== 'resources');
        if (extra.length > 0) throw new FileRejected([{ resource: '', reason: `unknown top-level key(s) ${extra.join(', ')} next to "resources"` }]);
        if (doc.resources === null) continue;
        if (!Array.isArray(doc.resources)) throw new FileRejected([{ resource: '', reason: '"resources" must be a list' }]);
        entries.push(...(doc.resources as unknown[]));
      } else entries.push(doc);
    }
    const out = new Map<string, FileResource>();
    const problems: Array<{ resource: string; reason: string }> = [];
    entries.forEach((entry, i) => {
      const label = isObject(entry) && typeof entry.name === 'string' ? entry.name : `#${i}`;
      try {
        const r = this.parseResource(rel, entry);
        const id = entryKey(r.typeUrl, r.key);
        if (out.has(id)) throw new Error(`${r.key} appears twice in this file`);
        out.set(id, r);
      } catch (err) {
        problems.push({ resource: label, reason: err instanceof TypedJsonError || err instanceof XdstpNameError ? err.message : (err as Error).message });
      }
    });
    if (problems.length > 0) throw new FileRejected(problems);
    return out;
  }

  private parseResource(rel: string, entry: unknown): FileResource {
    if (!isObject(entry)) throw new Error(`expected a resource {name, resource, version?, ttl?}, got ${Array.isArray(entry) ? 'a list' : JSON.stringify(entry)}`);
    const unknown = Object.keys(entry).filter((k) => !RESOURCE_KEYS.has(k));
    if (unknown.length > 0) throw new Error(`unknown key(s) ${unknown.map((k) => `"${k}"`).join(', ')} (expected name, version, ttl, resource)`);
    const name = entry.name;
    if (typeof name !== 'string' || name === '') throw new Error('"name" is required');
    if (entry.resource === undefined || entry.resource === null) throw new Error('"resource" (the payload) is required');

    let key: string;
    let typeUrl: string | undefined;
    let glob: string | undefined;
    if (isXdstpName(name)) {
      if (this.authority === null) {
        throw new Error('xdstp:// names belong in an --authority origin; this directory is the default upstream (legacy names only)');
      }
      const parsed = parseUrn(name);
      if (parsed.authority !== this.authority) {
        throw new Error(`authority "${parsed.authority}" is not this origin's authority "${this.authority}"`);
      }
      key = formatName(parsed, { canonical: true, directives: false });
      typeUrl = typeUrlOf(parsed.resourceType);
      glob = globKeyOf(parsed);
    } else {
      if (this.authority !== null) {
        throw new Error(`"${name}" is not an xdstp:// name; legacy names are only served by a --default-upstream file:// origin`);
      }
      if (name === WILDCARD) throw new Error('"*" is not a resource name');
      key = name;
    }

    const payload = this.encodePayload(entry.resource);
    if (typeUrl !== undefined && payload.typeUrl !== typeUrl) {
      throw new Error(`payload type ${payload.typeUrl} does not match the name's resource type (${typeUrl})`);
    }
    typeUrl = payload.typeUrl;

    let ttl: { duration: Duration; ms: number } | undefined;
    if (entry.ttl !== undefined && entry.ttl !== null) ttl = parseTtl(entry.ttl);
    let version: string;
    const hash = contentHash(payload, ttl?.duration);
    if (entry.version === undefined || entry.version === null) version = hash;
    else if ((typeof entry.version === 'string' && entry.version !== '') || typeof entry.version === 'number') version = String(entry.version);
    else throw new Error(`"version" must be a non-empty string, got ${JSON.stringify(entry.version)}`);

    const resource: Resource = { name: key, version, resource: { type_url: payload.typeUrl, value: payload.value } };
    if (ttl) resource.ttl = ttl.duration;
    const out: FileResource = { key, typeUrl, version, bytes: resourceCodec.encode(resource), contentHash: hash, file: rel };
    if (glob !== undefined) out.glob = glob;
    if (ttl) {
      out.ttlMs = ttl.ms;
      out.heartbeat = resourceCodec.encode({ name: key, version, ttl: ttl.duration });
    }
    return out;
  }

  /** Typed JSON (`"@type"` + fields) or an encoded Any (`type_url` + base64 `value`). */
  private encodePayload(payload: unknown): EncodedAny {
    if (!isObject(payload)) throw new Error(`"resource" must be an object with "@type", got ${JSON.stringify(payload)}`);
    if ('@type' in payload) return envoyTypes().encodeAny(payload, 'resource');
    if ('type_url' in payload) {
      const extra = Object.keys(payload).filter((k) => k !== 'type_url' && k !== 'value');
      if (extra.length > 0) throw new Error(`an encoded Any has only "type_url" and "value", not ${extra.join(', ')}`);
      const typeUrl = payload.type_url;
      const value = payload.value ?? '';
      if (typeof typeUrl !== 'string' || !typeUrl.includes('/')) throw new Error('resource.type_url must be a type URL like type.googleapis.com/envoy.config.cluster.v3.Cluster');
      if (typeof value !== 'string' || !/^[A-Za-z0-9+/\-_\s]*={0,2}\s*$/.test(value)) throw new Error('resource.value must be base64');
      return { typeUrl, value: Buffer.from(value.replace(/\s+/g, ''), 'base64') };
    }
    throw new Error('"resource" needs "@type" (typed JSON) or "type_url" + "value" (base64 Any)');
  }
}
