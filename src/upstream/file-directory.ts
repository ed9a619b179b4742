/**
 * The directory of a file:// origin: which files it holds, their last good
 * resources merged by type, and the watching that notices changes. The
 * directory is watched (fs.watch per directory, debounced, plus the origin's
 * slow stat poll as a safety net) and every change triggers a full rescan
 * that re-reads only files whose mtime / size / inode changed. A file is
 * accepted or rejected as a whole: a file that fails to parse or encode is
 * logged (file, resource, reason) and the last good version of its resources
 * keeps being served.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from '../log';
import { envoyTypes, envoyTypesLoaded } from '../typed-json/envoy-types';
import { FileRejected, parseFile, type FileResource } from './file-format';

const FILE_EXTENSIONS = new Set(['.yaml', '.yml', '.json']);
/**
 * File timestamps tick coarsely (a few ms on Linux), so a file written again
 * within the same tick, at the same size, keeps its stat signature. A file
 * modified this recently is read again on the next scan ("racy git").
 */
const RACY_MS = 1000;

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

export interface ResourceDirectoryOptions {
  /** Absolute path of the directory. */
  dir: string;
  /** The origin's authority (null: the default upstream). */
  authority: string | null;
  /** The authority as logged. */
  label: string;
  logger: Logger;
  /** Quiet time after the last file event before `onChange`. */
  debounceMs: number;
  /** Files changed (debounced): the origin rescans. */
  onChange(): void;
}

export class ResourceDirectory {
  private readonly files = new Map<string, FileState>();
  /** Merged view of every file's last good resources: type URL → key → resource. */
  byType = new Map<string, Map<string, FileResource>>();
  /** type URL → glob key → member keys. */
  globs = new Map<string, Map<string, Set<string>>>();
  private readonly watchers = new Map<string, fs.FSWatcher>();
  private rescanTimer: NodeJS.Timeout | undefined;
  private dirMissing = false;
  private protosLogged = false;
  private closed = false;

  constructor(private readonly opts: ResourceDirectoryOptions) {}

  get fileCount(): number {
    return this.files.size;
  }

  /** Files whose current content is rejected, and why. */
  get rejected(): Array<{ file: string; error: string }> {
    const rejected: Array<{ file: string; error: string }> = [];
    for (const [file, s] of this.files) if (s.error !== undefined) rejected.push({ file, error: s.error });
    return rejected;
  }

  /** Stops watching. */
  close(): void {
    this.closed = true;
    clearTimeout(this.rescanTimer);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }

  /** Walks the directory; re-reads changed files. Returns true when the merged view changed. */
  rescan(initial: boolean): boolean {
    const found = new Map<string, fs.Stats>();
    const dirs: string[] = [];
    if (!this.walk(this.opts.dir, found, dirs)) {
      if (!this.dirMissing) {
        this.dirMissing = true;
        this.opts.logger.warn({ authority: this.opts.label, dir: this.opts.dir }, 'file origin directory is gone; serving the last good state');
      }
      return false;
    }
    if (this.dirMissing) {
      this.dirMissing = false;
      this.opts.logger.info({ authority: this.opts.label, dir: this.opts.dir }, 'file origin directory is back');
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
    const log = { authority: this.opts.label, dir: this.opts.dir, files: this.files.size, resources, rejected };
    if (initial) this.opts.logger.info(log, 'file origin loaded');
    else this.opts.logger.info({ ...log, changed, deleted }, 'file origin updated');
    this.logProtoLoad();
    return true;
  }

  private logProtoLoad(): void {
    if (this.protosLogged || !envoyTypesLoaded()) return;
    this.protosLogged = true;
    const { files, loadMs } = envoyTypes().stats;
    this.opts.logger.info({ authority: this.opts.label, protoFiles: files, loadMs }, 'envoy API protos loaded for typed JSON');
  }

  /** Collects resource files and directories; false when the root itself is unreadable. */
  private walk(dir: string, found: Map<string, fs.Stats>, dirs: string[]): boolean {
    let entries: string[];
    try {
      entries = fs.readdirSync(dir);
    } catch {
      return dir !== this.opts.dir;
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
        found.set(path.relative(this.opts.dir, full).split(path.sep).join('/'), st);
      }
    }
    return true;
  }

  private syncWatchers(dirs: string[]): void {
    if (this.closed) return;
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
        this.opts.logger.debug({ authority: this.opts.label, dir, err: (err as Error).message }, 'cannot watch directory; relying on polling');
      }
    }
  }

  /** Reads one file into `state`. Returns true when its good content changed. */
  private load(rel: string, state: FileState): boolean {
    let text: string;
    try {
      text = fs.readFileSync(path.join(this.opts.dir, rel), 'utf8');
    } catch (err) {
      // Vanished or unreadable mid-scan: the next event or poll sorts it out.
      this.opts.logger.debug({ authority: this.opts.label, file: rel, err: (err as Error).message }, 'file unreadable');
      state.sig = '';
      return false;
    }
    const textHash = createHash('sha256').update(text).digest('hex');
    if (textHash === state.textHash) return false;
    state.textHash = textHash;
    try {
      const resources = parseFile(rel, text, this.opts.authority);
      const before = state.good;
      state.good = resources;
      const wasBad = state.error !== undefined;
      state.error = undefined;
      if (wasBad) this.opts.logger.info({ authority: this.opts.label, file: rel, resources: resources.size }, 'file accepted again');
      this.warnSameVersion(before, resources);
      return true;
    } catch (err) {
      const problems =
        err instanceof FileRejected ? err.problems : [{ resource: '', reason: (err as Error).message }];
      state.error = problems.map((p) => (p.resource ? `${p.resource}: ${p.reason}` : p.reason)).join('; ');
      const keeping = state.good?.size ?? 0;
      for (const p of problems) {
        this.opts.logger.error(
          { authority: this.opts.label, file: rel, resource: p.resource || undefined, reason: p.reason, servingLastGood: keeping },
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
          { authority: this.opts.label, file: r.file, resource: r.key, version: r.version },
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
          this.opts.logger.warn({ authority: this.opts.label, resource: r.key, file: r.file, keptFrom: existing.file }, 'resource defined in two files; ignoring the later one');
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

  private scheduleRescan(): void {
    if (this.closed) return;
    clearTimeout(this.rescanTimer);
    this.rescanTimer = setTimeout(() => {
      this.rescanTimer = undefined;
      this.opts.onChange();
    }, this.opts.debounceMs);
  }
}
