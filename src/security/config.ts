/**
 * The security options (TLS both ways, policy, admin token, limits) as the
 * relay's configuration carries them, and their validation: every file named
 * must exist and parse, so `xdstp-relay validate` catches a wrong path or a
 * key that does not belong to its certificate before a rollout does.
 */
import { readAdminToken } from './admin-token';
import { checkLimits, type Limits } from './limits';
import { loadPolicyFile } from './policy';
import { checkDownstreamTlsFiles, checkUpstreamTlsFiles, type DownstreamTlsSpec, type UpstreamTlsSpec } from './tls';

export interface SecuritySettings {
  /** `--tls-cert/--tls-key[/--tls-client-ca]`; null = plaintext. */
  tls: DownstreamTlsSpec | null;
  /** TLS for `grpcs://` servers of the default upstream (the `--upstream-tls-*` flags). */
  defaultUpstreamTls: UpstreamTlsSpec;
  /** `--policy`; null = everything is allowed. */
  policyFile: string | null;
  /** `--admin-token`; null = state-changing and debug endpoints for loopback callers only. */
  adminTokenFile: string | null;
  limits: Limits;
}

export interface SecurityRawOptions {
  tlsCert?: unknown;
  tlsKey?: unknown;
  tlsClientCa?: unknown;
  upstreamTlsCa?: unknown;
  upstreamTlsCert?: unknown;
  upstreamTlsKey?: unknown;
  upstreamTlsServerName?: unknown;
  policy?: unknown;
  adminToken?: unknown;
  maxConcurrentStreams?: unknown;
  maxConnections?: unknown;
  maxConnectionsPerPeer?: unknown;
  minPingInterval?: unknown;
  maxConnectionIdle?: unknown;
  maxSubscriptionsPerStream?: unknown;
  maxNameLength?: unknown;
  subscriptionRate?: unknown;
  subscriptionBurst?: unknown;
}

type Problem = { path: string; message: string };

function optionalString(path: string, v: unknown, problems: Problem[]): string | undefined {
  if (v === undefined || v === null || v === '' || v === false) return undefined;
  if (typeof v !== 'string' || v.trim() === '') {
    problems.push({ path, message: `expected a file path, got ${JSON.stringify(v)}` });
    return undefined;
  }
  return v.trim();
}

/** The authority's own TLS settings over the flag defaults; a certificate and its key always come from the same place. */
export function mergeUpstreamTls(own: UpstreamTlsSpec | undefined, defaults: UpstreamTlsSpec): UpstreamTlsSpec {
  const o = own ?? {};
  const pairFromOwn = o.certFile !== undefined || o.keyFile !== undefined;
  const merged: UpstreamTlsSpec = {
    caFile: o.caFile ?? defaults.caFile,
    certFile: pairFromOwn ? o.certFile : defaults.certFile,
    keyFile: pairFromOwn ? o.keyFile : defaults.keyFile,
    serverName: o.serverName ?? defaults.serverName,
  };
  for (const k of Object.keys(merged) as (keyof UpstreamTlsSpec)[]) if (merged[k] === undefined) delete merged[k];
  return merged;
}

const isTls = (uri: string): boolean => /^grpcs:\/\//i.test(uri);

/**
 * Validates the security options. Sets each `grpcs://` authority's
 * effective TLS settings (its own over the flag defaults) in place.
 */
export function checkSecurity(
  raw: SecurityRawOptions,
  authorities: { name: string; uris: string[]; tls?: UpstreamTlsSpec }[],
  defaultUpstream: string[] | null,
): { settings: SecuritySettings; problems: Problem[] } {
  const problems: Problem[] = [];

  const certFile = optionalString('tls-cert', raw.tlsCert, problems);
  const keyFile = optionalString('tls-key', raw.tlsKey, problems);
  const clientCaFile = optionalString('tls-client-ca', raw.tlsClientCa, problems);
  let tls: DownstreamTlsSpec | null = null;
  if (certFile && keyFile) {
    tls = { certFile, keyFile, ...(clientCaFile ? { clientCaFile } : {}) };
    problems.push(...checkDownstreamTlsFiles(tls));
  } else if (certFile || keyFile) {
    problems.push({ path: certFile ? 'tls-key' : 'tls-cert', message: 'TLS needs both --tls-cert and --tls-key' });
  } else if (clientCaFile) {
    problems.push({ path: 'tls-client-ca', message: 'client certificates (mTLS) need TLS: give --tls-cert and --tls-key too' });
  }

  const defaults: UpstreamTlsSpec = {};
  const ca = optionalString('upstream-tls-ca', raw.upstreamTlsCa, problems);
  const cert = optionalString('upstream-tls-cert', raw.upstreamTlsCert, problems);
  const key = optionalString('upstream-tls-key', raw.upstreamTlsKey, problems);
  const serverName = optionalString('upstream-tls-server-name', raw.upstreamTlsServerName, problems);
  if (ca) defaults.caFile = ca;
  if (cert) defaults.certFile = cert;
  if (key) defaults.keyFile = key;
  if (serverName) defaults.serverName = serverName;
  if ((cert === undefined) !== (key === undefined)) {
    problems.push({ path: cert ? 'upstream-tls-key' : 'upstream-tls-cert', message: 'a client certificate needs its key: give both --upstream-tls-cert and --upstream-tls-key' });
  }

  // Each file set is checked once, at the place it was configured.
  const checked = new Set<string>();
  const checkUpstream = (spec: UpstreamTlsSpec, path: string): void => {
    const k = JSON.stringify(spec);
    if (checked.has(k)) return;
    checked.add(k);
    problems.push(...checkUpstreamTlsFiles(spec, path));
  };
  for (const a of authorities) {
    if (!a.uris.some(isTls)) continue;
    const own = a.tls;
    a.tls = mergeUpstreamTls(own, defaults);
    checkUpstream(a.tls, own && (own.caFile || own.certFile || own.keyFile) ? `authority.${a.name}` : 'upstream-tls');
  }
  // The flags are checked even where no grpcs:// server uses them (yet): a wrong path is wrong.
  if (defaultUpstream?.some(isTls) || Object.keys(defaults).length > 0) checkUpstream(defaults, 'upstream-tls');

  const policyFile = optionalString('policy', raw.policy, problems) ?? null;
  if (policyFile) {
    try {
      loadPolicyFile(policyFile);
    } catch (err) {
      problems.push({ path: 'policy', message: (err as Error).message });
    }
  }

  const adminTokenFile = optionalString('admin-token', raw.adminToken, problems) ?? null;
  if (adminTokenFile) {
    try {
      readAdminToken(adminTokenFile);
    } catch (err) {
      problems.push({ path: 'admin-token', message: (err as Error).message });
    }
  }

  const { limits, problems: limitProblems } = checkLimits({
    maxConcurrentStreams: raw.maxConcurrentStreams,
    maxConnections: raw.maxConnections,
    maxConnectionsPerPeer: raw.maxConnectionsPerPeer,
    minPingIntervalMs: raw.minPingInterval,
    maxConnectionIdleMs: raw.maxConnectionIdle,
    maxSubscriptionsPerStream: raw.maxSubscriptionsPerStream,
    maxNameLength: raw.maxNameLength,
    subscriptionRate: raw.subscriptionRate,
    subscriptionBurst: raw.subscriptionBurst,
  });
  problems.push(...limitProblems);

  return { settings: { tls, defaultUpstreamTls: defaults, policyFile, adminTokenFile, limits }, problems };
}
