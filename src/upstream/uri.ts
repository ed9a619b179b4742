import * as path from 'node:path';
import { splitHostPort } from '../address';

/** A parsed upstream URI: `grpc://host:port` or `file://DIR`. */
export type UpstreamUri = { scheme: 'grpc'; target: string } | { scheme: 'file'; path: string };

export class UpstreamUriError extends Error {}

export function parseUpstreamUri(uri: string): UpstreamUri {
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/i.exec(uri);
  if (!m) throw new UpstreamUriError(`"${uri}" is not a URI (expected grpc://host:port or file://DIR)`);
  const scheme = m[1].toLowerCase();
  const rest = m[2];
  if (scheme === 'grpc') {
    const target = rest.endsWith('/') ? rest.slice(0, -1) : rest;
    if (target.includes('/') || splitHostPort(target) === undefined) throw new UpstreamUriError(`"${uri}": expected grpc://host:port`);
    return { scheme: 'grpc', target };
  }
  if (scheme === 'file') {
    if (rest === '') throw new UpstreamUriError(`"${uri}": file:// needs a directory`);
    return { scheme: 'file', path: rest };
  }
  throw new UpstreamUriError(`"${uri}": unsupported scheme ${scheme}:// (use grpc:// or file://)`);
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

/**
 * Makes relative `file://` URIs in a config file's `authority` and
 * `default-upstream` values relative to the config file's directory (rather
 * than to wherever the relay happens to be started). Accepts every shape the
 * options take: `NAME=URI[,URI…]` strings, lists of them, `{NAME: URI | [URI…]}` maps.
 */
export function rebaseConfigFileUris(options: Record<string, unknown>, baseDir: string): Record<string, unknown> {
  const rebaseAuthority = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const eq = v.indexOf('=');
      return eq < 0 ? v : `${v.slice(0, eq + 1)}${rebaseList(v.slice(eq + 1), baseDir)}`;
    }
    if (Array.isArray(v)) return v.map(rebaseAuthority);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [name, uris] of Object.entries(v as Record<string, unknown>)) {
        if (typeof uris === 'string') out[name] = rebaseList(uris, baseDir);
        else if (Array.isArray(uris)) out[name] = uris.map((u) => (typeof u === 'string' ? rebaseFileUri(u, baseDir) : u));
        else out[name] = uris;
      }
      return out;
    }
    return v;
  };
  const rebaseUpstream = (v: unknown): unknown => {
    if (typeof v === 'string') return rebaseList(v, baseDir);
    if (Array.isArray(v)) return v.map((u) => (typeof u === 'string' ? rebaseList(u, baseDir) : u));
    return v;
  };
  const out: Record<string, unknown> = { ...options };
  if ('authority' in out) out.authority = rebaseAuthority(out.authority);
  for (const key of ['default-upstream', 'defaultUpstream']) if (key in out) out[key] = rebaseUpstream(out[key]);
  return out;
}
