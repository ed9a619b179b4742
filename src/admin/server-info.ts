/**
 * GET /server_info: what an operator asks a running relay first — which
 * version, since when, on which Node, with which configuration — in the
 * spirit of Envoy's /server_info and /config_dump. The configuration is the
 * effective one (defaults filled in), with secrets redacted, and a digest of
 * it so a fleet's members can be compared at a glance.
 */
import { createHash } from 'node:crypto';

/** Hides passwords in connection strings: `redis://user:pw@h` → `redis://user:***@h`; a bare `//pw@h` → `//***@h`. */
export function redactUrl(url: string): string {
  return url
    // Up to the last @ before the path: a password may hold an @ of its own.
    .replace(/\/\/([^/]*)@/g, (_m, userinfo: string) => {
      const colon = userinfo.indexOf(':');
      return colon >= 0 ? `//${userinfo.slice(0, colon)}:***@` : '//***@';
    })
    .replace(/([?&]password=)[^&]*/gi, '$1***');
}

/** The configuration as /server_info shows it: file paths stay (they are not secrets), passwords do not. */
export function redactedConfig(config: object): Record<string, unknown> {
  const copy = JSON.parse(JSON.stringify(config)) as Record<string, unknown>;
  const redis = copy.redis as { spec?: unknown } | null | undefined;
  if (redis && typeof redis.spec === 'string') redis.spec = redactUrl(redis.spec);
  return copy;
}

/** JSON with object keys sorted at every level, so equal configurations hash equally. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export interface ServerInfoSource {
  version: string;
  startedAt: number;
  /** The effective configuration (src/config.ts RelayConfig), read as plain JSON data: admin depends on no field of it but `redis.spec`. */
  config: object;
}

export function serverInfo(src: ServerInfoSource, now = Date.now()): Record<string, unknown> {
  const configuration = redactedConfig(src.config);
  return {
    service: 'xdstp-relay',
    version: src.version,
    node_version: process.versions.node,
    start_time: new Date(src.startedAt).toISOString(),
    uptime_seconds: Math.max(0, Math.floor((now - src.startedAt) / 1000)),
    configuration,
    configuration_sha256: createHash('sha256').update(canonicalJson(configuration)).digest('hex'),
  };
}
