/**
 * A load generator process: many ADS client streams over raw HTTP/2
 * (h2-client.ts), delta or state of the world per group, driven by the
 * coordinator over IPC. Per message it does the least a well-behaved client
 * must: find the nonce and ACK it, count the resources, and read the
 * timestamp stamped into the bytes (`@@T<µs>;r<round>;`: in versions for
 * delta, in the payload for SotW, whose responses carry only the payload
 * `Any`) to compute latency from the bytes alone.
 */
import { DELTA_ADS_PATH, SOTW_ADS_PATH } from '../../src/proto/ads-service';
import { deltaRequestCodec, discoveryRequestCodec } from '../../src/proto/messages';
import { stringField, writeVarint, varintSize } from '../../src/proto/wire';
import { TYPE_URL, expectedResources, namesFor } from '../lib/names';
import { H2Conn, type H2Handler, type H2Stream } from './h2-client';
import type {
  CollectResult,
  GenCommand,
  GenReply,
  GenRequest,
  OpenCommand,
  OpenResult,
  RoundResult,
  StallStateResult,
  SyncResult,
} from '../lib/protocol';

const MARK = Buffer.from('@@T', 'latin1');
const SEMI = 0x3b;
const R = 0x72;

interface Watcher {
  round: number;
  got: number;
  lat: number[];
  done: (r: RoundResult) => void;
  timer: NodeJS.Timeout;
}

interface SyncWaiter {
  done: () => void;
  timer: NodeJS.Timeout;
}

class Client {
  stream: H2Stream<Client> | null = null;
  resources = 0;
  syncedAtUs = 0;
  roundSeen = 0;
  /** Latency (ms) of the arrival that made roundSeen what it is. */
  roundLat = NaN;
  alive = true;
  /** Newest stamp time seen (µs): in a SotW full-state response, older stamps are repeats, not deliveries. */
  newestT0 = 0;
  versions: Map<string, string> | undefined;
  maxBatch = 0;
  messagesSinceResume = 0;

  constructor(
    readonly group: Group,
    readonly index: number,
    readonly expect: number,
    readonly stallable: boolean,
    /** SotW: the client's whole name list as encoded `resource_names` fields, repeated in every ACK. */
    readonly namesField: Buffer | undefined,
  ) {
    if (stallable) this.versions = new Map();
  }
}

class Group {
  readonly clients: Client[] = [];
  readonly conns: Array<H2Conn<Client>> = [];
  openedAtUs = 0;
  synced = 0;
  alive = 0;
  ended = 0;
  readonly endReasons: Record<string, number> = {};
  syncWaiters: SyncWaiter[] = [];
  watchers: Watcher[] = [];
  recording = false;
  minT0Us = 0;
  samples: number[] = [];
  stalledSamples: number[] = [];
  messages = 0;
  resources = 0;
  bytes = 0;

  readonly sotw: boolean;

  constructor(
    readonly name: string,
    readonly spec: OpenCommand,
  ) {
    this.sotw = spec.protocol === 'sotw';
  }

  checkSync(): void {
    if (this.synced + this.ended < this.clients.length) return;
    for (const w of this.syncWaiters) {
      clearTimeout(w.timer);
      w.done();
    }
    this.syncWaiters = [];
  }
}

const groups = new Map<string, Group>();

function groupOf(name: string): Group {
  const g = groups.get(name);
  if (!g) throw new Error(`no group ${name}`);
  return g;
}

/** ACK: DeltaDiscoveryRequest{type_url (2), response_nonce (6)} copied from the response's own bytes. */
function ackBytes(msg: Buffer, typeS: number, typeE: number, nonceS: number, nonceE: number): Buffer {
  const tl = typeE - typeS;
  const nl = nonceE - nonceS;
  const out = Buffer.allocUnsafe(2 + varintSize(tl) + tl + varintSize(nl) + nl);
  let p = 0;
  out[p++] = 0x12;
  p = writeVarint(out, p, tl);
  p += msg.copy(out, p, typeS, typeE);
  out[p++] = 0x32;
  p = writeVarint(out, p, nl);
  msg.copy(out, p, nonceS, nonceE);
  return out;
}

