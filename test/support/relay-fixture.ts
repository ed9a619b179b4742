/**
 * `withRelay`: start origin(s) and a relay in-process, hand the test a small
 * environment, and always tear everything down (clients, relay, origins), even
 * when the test fails or a part hangs on stop.
 */
import type { RelayConfigInput } from '../../src/config';
import { DeltaClient, type DeltaClientOptions } from './delta-client';
import { TestOrigin } from './origin';
import { withTimeout } from './wait';

/** The relay's contract (src/relay.ts), restated so this file compiles on its own. */
export interface RunningRelay {
  readonly port: number;
  readonly adminPort: number | null;
  /** Its metrics registry, read in Prometheus text form. */
  readonly metrics: { readonly registry: { metrics(): Promise<string> } };
  stop(): Promise<void>;
}

type StartRelay = (config: RelayConfigInput, options?: { logger?: unknown }) => Promise<RunningRelay>;

function loadStartRelay(): StartRelay {
  // Loaded lazily so the support code stays usable while src/relay.ts is absent.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  // XDSTP_RELAY_TEST_MODULE lets the suite be pointed at another implementation
  // (e.g. a deliberately naive relay, to check that the tests can fail).
  const modulePath = process.env.XDSTP_RELAY_TEST_MODULE ?? '../../src/relay';
  const mod = require(modulePath) as { startRelay?: StartRelay };
  if (typeof mod.startRelay !== 'function') throw new Error('src/relay.ts does not export startRelay');
  return mod.startRelay;
}

function testLogger(): unknown {
  const level = process.env.RELAY_TEST_LOGS;
  if (!level) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pino = require('pino') as typeof import('pino');
  return pino.pino({ level }, pino.destination(2));
}

export interface RelayEnvOptions {
  /** Authorities, each served by its own origin (default ['a']). */
  authorities?: string[];
  /** Start a default-upstream origin for non-xdstp names. */
  defaultUpstream?: boolean;
  /** Default 0. */
  unsubscribeGraceMs?: number;
  admin?: boolean;
  /** Any other relay settings (e.g. size limits). */
  config?: Partial<RelayConfigInput>;
  /** The relay's logger (a pino logger; default: silent, or RELAY_TEST_LOGS). */
  logger?: unknown;
}

export interface RelayEnv {
  /** The origin of the first authority. */
  origin: TestOrigin;
  /** Origin per authority name. */
  origins: Record<string, TestOrigin>;
  defaultOrigin: TestOrigin | null;
  relay: RunningRelay;
  config: RelayConfigInput;
  /** `127.0.0.1:PORT` of the relay's delta-ADS listener. */
  address: string;
  /** A new DeltaClient connected to the relay (closed at cleanup). */
  client(opts?: DeltaClientOptions): DeltaClient;
}

export async function withRelay(
  opts: RelayEnvOptions,
  body: (env: RelayEnv) => Promise<void>,
): Promise<void> {
  const origins: Record<string, TestOrigin> = {};
  const clients: DeltaClient[] = [];
  let defaultOrigin: TestOrigin | null = null;
  let relay: RunningRelay | undefined;
  try {
    for (const name of opts.authorities ?? ['a']) {
      origins[name] = await TestOrigin.start({ label: `origin-${name}` });
    }
    if (opts.defaultUpstream) defaultOrigin = await TestOrigin.start({ label: 'origin-default' });
    const config: RelayConfigInput = {
      listen: '127.0.0.1:0',
      admin: opts.admin ? '127.0.0.1:0' : null,
      authorities: Object.entries(origins).map(([name, o]) => ({ name, uris: [o.uri] })),
      defaultUpstream: defaultOrigin ? [defaultOrigin.uri] : null,
      unsubscribeGraceMs: opts.unsubscribeGraceMs ?? 0,
      nodeId: 'relay-test',
      logLevel: 'silent',
      ...opts.config,
    };
    const startRelay = loadStartRelay();
    const logger = opts.logger ?? testLogger();
    relay = await withTimeout(startRelay(config, logger ? { logger } : {}), 5000, 'startRelay');
    const address = `127.0.0.1:${relay.port}`;
    let n = 0;
    const env: RelayEnv = {
      origin: Object.values(origins)[0]!,
      origins,
      defaultOrigin,
      relay,
      config,
      address,
      client(clientOpts: DeltaClientOptions = {}): DeltaClient {
        const c = new DeltaClient(address, { nodeId: `client-${++n}`, ...clientOpts });
        clients.push(c);
        return c;
      },
    };
    await body(env);
  } finally {
    for (const c of clients) c.close();
    if (relay) {
      await withTimeout(relay.stop(), 5000, 'relay.stop()').catch((err) => {
        process.stderr.write(`warning: ${(err as Error).message}\n`);
      });
    }
    for (const o of Object.values(origins)) await o.stop();
    if (defaultOrigin) await defaultOrigin.stop();
  }
}
