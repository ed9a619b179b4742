/** One upstream authority: its name and the ordered list of servers that speak for it. */
export interface AuthoritySpec {
  /** The xdstp authority, e.g. `some-authority`. */
  name: string;
  /** Server URIs in failover order: `grpc://host:port` or `file://DIR`. */
  uris: string[];
}

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

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/;
const URI = /^(grpc:\/\/(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):\d{1,5}\/?|file:\/\/.+)$/;
const AUTHORITY_NAME = /^[^\s/?#=,]*$/;

/** Raw option values as they come from flags, env or the config file. */
export interface RawOptions {
  listen?: unknown;
  admin?: unknown;
  authority?: unknown;
  defaultUpstream?: unknown;
  unsubscribeGrace?: unknown;
  nodeId?: unknown;
  logLevel?: unknown;
}

function checkHostPort(path: string, v: unknown, problems: ConfigError[]): string | undefined {
  if (typeof v !== 'string' || !HOST_PORT.test(v) || Number(v.slice(v.lastIndexOf(':') + 1)) > 65535) {
    problems.push(new ConfigError(path, `expected HOST:PORT, got ${JSON.stringify(v)}`));
    return undefined;
  }
  return v;
}

function checkUris(path: string, list: string, problems: ConfigError[]): string[] {
  const uris = list.split(',').map((u) => u.trim()).filter((u) => u !== '');
  if (uris.length === 0) problems.push(new ConfigError(path, 'no upstream URI given'));
  for (const u of uris) {
    if (!URI.test(u)) problems.push(new ConfigError(path, `"${u}" is not grpc://HOST:PORT or file://DIR`));
  }
  return uris;
}

/** Accepts `NAME=URI[,URI…]` strings (repeatable) or a `{ NAME: URI | [URI…] }` map. */
function parseAuthorities(raw: unknown, problems: ConfigError[]): AuthoritySpec[] {
  const out: AuthoritySpec[] = [];
  const add = (path: string, name: string, uris: string): void => {
    if (!AUTHORITY_NAME.test(name)) {
      problems.push(new ConfigError(path, `authority name "${name}" may not contain whitespace, / ? # = or ,`));
      return;
    }
    if (out.some((a) => a.name === name)) {
      problems.push(new ConfigError(path, `authority "${name}" is configured twice`));
      return;
    }
    out.push({ name, uris: checkUris(path, uris, problems) });
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
      for (const [name, uris] of Object.entries(item as Record<string, unknown>)) {
        const list = Array.isArray(uris) ? uris.join(',') : uris;
        if (typeof list !== 'string') problems.push(new ConfigError(`authority.${name}`, 'expected a URI or a list of URIs'));
        else add(`authority.${name}`, name, list);
      }
    } else {
      problems.push(new ConfigError(path, `expected NAME=URI[,URI…], got ${JSON.stringify(item)}`));
    }
  });
  return out;
}

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** Validates raw options into a RelayConfig; returns every problem found, not just the first. */
export function validateOptions(raw: RawOptions, defaults: { nodeId: string }): { config?: RelayConfig; problems: ConfigError[] } {
  const problems: ConfigError[] = [];
  const listen = checkHostPort('listen', raw.listen ?? '0.0.0.0:18000', problems);
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
  const grace = Number(raw.unsubscribeGrace ?? 30000);
  if (!Number.isInteger(grace) || grace < 0) {
    problems.push(new ConfigError('unsubscribe-grace', `expected a non-negative number of milliseconds, got ${JSON.stringify(raw.unsubscribeGrace)}`));
  }
  const nodeId = raw.nodeId === undefined || raw.nodeId === '' ? defaults.nodeId : raw.nodeId;
  if (typeof nodeId !== 'string') problems.push(new ConfigError('node-id', 'expected a string'));
  const logLevel = raw.logLevel ?? 'info';
  if (typeof logLevel !== 'string' || !LEVELS.has(logLevel)) {
    problems.push(new ConfigError('log-level', `expected one of ${[...LEVELS].join(', ')}, got ${JSON.stringify(logLevel)}`));
  }
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
    },
  };
}
