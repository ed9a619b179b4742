#!/usr/bin/env node
import * as fs from 'node:fs';
import YAML from 'yaml';
import yargs from 'yargs';
import { validateOptions, type RawOptions } from './config';
import { defaultNodeId, startRelay } from './relay';

function loadConfigFile(path: string): Record<string, unknown> {
  const text = fs.readFileSync(path, 'utf8');
  const parsed: unknown = path.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${path}: expected a mapping of options`);
  return parsed as Record<string, unknown>;
}

function parseArgs(argv: string[]) {
  return yargs(argv)
    .scriptName('xdstp-relay')
    .usage('$0 [options]\n\nA caching delta-xDS relay for xdstp:// resources.')
    .env('XDSTP_RELAY')
    .option('listen', { type: 'string', default: '0.0.0.0:18000', describe: 'Downstream delta-ADS address HOST:PORT' })
    .option('admin', { type: 'string', default: '0.0.0.0:9901', describe: 'Admin HTTP address HOST:PORT (/healthz, /readyz, /metrics)' })
    .option('authority', { type: 'string', array: true, describe: 'NAME=URI[,URI…] upstream for an xdstp authority (repeatable)' })
    .option('default-upstream', { type: 'string', describe: 'URI[,URI…] upstream for non-xdstp names' })
    .option('unsubscribe-grace', { type: 'number', default: 30000, describe: 'ms an upstream subscription outlives its last client' })
    .option('node-id', { type: 'string', describe: 'Node id presented upstream (default: xdstp-relay-<hostname>)' })
    .option('log-level', { type: 'string', default: 'info', describe: 'fatal|error|warn|info|debug|trace|silent' })
    .config('config', 'YAML or JSON file with the same keys as the flags', loadConfigFile)
    .strictOptions()
    .version(false)
    .help()
    .fail((msg, err) => {
      throw err ?? new Error(msg);
    })
    .parseSync();
}

/** Env values are single strings; several authorities there are separated by whitespace or ';'. */
function splitEnvList(v: unknown): unknown {
  if (Array.isArray(v)) return v.flatMap((x) => (typeof x === 'string' ? x.split(/[\s;]+/).filter(Boolean) : [x]));
  return v;
}

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`xdstp-relay: ${(err as Error).message.split('\n')[0]}\n`);
    process.exit(2);
  }
  const raw: RawOptions = {
    listen: args.listen,
    admin: args.admin,
    authority: splitEnvList(args.authority),
    defaultUpstream: args['default-upstream'],
    unsubscribeGrace: args['unsubscribe-grace'],
    nodeId: args['node-id'],
    logLevel: args['log-level'],
  };
  const { config, problems } = validateOptions(raw, { nodeId: defaultNodeId() });
  if (!config) {
    process.stderr.write(`xdstp-relay: invalid configuration: ${problems.map((p) => p.message).join('; ')}\n`);
    process.exit(2);
  }
  const relay = await startRelay(config);
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`xdstp-relay: ${signal}, shutting down\n`);
    relay.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`xdstp-relay: ${(err as Error).message ?? String(err)}\n`);
  process.exit(1);
});
