import * as path from 'node:path';
import { splitHostPort } from './address';

/** A parsed upstream URI: `grpc://host:port`, `grpcs://host:port` (TLS) or `file://DIR`. */
export type UpstreamUri = { scheme: 'grpc' | 'grpcs'; target: string } | { scheme: 'file'; path: string };

export class UpstreamUriError extends Error {}

export function parseUpstreamUri(uri: string): UpstreamUri {
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/i.exec(uri);
  if (!m) throw new UpstreamUriError(`"${uri}" is not a URI (expected grpc://host:port, grpcs://host:port or file://DIR)`);
  const scheme = m[1].toLowerCase();
  const rest = m[2];
  if (scheme === 'grpc' || scheme === 'grpcs') {
    const target = rest.endsWith('/') ? rest.slice(0, -1) : rest;
    if (target.includes('/') || splitHostPort(target) === undefined) throw new UpstreamUriError(`"${uri}": expected ${scheme}://host:port`);
    return { scheme, target };
  }
  if (scheme === 'file') {
    if (rest === '') throw new UpstreamUriError(`"${uri}": file:// needs a directory`);
    return { scheme: 'file', path: rest };
  }
  throw new UpstreamUriError(`"${uri}": unsupported scheme ${scheme}:// (use grpc://, grpcs:// or file://)`);
}

/** `file://REL` → `file:///abs/REL` against `baseDir`; every other URI unchanged. */
export function rebaseFileUri(uri: string, baseDir: string): string {
  const m = /^file:\/\/(.*)$/i.exec(uri.trim());
  if (!m || m[1] === '' || path.isAbsolute(m[1])) return uri;
  return `file://${path.resolve(baseDir, m[1])}`;
}

function rebaseList(list: string, baseDir: string): string {
  return list
    .split(',')
    .map((u) => rebaseFileUri(u, baseDir))
    .join(',');
}

/** A relative file path → absolute against `baseDir`; anything else unchanged. */
function rebasePath(v: unknown, baseDir: string): unknown {
  return typeof v === 'string' && v.trim() !== '' && !path.isAbsolute(v.trim()) ? path.resolve(baseDir, v.trim()) : v;
}

/** Config-file keys naming files (TLS material, policy, admin token). */
const FILE_KEYS = ['tls-cert', 'tls-key', 'tls-client-ca', 'upstream-tls-ca', 'upstream-tls-cert', 'upstream-tls-key', 'policy', 'admin-token'];
/** File keys of the `authority: { NAME: { servers, ca, cert, key } }` form. */
const AUTHORITY_FILE_KEYS = ['ca', 'cert', 'key'];

/**
 * Makes relative paths in a config file relative to the config file's
 * directory (rather than to wherever the relay happens to be started):
 * `file://` URIs in `authority` and `default-upstream`, the TLS, policy and
 * admin-token files, and an authority's `ca/cert/key`. Accepts every shape
 * the options take: `NAME=URI[,URI…]` strings, lists of them,
 * `{NAME: URI | [URI…] | {servers, ca, cert, key, server-name}}` maps.
 */
export function rebaseConfigFileUris(options: Record<string, unknown>, baseDir: string): Record<string, unknown> {
  /** A URI list value: `URI[,URI…]` or a list of them. */
  const rebaseUris = (v: unknown): unknown => {
    if (typeof v === 'string') return rebaseList(v, baseDir);
    if (Array.isArray(v)) return v.map((u) => (typeof u === 'string' ? rebaseList(u, baseDir) : u));
    return v;
  };
  const rebaseAuthority = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const eq = v.indexOf('=');
      return eq < 0 ? v : `${v.slice(0, eq + 1)}${rebaseList(v.slice(eq + 1), baseDir)}`;
    }
    if (Array.isArray(v)) return v.map(rebaseAuthority);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(v as Record<string, unknown>)) {
        if (value && typeof value === 'object' && !Array.isArray(value)) {
          const spec: Record<string, unknown> = { ...(value as Record<string, unknown>) };
          if ('servers' in spec) spec.servers = rebaseUris(spec.servers);
          for (const k of AUTHORITY_FILE_KEYS) if (k in spec) spec[k] = rebasePath(spec[k], baseDir);
          out[name] = spec;
        } else out[name] = rebaseUris(value);
      }
      return out;
    }
    return v;
  };
  const out: Record<string, unknown> = { ...options };
  if ('authority' in out) out.authority = rebaseAuthority(out.authority);
  for (const key of ['default-upstream', 'defaultUpstream']) if (key in out) out[key] = rebaseUris(out[key]);
  for (const key of FILE_KEYS) if (key in out) out[key] = rebasePath(out[key], baseDir);
  return out;
}
