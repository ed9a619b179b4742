import * as fs from 'node:fs';
import { isWildcardHost, splitHostPort } from './address';
import { parseRedisSpec } from './cache/redis-spec';
import { DEFAULT_PREFIX, validatePrefix } from './cache/redis-keys';
import { isLogLevel, LOG_LEVELS } from './log';
import { parseUpstreamUri } from './upstream-uri';
import { checkSecurity, type SecurityRawOptions, type SecuritySettings } from './security/config';
import type { UpstreamTlsSpec } from './security/tls';

/**
 * Every default of the relay's options, in one place. Only this module reads
 * it: resolveConfig and validateOptions fill a configuration in from it, and
 * flagDefaults hands the command line the same values by flag name.
 */
const DEFAULTS = {
  listen: '0.0.0.0:18000',
  admin: '0.0.0.0:9901',
  unsubscribeGraceMs: 30_000,
  logLevel: 'info',
  /** A repeated warning (same stream or source, same reason) is summarized at most this often. */
  logRepeatIntervalMs: 10_000,
  drainPeriodMs: 10_000,
  shutdownGraceMs: 5000,
  redisWarmTimeoutMs: 5000,
  maxConnectionAgeGraceMs: 10_000,
  /** gRPC's default receive limit, so every client can take every response. */
  maxResponseBytes: 4 * 1024 * 1024,
  maxRequestBytes: 16 * 1024 * 1024,
  /** A relay that stops heartbeating leaves the fleet (docs/fleet-status.md) within this many ms. */
  fleetHeartbeatTtlMs: 5000,
} as const;

/** The default of every command-line flag that has one, by flag name (the parser's fallbacks and its help text). */
export function flagDefaults() {
  return {
    listen: DEFAULTS.listen,
    admin: DEFAULTS.admin,
    'unsubscribe-grace': DEFAULTS.unsubscribeGraceMs,
    'log-level': DEFAULTS.logLevel,
    'log-repeat-interval': DEFAULTS.logRepeatIntervalMs,
    'drain-period': DEFAULTS.drainPeriodMs,
    'shutdown-grace': DEFAULTS.shutdownGraceMs,
    'redis-prefix': DEFAULT_PREFIX,
    'redis-warm-timeout': DEFAULTS.redisWarmTimeoutMs,
    'fleet-heartbeat-ttl': DEFAULTS.fleetHeartbeatTtlMs,
    'max-connection-age-grace': DEFAULTS.maxConnectionAgeGraceMs,
    'max-response-bytes': DEFAULTS.maxResponseBytes,
    'max-request-bytes': DEFAULTS.maxRequestBytes,
  } as const;
}

/** One upstream authority: its name and the ordered list of servers that speak for it. */
export interface AuthoritySpec {
  /** The xdstp authority, e.g. `some-authority`. */
  name: string;
  /** Server URIs in failover order: `grpc://host:port`, `grpcs://host:port` or `file://DIR`. */
  uris: string[];
  /** TLS for its `grpcs://` servers (the authority's own settings over the `--upstream-tls-*` defaults). */
  tls?: UpstreamTlsSpec;
}

/**
 * A relay's configuration with every default filled in: what validateOptions
 * returns and what startRelay works from. Callers that may leave defaulted
 * fields out build a RelayConfigInput and have resolveConfig fill it.
 */