/**
 * SotW ACK, as gRPC sends it: DiscoveryRequest{version_info (1) = the
 * response's, resource_names (3) = the same whole list, type_url (4),
 * response_nonce (5)}, copied from the response's own bytes.
 */
function sotwAckBytes(
  msg: Buffer,
  namesField: Buffer,
  verS: number,
  verE: number,
  typeS: number,
  typeE: number,
  nonceS: number,
  nonceE: number,
): Buffer {
  const vl = verS >= 0 ? verE - verS : 0;
  const tl = typeE - typeS;
  const nl = nonceE - nonceS;
  const out = Buffer.allocUnsafe((vl > 0 ? 1 + varintSize(vl) + vl : 0) + namesField.length + 2 + varintSize(tl) + tl + varintSize(nl) + nl);
  let p = 0;
  if (vl > 0) {
    out[p++] = 0x0a;
    p = writeVarint(out, p, vl);
    p += msg.copy(out, p, verS, verE);
  }
  p += namesField.copy(out, p);
  out[p++] = 0x22;
  p = writeVarint(out, p, tl);
  p += msg.copy(out, p, typeS, typeE);
  out[p++] = 0x2a;
  p = writeVarint(out, p, nl);
  msg.copy(out, p, nonceS, nonceE);
  return out;
}

/** Reads a varint at `pos`; returns [value, next]. Small values only (lengths, tags). */
function varint(buf: Buffer, pos: number): [number, number] {
  let v = 0;
  let shift = 0;
  for (;;) {
    const b = buf[pos++];
    if (b === undefined) return [-1, pos];
    v += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return [v, pos];
    shift += 7;
  }
}

/** name (3) and version (1) of an encoded Resource. */
function nameAndVersion(buf: Buffer, s: number, e: number): [string, string] {
  let name = '';
  let version = '';
  let pos = s;
  while (pos < e) {
    const [tag, p1] = varint(buf, pos);
    const wt = tag & 7;
    if (wt === 2) {
      const [len, p2] = varint(buf, p1);
      if ((tag >>> 3) === 3) name = buf.toString('latin1', p2, p2 + len);
      else if ((tag >>> 3) === 1) version = buf.toString('latin1', p2, p2 + len);
      pos = p2 + len;
    } else if (wt === 0) pos = varint(buf, p1)[1];
    else if (wt === 1) pos = p1 + 8;
    else if (wt === 5) pos = p1 + 4;
    else break;
  }
  return [name, version];
}

