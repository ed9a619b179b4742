/**
 * A small, independent implementation of the xdstp:// canonical-name and glob
 * rules from XDSTP.md, used by the test origin as its oracle. It deliberately
 * does not import src/xdstp/ so that the tests never judge the relay with the
 * relay's own code.
 */

export const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
export const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
export const ROUTE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
export const ENDPOINT = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
export const LISTENER_COLLECTION = 'type.googleapis.com/envoy.config.listener.v3.ListenerCollection';

export const TTL_FEATURE = 'xds.config.supports-resource-ttl';

/** The resource type part of a type URL (`envoy.config.listener.v3.Listener`). */
export function typeName(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
}

/** `xdstp://{authority}/{type of typeUrl}/{rest}`. */
export function xdstp(authority: string, typeUrl: string, rest: string): string {
  return `xdstp://${authority}/${typeName(typeUrl)}/${rest}`;
}

export function isXdstp(name: string): boolean {
  return name.startsWith('xdstp:');
}

const AUTHORITY_RESERVED = '%/?#';
const PATH_RESERVED = '%?#[]';
const PARAM_RESERVED = '%#[]&=';

function decode(text: string): Buffer {
  const src = Buffer.from(text, 'utf8');
  const out: number[] = [];
  const isHex = (b: number | undefined): boolean =>
    b !== undefined &&
    ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));
  for (let i = 0; i < src.length; i++) {
    const b = src[i]!;
    if (b === 0x25 && isHex(src[i + 1]) && isHex(src[i + 2])) {
      out.push(parseInt(String.fromCharCode(src[i + 1]!, src[i + 2]!), 16));
      i += 2;
    } else {
      out.push(b);
    }
  }
  return Buffer.from(out);
}

function encode(bytes: Buffer, reserved: string): string {
  let s = '';
  for (const b of bytes) {
    const ch = String.fromCharCode(b);
    if (b < 0x20 || b >= 0x7e || reserved.includes(ch)) {
      s += '%' + b.toString(16).toUpperCase().padStart(2, '0');
    } else {
      s += ch;
    }
  }
  return s;
}

export interface ParsedName {
  authority: Buffer;
  type: string;
  id: Buffer;
  /** Encoded `key=value` strings in canonical (byte) order. */
  params: string[];
}

export function parseName(name: string): ParsedName {
  if (!name.startsWith('xdstp://')) throw new Error(`not an xdstp name: ${name}`);
  const rest = name.slice('xdstp://'.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw new Error('resource type missing');
  const authority = decode(rest.slice(0, slash));
  const pathAndQuery = rest.slice(slash + 1);
  const q = pathAndQuery.indexOf('?');
  const path = q < 0 ? pathAndQuery : pathAndQuery.slice(0, q);
  const query = q < 0 ? '' : pathAndQuery.slice(q + 1);
  const segments = path.split('/');
  const type = segments[0]!;
  if (type === '') throw new Error('resource type missing');
  const id = decode(segments.slice(1).join('/'));
  const seen = new Set<string>();
  const params: string[] = [];
  for (const part of query.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const key = decode(eq < 0 ? part : part.slice(0, eq));
    const value = decode(eq < 0 ? '' : part.slice(eq + 1));
    const k = key.toString('latin1');
    if (seen.has(k)) continue;
    seen.add(k);
    params.push(`${encode(key, PARAM_RESERVED)}=${encode(value, PARAM_RESERVED)}`);
  }
  params.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  return { authority, type, id, params };
}

function render(p: ParsedName): string {
  const id = p.id.length > 0 ? `/${encode(p.id, PATH_RESERVED)}` : '';
  const query = p.params.length > 0 ? `?${p.params.join('&')}` : '';
  return `xdstp://${encode(p.authority, AUTHORITY_RESERVED)}/${p.type}${id}${query}`;
}

/** The canonical form of an xdstp name; throws on a malformed one. */
export function canonical(name: string): string {
  return render(parseName(name));
}

/** Canonical form for xdstp names, the name itself otherwise (legacy names are opaque). */
export function keyOf(name: string): string {
  if (!isXdstp(name)) return name;
  try {
    return canonical(name);
  } catch {
    return name;
  }
}

export function authorityOf(name: string): string {
  return parseName(name).authority.toString('utf8');
}

/** True when the (canonical) id is `*` or ends in `/*`. */
export function isGlob(name: string): boolean {
  if (!isXdstp(name)) return false;
  try {
    const id = parseName(name).id.toString('latin1');
    return id === '*' || id.endsWith('/*');
  } catch {
    return false;
  }
}

/** The canonical glob a URN is a direct member of. */
export function globKeyOf(urn: string): string {
  const p = parseName(urn);
  const id = p.id.toString('latin1');
  const slash = id.lastIndexOf('/');
  const globId = slash < 0 ? '*' : `${id.slice(0, slash)}/*`;
  return render({ ...p, id: Buffer.from(globId, 'latin1') });
}

export function matchesGlob(urn: string, glob: string): boolean {
  try {
    return globKeyOf(urn) === canonical(glob);
  } catch {
    return false;
  }
}

/**
 * Does a subscription (as a client spelled it) cover a resource name?
 * `*` covers every legacy (non-xdstp) name; an xdstp glob covers its direct
 * members with the exact same context parameters; anything else covers only
 * itself (canonically, for xdstp names).
 */
export function subscriptionCovers(sub: string, name: string): boolean {
  if (sub === '*') return !isXdstp(name);
  if (isXdstp(sub)) {
    if (!isXdstp(name)) return false;
    try {
      if (isGlob(sub)) return matchesGlob(name, sub);
      return canonical(sub) === canonical(name);
    } catch {
      return false;
    }
  }
  return sub === name;
}