export interface RelayConfig {
  /** Downstream delta-ADS listen address, `HOST:PORT` (port 0 picks a free one). */
  listen: string;
  /** Admin HTTP address `HOST:PORT`, or null to disable the admin server. */
  admin: string | null;
  authorities: AuthoritySpec[];
  /** Servers for non-xdstp (legacy) names, or null when legacy names are refused. */
  defaultUpstream: string[] | null;
  /** How long an upstream subscription outlives its last client, in ms (0 = immediate). */
  unsubscribeGraceMs: number;
  /** The node id the relay presents upstream. */
  nodeId: string;
  logLevel: string;
  /** Repeated warnings caused by clients are summarized at most once per this many ms (default 10000). */
  logRepeatIntervalMs: number;
  /** POST /drain spreads the GOAWAYs over this many ms (default 10000). */
  drainPeriodMs: number;
  /** On shutdown, how long in-flight writes may take before connections are cut, in ms (default 5000). */
  shutdownGraceMs: number;
  /** The shared Redis tier (`--redis` / `--redis-cluster`); null = memory only. */
  redis: RedisSettings | null;
  /** Client connections get GOAWAY after about this many ms (grpc-js adds ±10 % jitter); null = never. */
  maxConnectionAgeMs: number | null;
  /** After that GOAWAY, streams still open are cut after this many ms (default 10000). */
  maxConnectionAgeGraceMs: number;
  /** No response to a client exceeds this (larger sets are split; default 4 MiB); also bounds requests upstream. */
  maxResponseBytes: number;
  /** A client request larger than this ends its stream with RESOURCE_EXHAUSTED (default 16 MiB). */
  maxRequestBytes: number;
  /**
   * TLS, authorization policy, admin token and limits (src/security/config.ts),
   * as validation always sets them. Null (a relay started in-process without
   * them) = plaintext, no policy, no admin token, connection limits at their
   * defaults and no per-stream limits.
   */
  security: SecuritySettings | null;
  /**
   * `--advertise HOST:PORT`: where the other relays of the fleet reach this
   * one (docs/fleet-status.md); null = POD_IP with the listen port, else the
   * listen address when it is not a wildcard.
   */
  advertise: string | null;
}

export interface RedisSettings {
  /** Connection string for createRedisStore: redis://, rediss://, redis+sentinel://, redis+cluster://. */
  spec: string;
  /** Prefix of every key (default `xdstp-relay:`); deployments sharing one Redis use different ones. */
  prefix: string;
  /** Time a starting relay may spend loading Redis into memory, in ms (default 5000; 0 = no warm start). */
  warmTimeoutMs: number;
  /** TTL of this relay's fleet membership record, in ms; it heartbeats at a third of it (default 5000). */
  fleetHeartbeatTtlMs: number;
}

/** The fields of RelayConfig that have a default (or mean "none" when absent). */
type Defaulted =
  | 'logRepeatIntervalMs'
  | 'drainPeriodMs'
  | 'shutdownGraceMs'
  | 'redis'
  | 'maxConnectionAgeMs'
  | 'maxConnectionAgeGraceMs'
  | 'maxResponseBytes'
  | 'maxRequestBytes'
  | 'security'
  | 'advertise';

/** RedisSettings as a caller may give them: the timings may be left to their defaults. */
export type RedisSettingsInput = Omit<RedisSettings, 'warmTimeoutMs' | 'fleetHeartbeatTtlMs'> & Partial<Pick<RedisSettings, 'warmTimeoutMs' | 'fleetHeartbeatTtlMs'>>;

/** A configuration as startRelay accepts it (tests, benchmarks, embedders): defaulted fields may be absent. */
export type RelayConfigInput = Omit<RelayConfig, Defaulted> &
  Partial<Omit<Pick<RelayConfig, Defaulted>, 'redis'>> & { redis?: RedisSettingsInput | null };

/** The configuration with every absent default filled in; a resolved configuration comes back equal. */
export function resolveConfig(input: RelayConfigInput): RelayConfig {
  return {
    ...input,
    logRepeatIntervalMs: input.logRepeatIntervalMs ?? DEFAULTS.logRepeatIntervalMs,
    drainPeriodMs: input.drainPeriodMs ?? DEFAULTS.drainPeriodMs,
    shutdownGraceMs: input.shutdownGraceMs ?? DEFAULTS.shutdownGraceMs,
    redis: input.redis
      ? {
          ...input.redis,
          warmTimeoutMs: input.redis.warmTimeoutMs ?? DEFAULTS.redisWarmTimeoutMs,
          fleetHeartbeatTtlMs: input.redis.fleetHeartbeatTtlMs ?? DEFAULTS.fleetHeartbeatTtlMs,
        }
      : null,
    maxConnectionAgeMs: input.maxConnectionAgeMs ?? null,
    maxConnectionAgeGraceMs: input.maxConnectionAgeGraceMs ?? DEFAULTS.maxConnectionAgeGraceMs,
    maxResponseBytes: input.maxResponseBytes ?? DEFAULTS.maxResponseBytes,
    maxRequestBytes: input.maxRequestBytes ?? DEFAULTS.maxRequestBytes,
    security: input.security ?? null,
    advertise: input.advertise ?? null,
  };
}