const handler: H2Handler<Client> = {
  onMessage(stream, msg, now) {
    const c = stream.owner;
    const g = c.group;
    g.messages++;
    g.bytes += msg.length;
    let pos = 0;
    let nRes = 0;
    let verS = -1;
    let verE = -1;
    let typeS = -1;
    let typeE = -1;
    let nonceS = -1;
    let nonceE = -1;
    while (pos < msg.length) {
      const [tag, p1] = varint(msg, pos);
      if (tag < 0) break;
      const wt = tag & 7;
      if (wt === 2) {
        const [len, p2] = varint(msg, p1);
        const field = tag >>> 3;
        if (field === 2) {
          nRes++;
          if (c.versions) {
            const [n, v] = nameAndVersion(msg, p2, p2 + len);
            c.versions.set(n, v);
          }
        } else if (field === 4) {
          typeS = p2;
          typeE = p2 + len;
        } else if (field === 5) {
          nonceS = p2;
          nonceE = p2 + len;
        } else if (field === 1) {
          verS = p2;
          verE = p2 + len;
        }
        pos = p2 + len;
      } else if (wt === 0) pos = varint(msg, p1)[1];
      else if (wt === 1) pos = p1 + 8;
      else if (wt === 5) pos = p1 + 4;
      else break;
    }
    g.resources += nRes;
    c.resources += nRes;
    c.messagesSinceResume++;
    if (nRes > c.maxBatch) c.maxBatch = nRes;
    if (c.syncedAtUs === 0 && c.resources >= c.expect) {
      c.syncedAtUs = now;
      g.synced++;
      if (g.syncWaiters.length > 0) g.checkSync();
    }
    // Stamps: @@T<t0 µs>;[r<round>;] (delta: in each Resource.version; SotW: in each payload).
    const seenT0 = c.newestT0;
    let i = msg.indexOf(MARK);
    while (i >= 0) {
      let p = i + 3;
      let t0 = 0;
      for (let b = msg[p]!; b >= 0x30 && b <= 0x39; b = msg[++p]!) t0 = t0 * 10 + (b - 0x30);
      const lat = (now - t0) / 1000;
      let round = 0;
      if (msg[p] === SEMI && msg[p + 1] === R) {
        p += 2;
        for (let b = msg[p]!; b >= 0x30 && b <= 0x39; b = msg[++p]!) round = round * 10 + (b - 0x30);
      }
      if (round > c.roundSeen) {
        const old = c.roundSeen;
        c.roundSeen = round;
        c.roundLat = lat;
        for (const w of g.watchers) {
          if (old < w.round && round >= w.round) {
            w.got++;
            w.lat.push(lat);
            if (w.got >= g.alive) finishWatch(g, w);
          }
        }
      }
      if (g.recording && t0 >= g.minT0Us && (!g.sotw || t0 > seenT0)) (c.stallable ? g.stalledSamples : g.samples).push(lat);
      if (t0 > c.newestT0) c.newestT0 = t0;
      i = msg.indexOf(MARK, p);
    }
    if (g.spec.ack && nonceS >= 0 && typeS >= 0) {
      stream.send(
        c.namesField ? sotwAckBytes(msg, c.namesField, verS, verE, typeS, typeE, nonceS, nonceE) : ackBytes(msg, typeS, typeE, nonceS, nonceE),
      );
    }
  },
  onStreamEnd(stream, why) {
    const c = stream.owner;
    if (!c.alive) return;
    c.alive = false;
    const g = c.group;
    g.alive--;
    g.ended++;
    g.endReasons[why] = (g.endReasons[why] ?? 0) + 1;
    if (g.syncWaiters.length > 0) g.checkSync();
    for (const w of [...g.watchers]) if (w.got >= g.alive) finishWatch(g, w);
  },
};

function finishWatch(g: Group, w: Watcher): void {
  clearTimeout(w.timer);
  g.watchers = g.watchers.filter((x) => x !== w);
  w.done({ round: w.round, got: w.got, total: g.clients.length, lat: w.lat });
}

/**
 * What an Envoy's node says of its build, alike for every client of the
 * build: its version, the extensions it was built with (hundreds in an
 * official build) and its client features.
 */
function envoyBuild(extensions: number): object {
  let build = envoyBuilds.get(extensions);
  if (!build) envoyBuilds.set(extensions, (build = makeEnvoyBuild(extensions)));
  return build;
}

/** Made once per size: every client of a group sends the same build. */
const envoyBuilds = new Map<number, object>();

function makeEnvoyBuild(extensions: number): object {
  const categories = ['envoy.filters.http', 'envoy.filters.network', 'envoy.filters.listener', 'envoy.transport_sockets.upstream', 'envoy.clusters', 'envoy.access_loggers', 'envoy.tracers', 'envoy.matching.action'];
  return {
    user_agent_build_version: {
      version: { major_number: 1, minor_number: 31, patch: 2 },
      metadata: { fields: { 'revision.sha': { stringValue: '5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6' }, 'revision.status': { stringValue: 'Clean' }, 'build.type': { stringValue: 'RELEASE' }, 'ssl.version': { stringValue: 'BoringSSL' } } },
    },
    extensions: Array.from({ length: extensions }, (_, i) => {
      const category = categories[i % categories.length]!;
      return { name: `${category}.extension_${i}`, category, type_urls: [`envoy.extensions.${category.slice(6)}.extension_${i}.v3.Config`] };
    }),
    client_features: ['envoy.lb.does_not_support_overprovisioning', 'envoy.lrs.supports_send_all_clusters', 'envoy.config.require-any-fields-contain-struct'],
  };
}

