#!/usr/bin/env node
/**
 * A delta-ADS client for humans: subscribes to names or globs on a server (a
 * relay, a control plane) and prints every response as JSON, payloads decoded
 * with Envoy's API protos. ACKs like Envoy does, so it keeps receiving updates.
 *
 *   npm run xds -- subscribe 'xdstp://examples.local/envoy.config.listener.v3.Listener/mesh/*?node_type=ingress' --server 127.0.0.1:18000
 *   npm run xds -- subscribe '*' --type cds --server 127.0.0.1:18000        # legacy names need --type
 *   npm run xds -- status --server 127.0.0.1:18000,127.0.0.1:18001 --node 'edge-*'   # per-client config status (CSDS)
 *
 * stdout carries only the responses (pretty JSON, or one line each with
 * --compact); connection problems go to stderr with a non-zero exit.
 */
import * as os from 'node:os';
import * as grpc from '@grpc/grpc-js';
import yargs from 'yargs';
import { DeltaAdsClient, openDeltaStream } from '../proto/ads-service';
import { deltaRequestCodec, deltaResponseCodec, type DeltaDiscoveryResponse, type Duration, type Resource } from '../proto/messages';
import { runStatus, statusOptions, statusOptionsOf } from '../status';
import { clientChannel, type ClientTls } from '../security/client-channel';
import { envoyTypes } from '../typed-json/envoy-types';
import { TTL_CLIENT_FEATURE } from '../proto/xds-names';
import { isXdstpName, parseUrl, typeUrlOf } from '../xdstp';

const TYPE_ALIASES: Record<string, string> = {
  lds: 'envoy.config.listener.v3.Listener',
  rds: 'envoy.config.route.v3.RouteConfiguration',
  cds: 'envoy.config.cluster.v3.Cluster',
  eds: 'envoy.config.endpoint.v3.ClusterLoadAssignment',
  sds: 'envoy.extensions.transport_sockets.tls.v3.Secret',
  vhds: 'envoy.config.route.v3.VirtualHost',
  srds: 'envoy.config.route.v3.ScopedRouteConfiguration',
};

function expandType(t: string): string {
  const name = TYPE_ALIASES[t.toLowerCase()] ?? t;
  return name.includes('/') ? name : typeUrlOf(name);
}

/** Groups the names by the type URL they are subscribed under. */
export function groupByType(names: string[], type: string | undefined): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const name of names) {
    let typeUrl: string;
    if (type !== undefined) typeUrl = expandType(type);
    else if (isXdstpName(name)) typeUrl = typeUrlOf(parseUrl(name).resourceType);
    else throw new Error(`"${name}" is not an xdstp:// name: give its type with --type (e.g. --type cds)`);
    let list = out.get(typeUrl);
    if (!list) out.set(typeUrl, (list = []));
    list.push(name);
  }
  return out;
}

function formatDuration(d: Duration): string {
  const seconds = Number(d.seconds ?? 0);
  const nanos = Number(d.nanos ?? 0);
  return nanos === 0 ? `${seconds}s` : `${(seconds + nanos / 1e9).toFixed(9).replace(/0+$/, '')}s`;
}

/** A response as printed: payloads decoded when `decode`, heartbeats marked. */
export function responseToJson(resp: DeltaDiscoveryResponse, decode: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = { type_url: resp.type_url ?? '', nonce: resp.nonce ?? '' };
  if (resp.system_version_info) out.system_version_info = resp.system_version_info;
  out.resources = (resp.resources ?? []).map((r: Resource) => {
    const item: Record<string, unknown> = { name: r.name ?? '', version: r.version ?? '' };
    if (r.ttl) item.ttl = formatDuration(r.ttl);
    if (r.cache_control?.do_not_cache) item.do_not_cache = true;
    if (!r.resource) item.heartbeat = true;
    else if (decode) item.resource = envoyTypes().decodeAny(r.resource.type_url, r.resource.value);
    else item.resource = { type_url: r.resource.type_url, value: Buffer.from(r.resource.value).toString('base64') };
    return item;
  });
  out.removed_resources = resp.removed_resources ?? [];
  return out;
}