/**
 * The warm-start budget of a shared store that came without RedisSettings
 * (one an in-process caller hands startRelay): what `--redis` has by default.
 */
export function sharedWarmTimeoutMs(): number {
  return DEFAULTS.redisWarmTimeoutMs;
}

/** A configuration problem, with where it was found (flag or config-file path). */
export class ConfigError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
  }
}

const AUTHORITY_NAME = /^[^\s/?#=,]*$/;

/** Raw option values as they come from flags, env or the config file. */
export interface RawOptions extends SecurityRawOptions {
  listen?: unknown;
  admin?: unknown;
  authority?: unknown;
  defaultUpstream?: unknown;
  unsubscribeGrace?: unknown;
  nodeId?: unknown;
  logLevel?: unknown;
  logRepeatInterval?: unknown;
  drainPeriod?: unknown;
  shutdownGrace?: unknown;
  redis?: unknown;
  redisCluster?: unknown;
  redisPrefix?: unknown;
  redisWarmTimeout?: unknown;
  fleetHeartbeatTtl?: unknown;
  advertise?: unknown;
  maxConnectionAge?: unknown;
  maxConnectionAgeGrace?: unknown;
  maxResponseBytes?: unknown;
  maxRequestBytes?: unknown;
}

/** Hides the password of a connection string in messages. */
function redactUserinfo(s: string): string {
  return s.replace(/\/\/[^/]*@/g, '//***@').replace(/^[^/]*@/, '***@');
}

function unset(v: unknown): boolean {
  return v === undefined || v === null || v === '' || v === false;
}

/** `--redis URL` or `--redis-cluster host:port,…`, `--redis-prefix`, `--redis-warm-timeout`. */
function checkRedis(raw: RawOptions, problems: ConfigError[]): RedisSettings | null {
  if (unset(raw.redis) && unset(raw.redisCluster)) return null;
  let path = 'redis';
  let spec: string | undefined;
  if (!unset(raw.redis) && !unset(raw.redisCluster)) {
    problems.push(new ConfigError('redis-cluster', 'give either --redis or --redis-cluster, not both'));
  } else if (!unset(raw.redis)) {
    const url = typeof raw.redis === 'string' ? raw.redis.trim() : undefined;
    if (url === undefined) problems.push(new ConfigError(path, 'expected a URL'));
    else if (!/^rediss?(\+(sentinel|cluster))?:\/\//i.test(url)) {
      problems.push(
        new ConfigError(
          path,
          `expected redis://, rediss://, redis+sentinel:// or redis+cluster://, got ${JSON.stringify(redactUserinfo(url))} (cluster seed nodes as host:port,… go in --redis-cluster)`,
        ),
      );
    } else spec = url;
  } else {
    path = 'redis-cluster';
    const list = Array.isArray(raw.redisCluster) ? raw.redisCluster.join(',') : raw.redisCluster;
    if (typeof list !== 'string') problems.push(new ConfigError(path, 'expected host:port[,host:port…]'));
    else {
      const nodes = list.split(',').map((n) => n.trim()).filter((n) => n !== '');
      const bad = nodes.filter((n) => splitHostPort(n) === undefined);
      if (nodes.length === 0) problems.push(new ConfigError(path, 'no cluster node given'));
      else if (bad.length > 0) problems.push(new ConfigError(path, `expected host:port[,host:port…], got ${bad.map((b) => JSON.stringify(b)).join(', ')}`));
      else spec = `redis+cluster://${nodes.join(',')}`;
    }
  }
  if (spec !== undefined) {
    try {
      parseRedisSpec(spec);
    } catch (err) {
      problems.push(new ConfigError(path, redactUserinfo((err as Error).message)));
      spec = undefined;
    }
  }
  const prefix = raw.redisPrefix === undefined || raw.redisPrefix === null ? DEFAULT_PREFIX : raw.redisPrefix;
  if (typeof prefix !== 'string' || prefix === '') {
    problems.push(new ConfigError('redis-prefix', `expected a non-empty string, got ${JSON.stringify(prefix)}`));
    return null;
  }
  try {
    validatePrefix(prefix);
  } catch (err) {
    problems.push(new ConfigError('redis-prefix', (err as Error).message));
    return null;
  }
  const warmTimeoutMs = checkMs('redis-warm-timeout', raw.redisWarmTimeout, DEFAULTS.redisWarmTimeoutMs, problems);
  const fleetHeartbeatTtlMs = checkMs('fleet-heartbeat-ttl', raw.fleetHeartbeatTtl, DEFAULTS.fleetHeartbeatTtlMs, problems);
  // Heartbeats go out every third of it; below that Redis round trips would eat the margin.
  if (fleetHeartbeatTtlMs >= 0 && fleetHeartbeatTtlMs < 300) problems.push(new ConfigError('fleet-heartbeat-ttl', `expected at least 300 ms, got ${fleetHeartbeatTtlMs}`));
  return spec === undefined ? null : { spec, prefix, warmTimeoutMs, fleetHeartbeatTtlMs };
}

/** setTimeout's limit, less grpc-js's +10 % jitter. */
const MAX_CONNECTION_AGE_MS = 1_900_000_000;

function checkConnectionAge(raw: RawOptions, problems: ConfigError[]): { ageMs: number | null; graceMs: number } {
  let ageMs: number | null = null;
  if (!unset(raw.maxConnectionAge)) {
    const v = Number(raw.maxConnectionAge);
    if (!Number.isInteger(v) || v < 0 || v > MAX_CONNECTION_AGE_MS) {
      problems.push(
        new ConfigError('max-connection-age', `expected milliseconds between 0 (never) and ${MAX_CONNECTION_AGE_MS}, got ${JSON.stringify(raw.maxConnectionAge)}`),
      );
    } else if (v > 0) ageMs = v;
  }
  const graceMs = checkMs('max-connection-age-grace', raw.maxConnectionAgeGrace, DEFAULTS.maxConnectionAgeGraceMs, problems);
  if (graceMs > MAX_CONNECTION_AGE_MS) problems.push(new ConfigError('max-connection-age-grace', `at most ${MAX_CONNECTION_AGE_MS} ms`));
  return { ageMs, graceMs };
}

function checkMs(path: string, raw: unknown, fallback: number, problems: ConfigError[]): number {
  const v = raw === undefined || raw === null || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(v) || v < 0) {
    problems.push(new ConfigError(path, `expected a non-negative number of milliseconds, got ${JSON.stringify(raw)}`));
  }
  return v;
}