function subscribeRequest(g: Group, c: Client): Buffer {
  const node = { id: `bench-${g.name}-${c.index}`, cluster: 'bench', user_agent_name: 'xdstp-bench', ...(g.spec.envoyExtensions > 0 ? envoyBuild(g.spec.envoyExtensions) : {}) };
  const names = namesFor(g.spec.plan, c.index);
  if (g.sotw) return discoveryRequestCodec.encode({ node, type_url: TYPE_URL, resource_names: names });
  return deltaRequestCodec.encode({ node, type_url: TYPE_URL, resource_names_subscribe: names });
}

function encodeNames(names: readonly string[]): Buffer {
  return Buffer.concat(names.map((n) => stringField(3, n)));
}

async function open(spec: OpenCommand): Promise<OpenResult> {
  const started = Date.now();
  if (spec.protocol === 'sotw' && spec.stallEvery > 0) throw new Error('stallable clients track versions by name: delta groups only');
  const old = groups.get(spec.group);
  if (old) for (const conn of old.conns) conn.close();
  const g = new Group(spec.group, spec);
  groups.set(spec.group, g);
  g.openedAtUs = Number(process.hrtime.bigint() / 1000n);
  // Every client of a 'same' plan sends the same list: one encoding for all.
  const sameNames = g.sotw && spec.plan.kind === 'same' ? encodeNames(spec.plan.names) : undefined;
  for (let k = 0; k < spec.count; k++) {
    const index = spec.first + k;
    const stallable = spec.stallEvery > 0 && index % spec.stallEvery === spec.stallEvery - 1;
    const namesField = g.sotw ? (sameNames ?? encodeNames(namesFor(spec.plan, index))) : undefined;
    g.clients.push(new Client(g, index, expectedResources(spec.plan, index), stallable, namesField));
  }
  g.alive = g.clients.length;
  // Connections: consecutive clients share one when streamsPerConn > 1 (stallable clients get their own).
  const batches: Client[][] = [];
  let cur: Client[] = [];
  for (const c of g.clients) {
    if (c.stallable) {
      batches.push([c]);
      continue;
    }
    cur.push(c);
    if (cur.length >= spec.streamsPerConn) {
      batches.push(cur);
      cur = [];
    }
  }
  if (cur.length > 0) batches.push(cur);
  let failed = 0;
  let firstError: string | undefined;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < batches.length) {
      const batch = batches[next++]!;
      const stall = batch[0]!.stallable;
      const conn = new H2Conn<Client>({
        port: spec.port,
        path: g.sotw ? SOTW_ADS_PATH : DELTA_ADS_PATH,
        streamWindow: stall ? spec.stallWindow.stream : spec.window.stream,
        connWindow: stall ? spec.stallWindow.conn : spec.window.conn,
        handler,
      });
      g.conns.push(conn);
      try {
        await conn.connect();
      } catch (err) {
        failed += batch.length;
        firstError ??= (err as Error).message;
        for (const c of batch) {
          if (c.alive) {
            c.alive = false;
            g.alive--;
            g.ended++;
            g.endReasons['connect failed'] = (g.endReasons['connect failed'] ?? 0) + 1;
          }
        }
        continue;
      }
      for (const c of batch) {
        c.stream = conn.openStream(c);
        if (spec.subscribe) c.stream.send(subscribeRequest(g, c));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, spec.concurrency) }, worker));
  return { opened: spec.count - failed, failed, ms: Date.now() - started, ...(firstError ? { firstError } : {}) };
}

