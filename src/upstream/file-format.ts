/**
 * The file format of a file:// origin (file-origin.ts). Every `*.yaml`,
 * `*.yml` and `*.json` file under DIR (recursively; names starting with '.'
 * are skipped) holds one or more resources. A file is one of: a single
 * resource, a list of resources, or `{resources: [...]}`; a YAML file may
 * also hold several `---` documents of those forms.
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
 */
import { createHash } from 'node:crypto';
import YAML from 'yaml';
import { resourceCodec, type Duration, type Resource } from '../proto/messages';
import { WILDCARD } from '../proto/xds-names';
import { envoyTypes, TypedJsonError, type EncodedAny } from '../typed-json/envoy-types';
import { formatName, globKeyOf, isXdstpName, parseUrn, typeUrlOf, XdstpNameError } from '../xdstp';

const RESOURCE_KEYS = new Set(['name', 'version', 'ttl', 'resource']);

/** One resource as loaded from a file, ready to hand to the engine. */
export interface FileResource {
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

/** A rejected file: every problem found in it, one per resource where possible. */
export class FileRejected extends Error {
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
 * The resources of one file (`rel`, relative to the directory), by type URL and
 * key; throws FileRejected listing every problem. `authority`: the origin's
 * (null: the default upstream, legacy names only).
 */
export function parseFile(rel: string, text: string, authority: string | null): Map<string, FileResource> {
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
      const r = parseResource(rel, entry, authority);
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

function parseResource(rel: string, entry: unknown, authority: string | null): FileResource {
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
    if (authority === null) {
      throw new Error('xdstp:// names belong in an --authority origin; this directory is the default upstream (legacy names only)');
    }
    const parsed = parseUrn(name);
    if (parsed.authority !== authority) {
      throw new Error(`authority "${parsed.authority}" is not this origin's authority "${authority}"`);
    }
    key = formatName(parsed, { canonical: true, directives: false });
    typeUrl = typeUrlOf(parsed.resourceType);
    glob = globKeyOf(parsed);
  } else {
    if (authority !== null) {
      throw new Error(`"${name}" is not an xdstp:// name; legacy names are only served by a --default-upstream file:// origin`);
    }
    if (name === WILDCARD) throw new Error('"*" is not a resource name');
    key = name;
  }

  const payload = encodePayload(entry.resource);
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
function encodePayload(payload: unknown): EncodedAny {
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
