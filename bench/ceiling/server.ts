/**
 * Scenario 0's baseline: the fastest this runtime fans an ADS response out. A
 * bare server holding N open streams that, on command, writes ONE
 * pre-encoded response to all of them: a DeltaDiscoveryResponse to the delta
 * streams, or a state-of-the-world DiscoveryResponse (payload `Any`s only,
 * as many as the relay's full-state response carries) to the SotW streams. Modes:
 *   grpc  — @grpc/grpc-js server with the same raw-bytes method the relay uses
 *   h2    — raw node:http2 server writing the gRPC-framed bytes itself
 * `perClient` encodes a fresh response per stream instead (what encode-once saves).
 * It also serves the storm baseline (a pre-encoded N-resource response on each
 * stream's first request) and a churn baseline (the scenario's changes, sent
 * to their subscribers).
 */
import * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { SOTW_ADS_PATH, adsServiceDefinition } from '../../src/proto/ads-service';
import { encodeDeltaResponse } from '../../src/proto/delta-response';
import { decodeDeltaRequest } from '../../src/proto/requests';
import { encodeSotwResponse } from '../../src/proto/sotw-response';
import { lenField, stringField } from '../../src/proto/wire';
import type { AdsProtocol } from '../lib/protocol';
import { TYPE_URL, churnName, drawChurnChanges, stampedVersion } from '../lib/names';
import { prng } from '../lib/stats';
import { encodeResource, payloadOf, stampedPayloadOf } from '../origin';

type Mode = 'grpc' | 'h2';

interface Sink {
  protocol: AdsProtocol;
  requested: boolean;
  /** What the stream's first (delta) request subscribed, once told to keep it: the churn baseline writes to a change's subscribers. */
  names?: readonly string[];
  write(bytes: Buffer): void;
}

const mode: Mode = process.argv.includes('--mode=h2') ? 'h2' : 'grpc';
const sinks = new Set<Sink>();
let syncResponse: Buffer | undefined;
let nonce = 0;
/**
 * Only the churn baseline needs each stream's subscriptions (keepSubscriptions
 * command): decoding and keeping them would add to what the other baselines
 * are measured at (a storm's first answers, memory per idle stream).
 */
let keepSubscriptions = false;
/** Name → the streams that subscribed it, kept as streams come and go so a churn window does not build it on its own CPU time. */
const subscribers = new Map<string, Sink[]>();
const NO_SINKS: readonly Sink[] = [];

function framed(bytes: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + bytes.length);
  out[0] = 0;
  out.writeUInt32BE(bytes.length, 1);
  bytes.copy(out, 5);
  return out;
}

function onFirstRequest(sink: Sink, bytes: Buffer | undefined): void {
  if (sink.requested) return;
  sink.requested = true;
  if (keepSubscriptions && bytes && sink.protocol === 'delta') {
    sink.names = decodeDeltaRequest(bytes, false).subscribe;
    for (const name of sink.names) {
      const list = subscribers.get(name);
      if (list) list.push(sink);
      else subscribers.set(name, [sink]);
    }
  }
  if (syncResponse && sink.protocol === 'delta') sink.write(syncResponse);
}

function forget(sink: Sink): void {
  sinks.delete(sink);
  for (const name of sink.names ?? []) {
    const list = subscribers.get(name);
    if (!list) continue;
    const at = list.indexOf(sink);
    if (at >= 0) list.splice(at, 1);
    if (list.length === 0) subscribers.delete(name);
  }
}

async function listen(): Promise<number> {
  if (mode === 'grpc') {
    // The relay's own downstream server options, so the only difference is the relay's work.
    const server = new grpc.Server({
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': 4 * 1024 * 1024,
    });
    const onCall = (protocol: AdsProtocol) => (call: grpc.ServerDuplexStream<Buffer, Buffer>): void => {
      const sink: Sink = { protocol, requested: false, write: (b) => void call.write(b) };
      sinks.add(sink);
      call.on('data', (bytes: Buffer) => onFirstRequest(sink, bytes));
      const drop = (): void => forget(sink);
      call.on('end', () => {
        drop();
        call.end();
      });
      call.on('error', drop);
      call.on('cancelled', drop);
      call.on('close', drop);
    };
    // The relay's own service definition: both ADS methods, raw bytes.
    server.addService(adsServiceDefinition, {
      DeltaAggregatedResources: onCall('delta'),
      StreamAggregatedResources: onCall('sotw'),
    });
    return new Promise((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  }
  const server = http2.createServer({ maxSessionMemory: 1 << 20 });
  server.on('stream', (stream, headers) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    // h2 mode writes bytes that are already gRPC-framed.
    const protocol: AdsProtocol = headers[':path'] === SOTW_ADS_PATH ? 'sotw' : 'delta';
    const sink: Sink = { protocol, requested: false, write: (b) => void stream.write(b) };
    sinks.add(sink);
    // Requests are not unframed in h2 mode: its streams' subscriptions are not known.
    stream.on('data', () => onFirstRequest(sink, undefined));
    stream.on('close', () => forget(sink));
    stream.on('error', () => forget(sink));
  });
  server.on('sessionError', () => undefined);
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : 0);
    });
  });
}

function envelope(resources: Buffer[]): Buffer {
  const bytes = encodeDeltaResponse(TYPE_URL, resources, [], `c${++nonce}`);
  return mode === 'h2' ? framed(bytes) : bytes;
}

function response(names: string[], version: string, payloadBytes: number): Buffer {
  return envelope(names.map((n) => encodeResource(n, version, payloadOf(payloadBytes))));
}