function checkHostPort(path: string, v: unknown, problems: ConfigError[]): string | undefined {
  if (typeof v !== 'string' || splitHostPort(v) === undefined) {
    problems.push(new ConfigError(path, `expected HOST:PORT, got ${JSON.stringify(v)}`));
    return undefined;
  }
  return v;
}

/** `--advertise HOST:PORT`: an address other relays can dial (no wildcard host, no port 0). */
function checkAdvertise(raw: unknown, problems: ConfigError[]): string | null {
  if (unset(raw)) return null;
  const v = typeof raw === 'string' ? raw.trim() : raw;
  const addr = typeof v === 'string' ? splitHostPort(v) : undefined;
  if (addr === undefined) {
    problems.push(new ConfigError('advertise', `expected HOST:PORT, got ${JSON.stringify(raw)}`));
    return null;
  }
  if (isWildcardHost(addr.host) || addr.port === 0) {
    problems.push(new ConfigError('advertise', `other relays cannot dial ${JSON.stringify(v)}: give a routable host and a port`));
    return null;
  }
  return v as string;
}

function checkUris(path: string, list: string, problems: ConfigError[]): string[] {
  const uris = list.split(',').map((u) => u.trim()).filter((u) => u !== '');
  if (uris.length === 0) problems.push(new ConfigError(path, 'no upstream URI given'));
  for (const u of uris) {
    try {
      const parsed = parseUpstreamUri(u);
      // The file origin reads the directory at start and cannot begin without it.
      if (parsed.scheme === 'file') {
        let isDir = false;
        try {
          isDir = fs.statSync(parsed.path).isDirectory();
        } catch {
          problems.push(new ConfigError(path, `"${u}": no directory ${parsed.path}`));
          continue;
        }
        if (!isDir) problems.push(new ConfigError(path, `"${u}": ${parsed.path} is not a directory`));
      }
    } catch (err) {
      problems.push(new ConfigError(path, (err as Error).message));
    }
  }
  return uris;
}

