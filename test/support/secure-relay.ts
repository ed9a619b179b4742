/**
 * Relays with security options for tests: the options go through the same
 * validation as the CLI's flags (checkSecurity), so a test exercises what an
 * operator would configure. `withSecureRelay` always tears down what it started.
 */
import { EventEmitter } from 'node:events';
import pino from 'pino';
import type { AuthoritySpec, RelayConfigInput } from '../../src/config';
import { startRelay, type RunningRelay } from '../../src/relay';
import { checkSecurity, type SecurityRawOptions, type SecuritySettings } from '../../src/security/config';
import type { Limits } from '../../src/security/limits';
import { DeltaClient, type DeltaClientOptions } from './delta-client';
import { TestOrigin } from './origin';
import { withTimeout } from './wait';

/** Security settings from flag-style options; throws on any problem. Sets the authorities' effective TLS. */
export function securitySettings(raw: SecurityRawOptions, authorities: AuthoritySpec[] = [], defaultUpstream: string[] | null = null): SecuritySettings {
  const { settings, problems } = checkSecurity(raw, authorities, defaultUpstream);
  if (problems.length > 0) throw new Error(problems.map((p) => `${p.path}: ${p.message}`).join('; '));
  return settings;
}

export interface CapturedLogs {
  logger: pino.Logger;
  lines: Record<string, unknown>[];
  events: EventEmitter;
  /** The first line whose msg contains `text`. */
  find(text: string): Record<string, unknown> | undefined;
}

/** A logger that keeps its JSON lines (level info unless RELAY_TEST_LOGS says otherwise). */
export function capturedLogs(): CapturedLogs {
  const lines: Record<string, unknown>[] = [];
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const echo = process.env.RELAY_TEST_LOGS !== undefined;
  const logger = pino(
    { level: 'info' },
    {
      write: (s: string) => {
        if (echo) process.stderr.write(s);
        lines.push(JSON.parse(s) as Record<string, unknown>);
        events.emit('change');
      },
    },
  );
  return { logger, lines, events, find: (text) => lines.find((l) => String(l.msg).includes(text)) };
}

export interface SecureRelayEnv {
  origin: TestOrigin;
  relay: RunningRelay;
  config: RelayConfigInput;
  logs: CapturedLogs;
  address: string;
  client(opts?: DeltaClientOptions): DeltaClient;
}

export interface SecureRelayOptions {
  /** Flag-style security options (tlsCert, policy, adminToken, maxConnections, …). */
  security?: SecurityRawOptions;
  /** Limit overrides applied after validation (e.g. test-only short timeouts). */
  limits?: Partial<Limits>;
  /** An origin to relay (default: a plaintext TestOrigin started here) and the authority's own TLS settings. */
  origin?: TestOrigin;
  authority?: Omit<AuthoritySpec, 'name' | 'uris'>;
  /** More authorities beside `a`. */
  extraAuthorities?: AuthoritySpec[];
  /** Start the admin server: true = 127.0.0.1:0, or a HOST:PORT. */
  admin?: boolean | string;
}

export async function withSecureRelay(opts: SecureRelayOptions, body: (env: SecureRelayEnv) => Promise<void>): Promise<void> {
  const ownOrigin = opts.origin === undefined;
  const origin = opts.origin ?? (await TestOrigin.start({ label: 'origin-a' }));
  const clients: DeltaClient[] = [];
  let relay: RunningRelay | undefined;
  try {
    const authorities: AuthoritySpec[] = [{ name: 'a', uris: [origin.uri], ...opts.authority }, ...(opts.extraAuthorities ?? [])];
    const security = securitySettings(opts.security ?? {}, authorities);
    Object.assign(security.limits, opts.limits);
    const config: RelayConfigInput = {
      listen: '127.0.0.1:0',
      admin: typeof opts.admin === 'string' ? opts.admin : opts.admin ? '127.0.0.1:0' : null,
      authorities,
      defaultUpstream: null,
      unsubscribeGraceMs: 0,
      nodeId: 'relay-security-test',
      logLevel: 'info',
      security,
    };
    const logs = capturedLogs();
    relay = await withTimeout(startRelay(config, { logger: logs.logger }), 5000, 'startRelay');
    const address = `127.0.0.1:${relay.port}`;
    let n = 0;
    await body({
      origin,
      relay,
      config,
      logs,
      address,
      client(clientOpts: DeltaClientOptions = {}): DeltaClient {
        const c = new DeltaClient(address, { nodeId: `client-${++n}`, ...clientOpts });
        clients.push(c);
        return c;
      },
    });
  } finally {
    for (const c of clients) c.close();
    if (relay) await withTimeout(relay.stop(), 8000, 'relay.stop()').catch((err) => process.stderr.write(`warning: ${(err as Error).message}\n`));
    if (ownOrigin) await origin.stop();
  }
}