/** The payload `Any`s of a SotW response: the first stamped with `version`, all of the same size. */
function sotwPayloads(version: string, payloadBytes: number, members: number): Buffer[] {
  const out: Buffer[] = [];
  for (let j = 0; j < members; j++) {
    const value = j === 0 ? stampedPayloadOf(payloadBytes, version) : payloadOf(payloadBytes);
    out.push(Buffer.concat([stringField(1, TYPE_URL), lenField(2, value)]));
  }
  return out;
}

/** A DiscoveryResponse (version_info = nonce, as the relay does). */
function sotwEnvelope(payloads: Buffer[]): Buffer {
  const n = `c${++nonce}`;
  const bytes = encodeSotwResponse(TYPE_URL, n, payloads, n, []);
  return mode === 'h2' ? framed(bytes) : bytes;
}

interface FireCommand {
  cmd: 'fire';
  t0Us: number;
  round: number;
  name: string;
  payloadBytes: number;
  perClient: boolean;
  /** Which streams get it (default delta). */
  protocol?: AdsProtocol;
  /** SotW: payloads per response (the relay's full state of the glob). */
  members?: number;
}

interface ChurnCommand {
  cmd: 'churn';
  /** The origin's changes per second, drawn as the scenario draws them (bench/lib/names.ts drawChurnChanges). */
  changesPerSec: number;
  durationMs: number;
  payloadBytes: number;
  /** The scenario's resources, its names drawn more often and how much more, and its seed for this window. */
  resources: number;
  hot: string[];
  hotShare: number;
  seed: number;
}

type Command =
  | { cmd: 'ready'; protocol?: AdsProtocol }
  | FireCommand
  | { cmd: 'syncResponse'; names: string[]; payloadBytes: number }
  | ChurnCommand
  | { cmd: 'keepSubscriptions' }
  | { cmd: 'exit' };

function fire(c: FireCommand): object {
  const started = process.hrtime.bigint();
  const version = stampedVersion(c.t0Us, c.round);
  let n = 0;
  if (c.protocol === 'sotw') {
    const payloads = sotwPayloads(version, c.payloadBytes, c.members ?? 1);
    const shared = c.perClient ? undefined : sotwEnvelope(payloads);
    for (const s of sinks) {
      if (s.protocol !== 'sotw') continue;
      s.write(shared ?? sotwEnvelope(payloads));
      n++;
    }
  } else if (c.perClient) {
    // Like the relay without response sharing: the resource bytes are shared, the response envelope is not.
    const resource = encodeResource(c.name, version, payloadOf(c.payloadBytes));
    for (const s of sinks) {
      if (s.protocol !== 'delta') continue;
      s.write(envelope([resource]));
      n++;
    }
  } else {
    const bytes = response([c.name], version, c.payloadBytes);
    for (const s of sinks) {
      if (s.protocol !== 'delta') continue;
      s.write(bytes);
      n++;
    }
  }
  return { wrote: n, loopMs: Number(process.hrtime.bigint() - started) / 1e6 };
}

/**
 * The relay's churn without the relay: `changesPerSec` changes drawn as the
 * scenario draws them for the origin, in 10 ms ticks, each tick's changes
 * sent to their subscribers, one pre-encoded response per stream that
 * subscribed any of them (the relay sends a client one response per upstream
 * update). So the baseline reaches the same clients, scattered over its
 * streams as the relay's are over its clients: writing to streams in the
 * order they were accepted, neighbours in memory, costs less
 * (docs/performance.md, churn).
 */
function churn(c: ChurnCommand): Promise<object> {
  return new Promise((resolve) => {
    const draw = prng(c.seed);
    let sent = 0;
    const start = Date.now();
    let carry = 0;
    const timer = setInterval(() => {
      const elapsed = Date.now() - start;
      if (elapsed >= c.durationMs || subscribers.size === 0) {
        clearInterval(timer);
        resolve({ responses: sent });
        return;
      }
      carry += c.changesPerSec / 100;
      const k = Math.floor(carry);
      carry -= k;
      if (k === 0) return;
      const bytes = response([churnName(0)], stampedVersion(Number(process.hrtime.bigint() / 1000n)), c.payloadBytes);
      const reached = new Set<Sink>();
      for (const name of drawChurnChanges(draw, k, c.resources, c.hot, c.hotShare)) {
        for (const sink of subscribers.get(name) ?? NO_SINKS) {
          if (reached.has(sink)) continue;
          reached.add(sink);
          sink.write(bytes);
          sent++;
        }
      }
    }, 10);
  });
}

async function handle(body: Command): Promise<object> {
  switch (body.cmd) {
    case 'ready': {
      let streams = 0;
      let requested = 0;
      for (const s of sinks) {
        if (body.protocol && s.protocol !== body.protocol) continue;
        streams++;
        if (s.requested) requested++;
      }
      return { streams, requested };
    }
    case 'fire':
      return fire(body);
    case 'syncResponse':
      syncResponse = response(body.names, 'v1', body.payloadBytes);
      return { bytes: syncResponse.length };
    case 'keepSubscriptions':
      keepSubscriptions = true;
      return {};
    case 'churn':
      return churn(body);
    case 'exit':
      setImmediate(() => process.exit(0));
      return {};
  }
}

process.on('message', (raw: unknown) => {
  const req = raw as { id: number; body: Command };
  handle(req.body).then(
    (result) => process.send?.({ id: req.id, ok: true, result }),
    (err: unknown) => process.send?.({ id: req.id, ok: false, error: String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));

listen().then(
  (port) => process.send?.({ id: 0, ok: true, result: { port, mode } }),
  (err: unknown) => {
    process.stderr.write(`ceiling: ${String(err)}\n`);
    process.exit(1);
  },
);
