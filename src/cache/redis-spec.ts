/**
 * Where the shared tier lives: the Redis connection string (standalone,
 * Sentinel or Cluster) and what it parses to.
 */
import type { ConnectionOptions as TlsOptions } from 'node:tls';

export interface RedisSentinelSpec {
  sentinels: Array<{ host: string; port: number }>;
  /** Master group name as configured in the sentinels. */
  name: string;
  db?: number;
}

/** The connection part of RedisStoreOptions: one of `url`, `cluster`, `sentinel`, and credentials. */
export interface ParsedRedisSpec {
  /** `redis://[[user]:password@]host[:port][/db]` or `rediss://…` (TLS). */
  url?: string;
  /** Redis Cluster seed nodes, `host:port` each (`[v6addr]:port` for IPv6). */
  cluster?: string[];
  sentinel?: RedisSentinelSpec;
  /** Auth for the data nodes (cluster / sentinel-managed master); a `url` carries its own. */
  username?: string;
  password?: string;
  /** TLS towards the data nodes (and sentinels). `rediss://` implies `true`. */
  tls?: boolean | TlsOptions;
}

/**
 * Parses a Redis connection string. Accepted forms:
 *
 *   redis://[[user]:password@]host[:port][/db]            standalone
 *   rediss://…                                            standalone over TLS
 *   redis+sentinel://[[user:]password@]host:port[,host:port…]/mastername[/db]
 *   rediss+sentinel://…                                   sentinel, TLS to sentinels and master
 *   redis+cluster://[[user:]password@]host:port[,host:port…]
 *   rediss+cluster://…                                    cluster over TLS
 *   host:port[,host:port…]                                cluster seed nodes (bare list)
 *
 * In the sentinel and cluster forms a userinfo without `:` is a password
 * (not a user name); it authenticates to the data nodes. Sentinels needing
 * their own password get it via `opts.sentinelPassword`. Ports default to 26379
 * for sentinels and 6379 otherwise; IPv6 hosts go in brackets (`[::1]:6379`).
 * Userinfo parts are percent-decoded. A string[] is a cluster node list.
 * (test/redis-sentinel.test.ts runs the sentinel form against real
 * redis-sentinel processes through a failover; a `requirepass` master was
 * checked by hand.)
 */
export function parseRedisSpec(spec: string | string[]): ParsedRedisSpec {
  if (Array.isArray(spec)) return { cluster: spec.map((s) => s.trim()).filter(Boolean) };
  const s = spec.trim();
  if (/^rediss?:\/\//i.test(s)) return { url: s };
  const m = /^(rediss?)\+(sentinel|cluster):\/\/(.*)$/i.exec(s);
  if (!m) {
    if (/^[^/]+:\d+(,[^/]+:\d+)*$/.test(s)) return { cluster: s.split(',').map((h) => h.trim()) };
    throw new Error(`unsupported redis address ${JSON.stringify(spec)} (expected redis://, rediss://, redis+sentinel://, redis+cluster:// or host:port,…)`);
  }
  const tls = m[1]!.toLowerCase() === 'rediss';
  const kind = m[2]!.toLowerCase();
  let rest = m[3]!;
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  rest = slash < 0 ? '' : rest.slice(slash + 1);
  const at = authority.lastIndexOf('@');
  const hosts = (at < 0 ? authority : authority.slice(at + 1)).split(',').map((h) => h.trim()).filter(Boolean);
  if (hosts.length === 0) throw new Error(`redis address without hosts: ${JSON.stringify(spec)}`);
  const auth: Pick<ParsedRedisSpec, 'username' | 'password'> = {};
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(':');
    if (colon < 0) auth.password = decodeURIComponent(userinfo);
    else {
      if (colon > 0) auth.username = decodeURIComponent(userinfo.slice(0, colon));
      auth.password = decodeURIComponent(userinfo.slice(colon + 1));
    }
  }
  const base: ParsedRedisSpec = { ...auth, ...(tls ? { tls: true } : {}) };
  if (kind === 'cluster') {
    if (rest.replace(/\/+$/, '') !== '') throw new Error(`redis+cluster address takes no path: ${JSON.stringify(spec)}`);
    return { ...base, cluster: hosts };
  }
  const [name, db, ...extra] = rest.split('/').filter((x, i) => x !== '' || i === 0);
  if (!name) throw new Error(`redis+sentinel address needs /mastername: ${JSON.stringify(spec)}`);
  if (extra.length > 0 || (db !== undefined && !/^\d+$/.test(db))) {
    throw new Error(`redis+sentinel path must be /mastername[/db]: ${JSON.stringify(spec)}`);
  }
  return {
    ...base,
    sentinel: {
      sentinels: hosts.map(parseHostPort(26379)),
      name: decodeURIComponent(name),
      ...(db !== undefined ? { db: Number(db) } : {}),
    },
  };
}

export function parseHostPort(defaultPort: number): (s: string) => { host: string; port: number } {
  return (s) => {
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(s) ?? /^([^:]+)(?::(\d+))?$/.exec(s);
    if (!m) throw new Error(`bad redis node address ${JSON.stringify(s)} (host:port, [v6]:port)`);
    return { host: m[1]!, port: m[2] ? Number(m[2]) : defaultPort };
  };
}