function subscribe(args: {
  names: string[];
  server: string;
  type?: string;
  nodeId: string;
  count?: number;
  timeout?: number;
  raw: boolean;
  compact: boolean;
  tls: ClientTls;
}): void {
  let byType: Map<string, string[]>;
  try {
    byType = groupByType(args.names, args.type);
  } catch (err) {
    process.stderr.write(`xds: ${(err as Error).message}\n`);
    process.exit(2);
  }
  let channel: { credentials: grpc.ChannelCredentials; options: grpc.ChannelOptions };
  try {
    channel = clientChannel(args.tls);
  } catch (err) {
    process.stderr.write(`xds: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const client = new DeltaAdsClient(args.server, channel.credentials, channel.options);
  const call = openDeltaStream(client);
  let received = 0;
  let done = false;
  const finish = (code: number, message?: string): void => {
    if (done) return;
    done = true;
    if (message) process.stderr.write(`xds: ${message}\n`);
    call.cancel();
    client.close();
    // Let stdout drain before exiting.
    process.stdout.write('', () => process.exit(code));
  };
  call.on('data', (bytes: Buffer) => {
    let resp: DeltaDiscoveryResponse;
    try {
      resp = deltaResponseCodec.decode(bytes);
    } catch (err) {
      finish(1, `undecodable response: ${(err as Error).message}`);
      return;
    }
    const json = responseToJson(resp, !args.raw);
    process.stdout.write(`${args.compact ? JSON.stringify(json) : JSON.stringify(json, null, 2)}\n`);
    call.write(deltaRequestCodec.encode({ type_url: resp.type_url, response_nonce: resp.nonce }));
    received++;
    if (args.count !== undefined && received >= args.count) finish(0);
  });
  call.on('error', (err: grpc.ServiceError) => finish(1, `${args.server}: ${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`));
  call.on('end', () => finish(received > 0 ? 0 : 1, `${args.server} closed the stream`));
  let first = true;
  for (const [typeUrl, names] of byType) {
    const req = { type_url: typeUrl, resource_names_subscribe: names } as Parameters<typeof deltaRequestCodec.encode>[0];
    if (first) {
      req.node = {
        id: args.nodeId,
        user_agent_name: 'xdstp-relay-xds-client',
        client_features: [TTL_CLIENT_FEATURE],
      };
      first = false;
    }
    call.write(deltaRequestCodec.encode(req));
  }
  if (args.timeout !== undefined) {
    setTimeout(() => {
      if (args.count !== undefined) finish(1, `timed out after ${args.timeout} ms with ${received} of ${args.count} responses`);
      else finish(0);
    }, args.timeout).unref();
  }
  process.on('SIGINT', () => finish(0));
  process.on('SIGTERM', () => finish(0));
}

function main(): void {
  yargs(process.argv.slice(2))
    .scriptName('npm run xds --')
    .usage('$0 subscribe <name-or-glob...> [--server host:port]\n$0 status --server host:port[,host:port…] [--node PATTERN] [--fleet] [--json]\n\nPrints what a delta-ADS server sends, as JSON; or relays\' per-client config status.')
    .command(
      'subscribe <names..>',
      'subscribe to xdstp:// names or globs (or legacy names with --type) and print every response',
      (y) =>
        y
          .positional('names', { type: 'string', array: true, demandOption: true, describe: 'resource names, xdstp:// globs, or * (with --type)' })
          .option('server', { type: 'string', default: '127.0.0.1:18000', describe: 'delta-ADS server HOST:PORT' })
          .option('type', { type: 'string', describe: 'type URL, message name or lds|rds|cds|eds|sds (default: from each xdstp name)' })
          .option('node-id', { type: 'string', default: `xds-client-${os.hostname()}`, describe: 'node id sent on the first request' })
          .option('count', { type: 'number', describe: 'exit after this many responses' })
          .option('timeout', { type: 'number', describe: 'stop after this many ms (an error if --count was not reached)' })
          .option('raw', { type: 'boolean', default: false, describe: 'print payloads as base64 instead of decoding them' })
          .option('compact', { type: 'boolean', default: false, describe: 'one JSON object per line' })
          .option('ca', { type: 'string', describe: 'TLS: PEM CA the server certificate is verified against (TLS is on when --ca or --cert is given)' })
          .option('cert', { type: 'string', describe: 'mTLS: PEM client certificate' })
          .option('key', { type: 'string', describe: 'mTLS: PEM private key of --cert' })
          .option('server-name', { type: 'string', describe: 'TLS: name to verify the server certificate against instead of the --server host' }),
      (a) =>
        subscribe({
          names: (a.names ?? []).map(String),
          server: a.server,
          type: a.type,
          nodeId: a['node-id'],
          count: a.count,
          timeout: a.timeout,
          raw: a.raw,
          compact: a.compact,
          tls: { ca: a.ca, cert: a.cert, key: a.key, serverName: a['server-name'] },
        }),
    )
    .command(
      'status',
      "ask relays for their clients' config status (CSDS) and print a table (or --json)",
      (y) => statusOptions(y),
      (a) => {
        let opts;
        try {
          opts = statusOptionsOf(a);
        } catch (err) {
          process.stderr.write(`xds: ${(err as Error).message}\n`);
          process.exit(2);
        }
        void runStatus(opts, process).then((code) => process.stdout.write('', () => process.exit(code)));
      },
    )
    .demandCommand(1, 'give a command: subscribe, status')
    .strict()
    .version(false)
    .help()
    .parseSync();
}

if (require.main === module) main();