/** Keys of the config-file form `NAME: { servers: [...], ca, cert, key, server-name }`. */
const AUTHORITY_OBJECT_KEYS: Record<string, keyof UpstreamTlsSpec | 'servers'> = {
  servers: 'servers',
  ca: 'caFile',
  cert: 'certFile',
  key: 'keyFile',
  'server-name': 'serverName',
};

/** `{ servers, ca, cert, key, server-name }` → its URIs and TLS settings. */
function parseAuthorityObject(path: string, v: Record<string, unknown>, problems: ConfigError[]): { uris: unknown; tls: UpstreamTlsSpec } {
  const tls: UpstreamTlsSpec = {};
  for (const [k, value] of Object.entries(v)) {
    const field = AUTHORITY_OBJECT_KEYS[k];
    if (field === undefined) {
      problems.push(new ConfigError(`${path}.${k}`, `unknown key (expected ${Object.keys(AUTHORITY_OBJECT_KEYS).join(', ')})`));
    } else if (field !== 'servers') {
      if (typeof value !== 'string' || value.trim() === '') problems.push(new ConfigError(`${path}.${k}`, `expected a ${k === 'server-name' ? 'name' : 'file path'}`));
      else tls[field] = value.trim();
    }
  }
  if (v.servers === undefined) problems.push(new ConfigError(`${path}.servers`, 'missing: the list of grpc:// or grpcs:// server URIs'));
  return { uris: v.servers, tls };
}

/**
 * Accepts `NAME=URI[,URI…]` strings (repeatable) or a map whose values are a
 * URI, a list of URIs, or `{ servers: [URI…], ca, cert, key, server-name }`.
 */
function parseAuthorities(raw: unknown, problems: ConfigError[]): AuthoritySpec[] {
  const out: AuthoritySpec[] = [];
  const add = (path: string, name: string, uris: string, tls?: UpstreamTlsSpec): void => {
    if (!AUTHORITY_NAME.test(name)) {
      problems.push(new ConfigError(path, `authority name "${name}" may not contain whitespace, / ? # = or ,`));
      return;
    }
    if (out.some((a) => a.name === name)) {
      problems.push(new ConfigError(path, `authority "${name}" is configured twice`));
      return;
    }
    const spec: AuthoritySpec = { name, uris: checkUris(path, uris, problems) };
    if (tls && Object.keys(tls).length > 0) {
      if (!spec.uris.some((u) => /^grpcs:/i.test(u))) {
        problems.push(new ConfigError(path, 'ca, cert, key and server-name apply to grpcs:// servers, and this authority has none'));
      }
      spec.tls = tls;
    }
    out.push(spec);
  };
  if (raw === undefined || raw === null) return out;
  const items = Array.isArray(raw) ? raw : [raw];
  items.forEach((item, i) => {
    const path = `authority[${i}]`;
    if (typeof item === 'string') {
      const eq = item.indexOf('=');
      if (eq < 0) {
        problems.push(new ConfigError(path, `expected NAME=URI[,URI…], got "${item}"`));
        return;
      }
      add(path, item.slice(0, eq), item.slice(eq + 1));
    } else if (item && typeof item === 'object') {
      for (const [name, value] of Object.entries(item as Record<string, unknown>)) {
        const where = `authority.${name}`;
        let uris = value;
        let tls: UpstreamTlsSpec | undefined;
        if (value && typeof value === 'object' && !Array.isArray(value)) ({ uris, tls } = parseAuthorityObject(where, value as Record<string, unknown>, problems));
        const list = Array.isArray(uris) ? uris.join(',') : uris;
        if (typeof list !== 'string') problems.push(new ConfigError(where, 'expected a URI, a list of URIs, or { servers: [URI…], ca, cert, key, server-name }'));
        else add(where, name, list, tls);
      }
    } else {
      problems.push(new ConfigError(path, `expected NAME=URI[,URI…], got ${JSON.stringify(item)}`));
    }
  });
  return out;
}

