/**
 * The same-run bound of soak scenario (e): the least a Node.js delta-ADS
 * server on bare @grpc/grpc-js can do for the good clients while the bad ones
 * hammer it. A child process (started pinned to the server core by storm.ts,
 * as the relay is) that
 *
 *   - subscribes one glob at the upstream as a delta client, ACKs every
 *     response, and keeps the members it was sent (name → encoded Resource);
 *   - serves DeltaAggregatedResources with the relay's own raw-bytes method
 *     and server options: a stream whose request subscribes that glob gets
 *     the members held, then every upstream change, each encoded once for all
 *     such streams;
 *   - decodes every other request with protobufjs, as a server built on
 *     generated message classes would, and ends a stream whose request does
 *     not decode with INVALID_ARGUMENT; anything else (ACKs, NACKs, other
 *     types, other names, 10,000-name lists) is ignored;
 *   - cuts PING and SETTINGS floods with the relay's own connection guard
 *     and limits. A grpc-js server without it answers every flooded PING and
 *     SETTINGS frame, which costs its good clients far more than anything a
 *     request does (seconds at p99 here), so the figure would bound nothing:
 *     no one runs a server exposed to such clients without that defence.
 *
 * No caching, per-stream limits or state, logging or metrics: what remains is
 * the HTTP/2 and gRPC framing every defended server on grpc-js pays, plus one
 * decode per request. Started with one JSON argument ({ upstreamPort, typeUrl, glob });
 * its port is the hello on the IPC channel (bench/lib/rpc.ts).
 */
import * as grpc from '@grpc/grpc-js';
import { DeltaAdsClient, deltaAdsServiceDefinition, openDeltaStream } from '../../src/proto/ads-service';
import { encodeDeltaResponse, scanDeltaResponse } from '../../src/proto/delta-response';
import { deltaRequestCodec } from '../../src/proto/messages';
import { WIRE_LEN, decodeUtf8, scanFields } from '../../src/proto/wire';
import * as promClient from 'prom-client';
import { createLogger } from '../../src/log';
import { ConnectionGuard } from '../../src/security/connection-guard';
import { DEFAULT_LIMITS } from '../../src/security/limits';
import { SecurityMetrics } from '../../src/security/metrics';

export interface BareForwarderConfig {
  upstreamPort: number;
  typeUrl: string;
  glob: string;
}

/** envoy.service.discovery.v3.Resource.name */
const RESOURCE_NAME = 3;

const cfg = JSON.parse(process.argv[2] ?? '{}') as BareForwarderConfig;
/** Glob member name → its Resource as the upstream encoded it. */
const members = new Map<string, Buffer>();
const subscribers = new Set<grpc.ServerDuplexStream<Buffer, Buffer>>();
let nonce = 0;
/** The members held, encoded once per change for every stream that subscribes until the next one. */
let snapshot: Buffer | undefined;

function resourceName(resource: Buffer): string {
  let name = '';
  scanFields(resource, (f) => {
    if (f.field === RESOURCE_NAME && f.wireType === WIRE_LEN) name = decodeUtf8(resource, f.valueStart, f.valueEnd);
  });
  return name;
}

function subscribeUpstream(): void {
  const client = new DeltaAdsClient(`127.0.0.1:${cfg.upstreamPort}`, grpc.credentials.createInsecure());
  const call = openDeltaStream(client);
  call.write(deltaRequestCodec.encode({ node: { id: 'bare-forwarder' }, type_url: cfg.typeUrl, resource_names_subscribe: [cfg.glob] }));
  call.on('data', (bytes: Buffer) => {
    const r = scanDeltaResponse(bytes);
    call.write(deltaRequestCodec.encode({ type_url: r.typeUrl, response_nonce: r.nonce }));
    for (const res of r.resources) members.set(resourceName(res), res);
    for (const name of r.removed) members.delete(name);
    snapshot = undefined;
    const out = encodeDeltaResponse(cfg.typeUrl, r.resources, r.removed, `b${++nonce}`);
    for (const s of subscribers) s.write(out);
  });
  call.on('error', (err: Error) => {
    process.stderr.write(`bare-forwarder: upstream stream failed: ${err.message}\n`);
    process.exit(1);
  });
}

function serveStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
  const drop = (): void => void subscribers.delete(call);
  call.on('data', (bytes: Buffer) => {
    let names: string[];
    let typeUrl: string;
    try {
      const req = deltaRequestCodec.decode(bytes);
      names = req.resource_names_subscribe ?? [];
      typeUrl = req.type_url ?? '';
    } catch (err) {
      drop();
      // grpc-js turns an 'error' emitted on a server stream into the call's final status.
      call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: `request does not decode: ${(err as Error).message}`, metadata: new grpc.Metadata() });
      return;
    }
    if (typeUrl !== cfg.typeUrl || subscribers.has(call) || !names.includes(cfg.glob)) return;
    subscribers.add(call);
    snapshot ??= encodeDeltaResponse(cfg.typeUrl, [...members.values()], [], `b${++nonce}`);
    call.write(snapshot);
  });
  call.on('end', () => {
    drop();
    call.end();
  });
  call.on('error', drop);
  call.on('cancelled', drop);
  call.on('close', drop);
}

function listen(): Promise<number> {
  // The limits the soak's relay runs with (bench/lib/servers.ts startRelay: no connection count bounds).
  const limits = { ...DEFAULT_LIMITS, maxConnections: 0, maxConnectionsPerPeer: 0 };
  // The relay's downstream server options (src/downstream/server.ts, src/security/downstream.ts; the idle-connection limit is the guard's), so the framing work is the same.
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 60_000,
    'grpc.keepalive_timeout_ms': 20_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
  });
  server.addService(deltaAdsServiceDefinition, { DeltaAggregatedResources: serveStream });
  const guard = new ConnectionGuard(limits, { logger: createLogger('silent'), metrics: new SecurityMetrics(new promClient.Registry()) });
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
      if (err) return reject(err);
      guard.attach(server);
      resolve(port);
    }),
  );
}

process.on('message', (raw: unknown) => {
  const req = raw as { id: number; body: { cmd: string } };
  if (req.body.cmd === 'exit') setImmediate(() => process.exit(0));
  process.send?.({ id: req.id, ok: true, result: {} });
});
process.on('disconnect', () => process.exit(0));

subscribeUpstream();
listen().then(
  (port) => process.send?.({ id: 0, ok: true, result: { port } }),
  (err: unknown) => {
    process.stderr.write(`bare-forwarder: ${String(err)}\n`);
    process.exit(1);
  },
);