function waitSynced(g: Group, timeoutMs: number): Promise<SyncResult> {
  return new Promise((resolve) => {
    const done = (): void => {
      const times: number[] = [];
      for (const c of g.clients) if (c.syncedAtUs > 0) times.push((c.syncedAtUs - g.openedAtUs) / 1000);
      resolve({ synced: g.synced, total: g.clients.length, times, ended: g.ended, endReasons: g.endReasons });
    };
    const w: SyncWaiter = {
      done,
      timer: setTimeout(() => {
        g.syncWaiters = g.syncWaiters.filter((x) => x !== w);
        done();
      }, timeoutMs),
    };
    g.syncWaiters.push(w);
    g.checkSync();
  });
}

function watch(g: Group, round: number, timeoutMs: number): Promise<RoundResult> {
  return new Promise((resolve) => {
    const w: Watcher = { round, got: 0, lat: [], done: resolve, timer: undefined as unknown as NodeJS.Timeout };
    for (const c of g.clients) {
      if (c.alive && c.roundSeen >= round) {
        w.got++;
        w.lat.push(c.roundLat);
      }
    }
    w.timer = setTimeout(() => finishWatch(g, w), timeoutMs);
    g.watchers.push(w);
    if (w.got >= g.alive) finishWatch(g, w);
  });
}

async function handle(body: GenCommand): Promise<unknown> {
  switch (body.cmd) {
    case 'open':
      return open(body);
    case 'subscribe': {
      const g = groupOf(body.group);
      g.openedAtUs = Number(process.hrtime.bigint() / 1000n);
      for (const c of g.clients) if (c.stream && c.alive) c.stream.send(subscribeRequest(g, c));
      return { sent: g.alive };
    }
    case 'waitSynced':
      return waitSynced(groupOf(body.group), body.timeoutMs);
    case 'watch':
      return watch(groupOf(body.group), body.round, body.timeoutMs);
    case 'record': {
      const g = groupOf(body.group);
      g.recording = body.on;
      g.minT0Us = body.minT0Us;
      if (body.on) {
        g.samples = [];
        g.stalledSamples = [];
        g.messages = 0;
        g.resources = 0;
        g.bytes = 0;
      }
      return {};
    }
    case 'collect': {
      const g = groupOf(body.group);
      const r: CollectResult = {
        samples: g.samples,
        stalledSamples: g.stalledSamples,
        messages: g.messages,
        resources: g.resources,
        bytes: g.bytes,
        ended: g.ended,
      };
      g.samples = [];
      g.stalledSamples = [];
      return r;
    }
    case 'stall': {
      const g = groupOf(body.group);
      let n = 0;
      for (const c of g.clients) {
        if (!c.stallable || !c.stream) continue;
        n++;
        if (body.on) c.stream.conn.stall();
        else {
          c.maxBatch = 0;
          c.messagesSinceResume = 0;
          c.stream.conn.unstall();
        }
      }
      return { stalled: n };
    }
    case 'stallState': {
      const g = groupOf(body.group);
      const r: StallStateResult = { clients: [] };
      for (const c of g.clients) {
        if (!c.versions) continue;
        r.clients.push({
          index: c.index,
          versions: [...c.versions],
          maxBatchSinceResume: c.maxBatch,
          messagesSinceResume: c.messagesSinceResume,
        });
      }
      return r;
    }
    case 'close': {
      const g = groups.get(body.group);
      if (!g) return {};
      groups.delete(body.group);
      for (const c of g.clients) c.alive = false;
      for (const conn of g.conns) conn.close();
      return { closed: g.conns.length };
    }
    case 'exit':
      setImmediate(() => process.exit(0));
      return {};
  }
}

process.on('message', (raw: unknown) => {
  const req = raw as GenRequest;
  handle(req.body).then(
    (result) => process.send?.({ id: req.id, ok: true, result } satisfies GenReply),
    (err: unknown) => process.send?.({ id: req.id, ok: false, error: (err as Error).stack ?? String(err) } satisfies GenReply),
  );
});
process.on('disconnect', () => process.exit(0));
process.send?.({ id: 0, ok: true, result: { pid: process.pid } } satisfies GenReply);