/** A positive whole number of bytes, at least `min`. */
function checkBytes(path: string, raw: unknown, fallback: number, min: number, problems: ConfigError[]): number {
  const v = raw === undefined || raw === null || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(v) || v < min) {
    problems.push(new ConfigError(path, `expected a whole number of bytes of at least ${min}, got ${JSON.stringify(raw)}`));
  }
  return v;
}

/** Validates raw options into a RelayConfig; returns every problem found, not just the first. */
export function validateOptions(raw: RawOptions, defaults: { nodeId: string }): { config?: RelayConfig; problems: ConfigError[] } {
  const problems: ConfigError[] = [];
  const listen = checkHostPort('listen', raw.listen ?? DEFAULTS.listen, problems);
  let admin: string | null = null;
  if (raw.admin !== undefined && raw.admin !== null && raw.admin !== '' && raw.admin !== false) {
    admin = checkHostPort('admin', raw.admin, problems) ?? null;
  }
  const authorities = parseAuthorities(raw.authority, problems);
  let defaultUpstream: string[] | null = null;
  if (raw.defaultUpstream !== undefined && raw.defaultUpstream !== null && raw.defaultUpstream !== '') {
    const list = Array.isArray(raw.defaultUpstream) ? raw.defaultUpstream.join(',') : raw.defaultUpstream;
    if (typeof list !== 'string') problems.push(new ConfigError('default-upstream', 'expected a URI'));
    else defaultUpstream = checkUris('default-upstream', list, problems);
  }
  const grace = Number(raw.unsubscribeGrace ?? DEFAULTS.unsubscribeGraceMs);
  if (!Number.isInteger(grace) || grace < 0) {
    problems.push(new ConfigError('unsubscribe-grace', `expected a non-negative number of milliseconds, got ${JSON.stringify(raw.unsubscribeGrace)}`));
  }
  const nodeId = raw.nodeId === undefined || raw.nodeId === '' ? defaults.nodeId : raw.nodeId;
  if (typeof nodeId !== 'string') problems.push(new ConfigError('node-id', 'expected a string'));
  const logLevel = raw.logLevel ?? DEFAULTS.logLevel;
  if (!isLogLevel(logLevel)) {
    problems.push(new ConfigError('log-level', `expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`));
  }
  const logRepeatIntervalMs = checkMs('log-repeat-interval', raw.logRepeatInterval, DEFAULTS.logRepeatIntervalMs, problems);
  // Shorter would let a busy client turn every few of its requests into a summary line again.
  if (logRepeatIntervalMs >= 0 && logRepeatIntervalMs < 100) problems.push(new ConfigError('log-repeat-interval', `expected at least 100 ms, got ${logRepeatIntervalMs}`));
  const drainPeriodMs = checkMs('drain-period', raw.drainPeriod, DEFAULTS.drainPeriodMs, problems);
  const shutdownGraceMs = checkMs('shutdown-grace', raw.shutdownGrace, DEFAULTS.shutdownGraceMs, problems);
  // A response must hold at least one ordinary resource; below 64 KiB nothing useful fits.
  const maxResponseBytes = checkBytes('max-response-bytes', raw.maxResponseBytes, DEFAULTS.maxResponseBytes, 64 * 1024, problems);
  const maxRequestBytes = checkBytes('max-request-bytes', raw.maxRequestBytes, DEFAULTS.maxRequestBytes, 1024, problems);
  const redis = checkRedis(raw, problems);
  const advertise = checkAdvertise(raw.advertise, problems);
  const connectionAge = checkConnectionAge(raw, problems);
  const checked = checkSecurity(raw, authorities, defaultUpstream);
  for (const p of checked.problems) problems.push(new ConfigError(p.path, p.message));
  const security = checked.settings;
  if (problems.length > 0 || listen === undefined) return { problems };
  return {
    problems,
    config: {
      listen,
      admin,
      authorities,
      defaultUpstream,
      unsubscribeGraceMs: grace,
      nodeId: nodeId as string,
      logLevel: logLevel as string,
      logRepeatIntervalMs,
      drainPeriodMs,
      shutdownGraceMs,
      redis,
      maxConnectionAgeMs: connectionAge.ageMs,
      maxConnectionAgeGraceMs: connectionAge.graceMs,
      maxResponseBytes,
      maxRequestBytes,
      security,
      advertise,
    },
  };
}
