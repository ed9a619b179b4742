#!/usr/bin/env node
import * as fs from 'node:fs';
import { dirname, resolve } from 'node:path';
import pino from 'pino';
import YAML from 'yaml';
import yargs from 'yargs';
import { flagDefaults, validateOptions, type RawOptions } from './config';
import { examplesAuthority, examplesHint } from './examples';
import { setHeapGrowth } from './heap-growth';
import { createLogger, LOG_LEVELS } from './log';
import { stopSharingResponses } from './downstream/responses';
import { defaultNodeId, startRelay } from './relay';
import { runStatus, statusOptions, statusOptionsOf } from './status';
import { DEFAULT_LIMITS, LIMIT_FLAGS } from './security/limits';
import { relayVersion } from './version';
import { rebaseConfigFileUris } from './upstream-uri';
import {
  isValidateInvocation,
  problemsOfConfigErrors,
  problemsOfParseError,
  reportValidation,
  stripValidateWord,
  type ValidationProblem,
} from './validate';

function loadConfigFile(path: string): Record<string, unknown> {
  const text = fs.readFileSync(path, 'utf8');
  const parsed: unknown = path.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${path}: expected a mapping of options`);
  // file://RELATIVE in a config file means relative to that file.
  return rebaseConfigFileUris(parsed as Record<string, unknown>, dirname(resolve(path)));
}

function relayParser(argv: string[], strict = true) {
  const defaults = flagDefaults();
  return yargs(argv)
    .scriptName('xdstp-relay')
    .usage('$0 [options]\n$0 validate [options]\n$0 status --server HOST:PORT[,HOST:PORT…] [--node PATTERN] [--fleet] [--json]   (see: $0 status --help)\n\nA caching delta-xDS relay for xdstp:// resources.')
    .env('XDSTP_RELAY')
    // Authority names contain dots (examples.local): keep config-file map keys whole.
    .parserConfiguration({ 'dot-notation': false })
    .option('listen', { type: 'string', default: defaults.listen, describe: 'Downstream ADS address HOST:PORT (delta and state-of-the-world)' })
    .option('admin', { type: 'string', default: defaults.admin, describe: 'Admin HTTP address HOST:PORT (/healthz, /readyz, /metrics)' })
    .option('authority', { type: 'string', array: true, describe: 'NAME=URI[,URI…] upstream for an xdstp authority (repeatable)' })
    .option('default-upstream', { type: 'string', describe: 'URI[,URI…] upstream for non-xdstp names' })
    .option('unsubscribe-grace', { type: 'number', default: defaults['unsubscribe-grace'], describe: 'ms an upstream subscription outlives its last client' })
    .option('node-id', { type: 'string', describe: 'Node id presented upstream (default: xdstp-relay-<hostname>)' })
    .option('log-level', { type: 'string', default: defaults['log-level'], describe: LOG_LEVELS.join('|') })
    .option('log-repeat-interval', { type: 'number', default: defaults['log-repeat-interval'], describe: 'ms between summary lines of a warning clients repeat (refused names, NACKs…): the first at warn, the rest counted and at debug' })
    .option('drain-period', { type: 'number', default: defaults['drain-period'], describe: 'ms over which POST /drain sends clients away (GOAWAY) in small batches' })
    .option('shutdown-grace', { type: 'number', default: defaults['shutdown-grace'], describe: 'ms in-flight writes may take on SIGTERM/SIGINT before connections are cut' })
    .option('redis', {
      type: 'string',
      describe: 'Shared cache: redis://[user:pass@]host[:port][/db], rediss://…, redis+sentinel://[pass@]host:port[,…]/master[/db], redis+cluster://host:port[,…] (default: memory only)',
    })
    .option('redis-cluster', { type: 'string', describe: 'Shared cache on a Redis Cluster: seed nodes host:port[,host:port…]' })
    .option('redis-prefix', { type: 'string', default: defaults['redis-prefix'], describe: 'Prefix of every Redis key; deployments sharing one Redis need different ones' })
    .option('redis-warm-timeout', { type: 'number', default: defaults['redis-warm-timeout'], describe: 'ms a starting relay may spend loading Redis into memory before it connects upstream (0 = no warm start)' })
    .option('advertise', { type: 'string', describe: 'HOST:PORT other relays of the fleet reach this one at, for fleet-wide client status (with --redis; default: $POD_IP with the listen port, else the listen address unless it is a wildcard)' })
    // Tests only: a short membership TTL, so a killed relay leaves the fleet quickly (documented default: a few seconds).
    .option('fleet-heartbeat-ttl', { type: 'number', default: defaults['fleet-heartbeat-ttl'], hidden: true, describe: 'ms a fleet membership record lives without a heartbeat' })
    .option('max-connection-age', { type: 'number', describe: 'ms after which a client connection gets GOAWAY (±10% jitter), so streams rebalance over a grown fleet (default: never)' })
    .option('max-connection-age-grace', { type: 'number', default: defaults['max-connection-age-grace'], describe: 'ms a stream may stay open after that GOAWAY before its connection is closed' })
    .option('max-response-bytes', { type: 'number', default: defaults['max-response-bytes'], describe: 'No response to a client (and no request upstream) exceeds this; larger sets are split' })
    .option('max-request-bytes', { type: 'number', default: defaults['max-request-bytes'], describe: 'A larger client request ends that stream with RESOURCE_EXHAUSTED' })
        // Security (docs/security.md): TLS both ways, authorization, admin token.
    .option('tls-cert', { type: 'string', describe: 'Serve clients over TLS with this PEM certificate (chain); reloaded when the file changes' })
    .option('tls-key', { type: 'string', describe: 'PEM private key of --tls-cert' })
    .option('tls-client-ca', { type: 'string', describe: 'Require client certificates signed by this PEM CA (mTLS); identities come from them' })
    .option('upstream-tls-ca', { type: 'string', describe: 'PEM CA that grpcs:// upstream servers are verified against (default: the system roots)' })
    .option('upstream-tls-cert', { type: 'string', describe: 'PEM client certificate presented to grpcs:// upstreams (config file: per authority)' })
    .option('upstream-tls-key', { type: 'string', describe: 'PEM private key of --upstream-tls-cert' })
    .option('upstream-tls-server-name', { type: 'string', describe: 'Name grpcs:// upstream certificates are verified against instead of the address host' })
    .option('policy', { type: 'string', describe: 'Authorization policy (YAML or JSON): who may subscribe to which authorities; reloaded when it changes' })
    .option('admin-token', { type: 'string', describe: 'File with a bearer token required by POST /drain, POST /log-level and /debug/* (else: loopback callers only)' })
    .options(
      Object.fromEntries(
        LIMIT_FLAGS.map(({ flag, key, describe }) => [flag, { type: 'number' as const, default: DEFAULT_LIMITS[key], describe: `Limit: ${describe}` }]),
      ),
    )
    .option('validate', { type: 'boolean', describe: 'Check the configuration, print every problem, exit (also: xdstp-relay validate --config FILE)' })
    // Leak hunting only (test/soak/): POST /debug/gc and /debug/heap-snapshot on the admin port; gc needs node --expose-gc.
    // (Read back through `unknown`: the limit flags' index signature above makes yargs type every later key a number.)
    .option('debug-heap', { type: 'boolean', default: false, hidden: true, describe: 'Expose heap diagnostics under /debug/ on the admin port' })
    // Benchmark ablation only (bench/ scenario 2, bench/README.md): `--no-share-responses` encodes every client's response
    // separately, through stopSharingResponses in src/downstream/responses.ts rather than the relay's options.
    .option('share-responses', { type: 'boolean', default: true, hidden: true, describe: 'Share one encoding among clients that get identical responses' })
    .config('config', 'YAML or JSON file with the same keys as the flags', loadConfigFile)
    .strictOptions(strict)
    .version('version', 'Print the version and exit', relayVersion())
    .help()
    .fail((msg, err) => {
      throw err ?? new Error(msg);
    });
}

const ENV_PREFIX = 'XDSTP_RELAY_';

/**
 * Takes out of the environment every `XDSTP_RELAY_*` variable that names no
 * option of the relay, and returns their names. Kubernetes injects service
 * links (`XDSTP_RELAY_SERVICE_HOST`, `XDSTP_RELAY_PORT_18000_TCP`…) for a
 * Service named like the relay; read as options they would make the strict
 * parser refuse to start. Flags and config files stay strict: this only
 * forgives the environment, which the operator does not fully control.
 * (The parser reads process.env itself, hence the removal.)
 */
function dropForeignEnv(env: NodeJS.ProcessEnv): string[] {
  // yargs' type declarations omit getOptions(); at run time it lists every declared option under `key`.
  const keys = (relayParser([]) as unknown as { getOptions(): { key: Record<string, unknown> } }).getOptions().key;
  // Options a variable may set; help and version are commands, not settings.
  const known = new Set(Object.keys(keys).filter((k) => k !== 'help' && k !== 'version'));
  const foreign: string[] = [];
  for (const name of Object.keys(env)) {
    if (!name.startsWith(ENV_PREFIX)) continue;
    const option = name.slice(ENV_PREFIX.length).toLowerCase().replace(/_/g, '-');
    if (known.has(option)) continue;
    foreign.push(name);
    delete env[name];
  }
  return foreign.sort();
}

function foreignEnvWarning(foreign: readonly string[]): [Record<string, unknown>, string] {
  return [{ ignored: foreign }, `ignoring ${foreign.length} ${ENV_PREFIX}* environment variable${foreign.length === 1 ? '' : 's'} that name no option (Kubernetes service links?): ${foreign.join(', ')}`];
}

function parseArgs(argv: string[], strict = true) {
  return relayParser(argv, strict).parseSync();
}

/** Env values are single strings; several authorities there are separated by whitespace or ';'. */
function splitEnvList(v: unknown): unknown {
  if (Array.isArray(v)) return v.flatMap((x) => (typeof x === 'string' ? x.split(/[\s;]+/).filter(Boolean) : [x]));
  return v;
}

/** `--config FILE` / `--config=FILE` as given, for messages. */
function configArg(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--config') return argv[i + 1];
    if (argv[i].startsWith('--config=')) return argv[i].slice('--config='.length);
  }
  return process.env.XDSTP_RELAY_CONFIG;
}

/**
 * The end of a start (or validate) on a bad configuration: one JSON line, like
 * every other log line, on stderr since nothing started; exit 2.
 */
function invalidConfiguration(problems: readonly ValidationProblem[]): never {
  createLogger('info', pino.destination(2)).error({ problems }, `invalid configuration: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`);
  process.exit(2);
}

/** `xdstp-relay status …`: ask relays for their clients' config status (src/status.ts). */
async function statusCommand(argv: string[]): Promise<number> {
  let opts;
  try {
    const args = statusOptions(yargs(argv))
      .scriptName('xdstp-relay status')
      .usage('$0 --server HOST:PORT[,HOST:PORT…] [--node PATTERN] [--fleet] [--json] [--ca FILE [--cert FILE --key FILE]]\n\nPer-client config status of one or several relays (CSDS); --fleet: of every relay of their fleet.')
      .strict()
      .version(false)
      .help()
      .fail((msg, err) => {
        throw err ?? new Error(msg);
      })
      .parseSync();
    opts = statusOptionsOf(args);
  } catch (err) {
    process.stderr.write(`xdstp-relay status: ${(err as Error).message.split('\n')[0]}\n`);
    return 2;
  }
  return runStatus(opts, process);
}

async function main(): Promise<void> {
  if (process.argv[2] === 'status') {
    const code = await statusCommand(process.argv.slice(3));
    // Let stdout drain before exiting.
    process.stdout.write('', () => process.exit(code));
    return;
  }
  const validating = isValidateInvocation(process.argv.slice(2));
  const argv = stripValidateWord(process.argv.slice(2));
  const foreignEnv = dropForeignEnv(process.env);
  const parseProblems: ValidationProblem[] = [];
  let args;
  try {
    args = parseArgs(argv);
  } catch (err) {
    // Start fails as validate does: one JSON line naming each unknown key (or the unreadable file).
    if (!validating) invalidConfiguration(problemsOfParseError((err as Error).message, configArg(argv)));
    // Validating: note it, then read the rest leniently so every other problem is reported too.
    parseProblems.push(...problemsOfParseError((err as Error).message, configArg(argv)));
    try {
      args = parseArgs(argv, false);
    } catch {
      const source = configArg(argv) ?? 'configuration';
      reportValidation(process, source, parseProblems, undefined);
      invalidConfiguration(parseProblems);
    }
  }
  const raw: RawOptions = {
    listen: args.listen,
    admin: args.admin,
    authority: splitEnvList(args.authority),
    defaultUpstream: args['default-upstream'],
    unsubscribeGrace: args['unsubscribe-grace'],
    nodeId: args['node-id'],
    logLevel: args['log-level'],
    logRepeatInterval: args['log-repeat-interval'],
    drainPeriod: args['drain-period'],
    shutdownGrace: args['shutdown-grace'],
    redis: args.redis,
    redisCluster: args['redis-cluster'],
    redisPrefix: args['redis-prefix'],
    redisWarmTimeout: args['redis-warm-timeout'],
    fleetHeartbeatTtl: args['fleet-heartbeat-ttl'],
    advertise: args.advertise,
    maxConnectionAge: args['max-connection-age'],
    maxConnectionAgeGrace: args['max-connection-age-grace'],
    maxResponseBytes: args['max-response-bytes'],
    maxRequestBytes: args['max-request-bytes'],
    tlsCert: args['tls-cert'],
    tlsKey: args['tls-key'],
    tlsClientCa: args['tls-client-ca'],
    upstreamTlsCa: args['upstream-tls-ca'],
    upstreamTlsCert: args['upstream-tls-cert'],
    upstreamTlsKey: args['upstream-tls-key'],
    upstreamTlsServerName: args['upstream-tls-server-name'],
    policy: args.policy,
    adminToken: args['admin-token'],
    maxConcurrentStreams: args['max-concurrent-streams'],
    maxConnections: args['max-connections'],
    maxConnectionsPerPeer: args['max-connections-per-peer'],
    minPingInterval: args['min-ping-interval'],
    maxConnectionIdle: args['max-connection-idle'],
    maxSubscriptionsPerStream: args['max-subscriptions-per-stream'],
    maxNameLength: args['max-name-length'],
    subscriptionRate: args['subscription-rate'],
    subscriptionBurst: args['subscription-burst'],
  };
  // No upstream configured anywhere (flags, env, config file): serve the bundled examples.
  const bundled = args.authority === undefined && args['default-upstream'] === undefined && args.config === undefined;
  if (bundled) raw.authority = [examplesAuthority()];
  const { config, problems } = validateOptions(raw, { nodeId: defaultNodeId() });
  const configProblems = problemsOfConfigErrors(problems);
  if (config && config.authorities.length === 0 && config.defaultUpstream === null) {
    // Would start, report ready and then refuse every name: say so now.
    configProblems.push({ path: 'authority', message: 'no upstream: give --authority NAME=URI[,URI…] or --default-upstream URI[,URI…]' });
  }
  if (foreignEnv.length > 0 && (validating || !config || configProblems.length > 0)) {
    createLogger('warn', pino.destination(2)).warn(...foreignEnvWarning(foreignEnv));
  }
  if (validating) {
    const all = [...parseProblems, ...configProblems];
    const code = reportValidation(process, configArg(argv) ?? 'flags and environment', all, config);
    if (code === 0) process.exit(0);
    invalidConfiguration(all);
  }
  if (!config || configProblems.length > 0) invalidConfiguration(configProblems);
  const logger = createLogger(config.logLevel);
  if (foreignEnv.length > 0) logger.warn(...foreignEnvWarning(foreignEnv));
  if ((args['share-responses'] as unknown) === false) stopSharingResponses();
  setHeapGrowth();
  const relay = await startRelay(config, { logger, debugHeap: (args['debug-heap'] as unknown) === true });
  if (bundled) {
    createLogger(config.logLevel).info({ hint: examplesHint(config.listen, relay.port) }, 'serving the bundled examples');
  }
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal during shutdown: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'signal received: graceful shutdown');
    // Never hang: stop() is bounded by the shutdown grace; this is the backstop.
    setTimeout(() => {
      logger.error({ signal }, 'shutdown did not finish in time: exiting');
      process.exit(1);
    }, config.shutdownGraceMs + 5000).unref();
    relay.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`xdstp-relay: ${(err as Error).message ?? String(err)}\n`);
  process.exit(1);
});
