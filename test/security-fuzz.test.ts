/**
 * Fuzzing over real gRPC, bounded and seeded.
 *
 *   XDSTP_FUZZ_SECONDS=600 XDSTP_FUZZ_SEED=123 node --test dist/test/security-fuzz.test.js
 *
 * Each test runs for its budget (about 25 + 20 s by default; XDSTP_FUZZ_SECONDS
 * sets both) and prints its seed; a failure reproduces with that seed (timing
 * aside: the inputs are the same, their interleaving with the relay's work
 * may differ).
 *
 * Downstream: hostile clients send random bytes, mutated DeltaDiscoveryRequest
 * encodings, valid requests full of odd names, random HTTP/2 frames, and
 * random bytes to the SotW method, while a well-behaved client keeps
 * receiving every update and the cache holds exactly what the origin served.
 *
 * Upstream: a fuzzing origin answers the relay with random and mutated
 * DeltaDiscoveryResponse bytes (names of other authorities included) and
 * ends its stream at random; the relay never crashes, another authority's
 * client keeps receiving updates, a client of the fuzzed authority only ever
 * gets names it subscribed to, and the cache holds only what the fuzzing
 * origin actually sent for its own authority.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { deltaAdsServiceDefinition } from '../src/proto/ads-service';
import { deltaRequestCodec, deltaResponseCodec, type DeltaDiscoveryRequest, type DeltaDiscoveryResponse, type Resource } from '../src/proto/messages';
import { http } from './support/admin';
import { DeltaClient } from './support/delta-client';
import { CLUSTER, LISTENER, subscriptionCovers, xdstp } from './support/names';
import { TestOrigin } from './support/origin';
import { Rand } from './support/prng';
import { RawH2, SOTW_ADS_PATH, frame, grpcMessage } from './support/raw-h2';
import { withSecureRelay } from './support/secure-relay';
import { sleep } from './support/wait';

const SECONDS = process.env.XDSTP_FUZZ_SECONDS ? Number(process.env.XDSTP_FUZZ_SECONDS) : undefined;
const SEED = process.env.XDSTP_FUZZ_SEED ? Number(process.env.XDSTP_FUZZ_SEED) : 0x5ec0de;
const DOWNSTREAM_MS = (SECONDS ?? 25) * 1000;
const UPSTREAM_MS = (SECONDS ?? 20) * 1000;
const T = (budgetMs: number) => ({ timeout: budgetMs + 60_000 });

const WATCHED = xdstp('a', LISTENER, 'fuzz/watched');
const WATCHED_GLOB = xdstp('a', CLUSTER, 'fuzz-glob/*');
const MEMBERS = [xdstp('a', CLUSTER, 'fuzz-glob/m1'), xdstp('a', CLUSTER, 'fuzz-glob/m2')];

// ------------------------------------------------------------- generators

const TOKENS = ['/', '*', '?', '#', '%', '%2F', '%zz', '&', '=', ',', ' ', '\u0000', 'é', '😀', '\uD800', 'xdstp://', '..', 'a', 'b', 'fuzz', 'x=y', 'glob', '\n'];
const TYPES = [LISTENER, CLUSTER, 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration', '', 'type.googleapis.com/', 'not a type', 'type.googleapis.com/xds.core.v3.ResourceLocator'];

function soup(r: Rand, max = 12): string {
  let s = '';
  for (let i = r.int(max); i > 0; i--) s += r.pick(TOKENS);
  return s;
}

/** Names a hostile client (or a fuzzing origin) might use: real ones, near misses, nonsense. */
function fuzzName(r: Rand, authorities: readonly string[]): string {
  switch (r.int(10)) {
    case 9:
      return xdstp(r.pick(authorities), r.pick([LISTENER, CLUSTER]), `fuzz/${r.int(5)}/m${r.int(20)}`);
    case 0:
      return WATCHED;
    case 1:
      return r.pick([WATCHED_GLOB, ...MEMBERS]);
    case 2:
      return xdstp(r.pick(authorities), r.pick([LISTENER, CLUSTER]), `fuzz/${soup(r, 4)}${r.int(50)}`);
    case 3:
      return xdstp(r.pick(authorities), r.pick([LISTENER, CLUSTER]), `fuzz/${r.int(5)}/*`);
    case 4:
      return `xdstp://${soup(r, 3)}/${soup(r, 3)}/${soup(r)}`;
    case 5:
      return r.pick(['*', '', 'listener_0', 'cluster_0', 'xdstp:', 'xdstp:///', 'xdstp://a', 'xdstp://a/']);
    case 6:
      return `xdstp://a/${'x'.repeat(r.int(20_000))}`;
    case 7:
      return soup(r, 30);
    default:
      return `${WATCHED}${soup(r, 3)}`;
  }
}

function mutate(r: Rand, bytes: Buffer): Buffer {
  let b = Buffer.from(bytes);
  for (let n = 1 + r.int(4); n > 0; n--) {
    switch (r.int(6)) {
      case 0: // flip a bit
        if (b.length) b[r.int(b.length)]! ^= 1 << r.int(8);
        break;
      case 1: // truncate
        b = b.subarray(0, r.int(b.length + 1));
        break;
      case 2: // insert random bytes
        {
          const at = r.int(b.length + 1);
          b = Buffer.concat([b.subarray(0, at), r.bytes(1 + r.int(16)), b.subarray(at)]);
        }
        break;
      case 3: // duplicate a slice
        {
          const from = r.int(b.length + 1);
          b = Buffer.concat([b, b.subarray(from, from + r.int(64))]);
        }
        break;
      case 4: // a field with an absurd length prefix
        b = Buffer.concat([b, Buffer.from([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]), r.bytes(r.int(8))]);
        break;
      default: // overwrite a byte
        if (b.length) b[r.int(b.length)] = r.int(256);
    }
  }
  return b;
}

function fuzzRequest(r: Rand): DeltaDiscoveryRequest {
  const names = (n: number): string[] => Array.from({ length: r.int(n) }, () => fuzzName(r, ['a', 'zz']));
  const req: DeltaDiscoveryRequest = { type_url: r.chance(0.8) ? r.pick([LISTENER, CLUSTER]) : r.pick(TYPES) };
  if (r.chance(0.7)) req.resource_names_subscribe = names(6);
  if (r.chance(0.3)) req.resource_names_unsubscribe = names(4);
  if (r.chance(0.2)) req.initial_resource_versions = Object.fromEntries(names(3).map((n) => [n, soup(r, 3)]));
  if (r.chance(0.2)) req.response_nonce = r.chance(0.5) ? String(r.int(20)) : soup(r);
  if (r.chance(0.1)) req.error_detail = { code: r.int(20), message: soup(r) };
  if (r.chance(0.1)) req.node = { id: soup(r), cluster: soup(r), client_features: [soup(r)] };
  return req;
}

// ------------------------------------------------------------------ checks

interface CacheEntryView {
  name: string;
  typeUrl: string;
  version: string;
}

async function cacheEntries(adminPort: number): Promise<CacheEntryView[]> {
  const r = await http(adminPort, 'GET', '/debug/cache?payloads=0&limit=100000');
  assert.equal(r.status, 200, r.text);
  return (r.json as { entries: CacheEntryView[] }).entries;
}

/** Keeps updating the watched resources and checks each update reaches the well-behaved client. */
async function keepUpdating(origin: TestOrigin, watcher: DeltaClient, until: number, seed: number): Promise<number> {
  let v = 1;
  while (Date.now() < until) {
    v++;
    origin.setResource(LISTENER, WATCHED, `watched-${v}`, `v${v}`);
    if (v % 3 === 0) origin.setResource(CLUSTER, MEMBERS[v % 2]!, `member-${v}`, `v${v}`);
    await watcher.waitForVersion(LISTENER, WATCHED, `v${v}`, 5000).catch((err: Error) => {
      throw new Error(`seed ${seed}: the well-behaved client missed update v${v}: ${err.message}`);
    });
    await sleep(200);
  }
  return v;
}

// ------------------------------------------------------------------- tests

test(`downstream fuzz: hostile requests over real gRPC never crash the relay or touch another client (seed ${SEED})`, T(DOWNSTREAM_MS), async () => {
  const r = new Rand(SEED);
  await withSecureRelay({ admin: true }, async ({ origin, relay, address, client }) => {
    origin.setResource(LISTENER, WATCHED, 'watched-1', 'v1');
    for (const m of MEMBERS) origin.setResource(CLUSTER, m, `member-${m}`, 'v1');
    const watcher = client({ nodeId: 'watcher' });
    watcher.subscribe(LISTENER, [WATCHED]);
    watcher.subscribe(CLUSTER, [WATCHED_GLOB]);
    await watcher.waitForVersion(LISTENER, WATCHED, 'v1');
    await watcher.waitFor(() => MEMBERS.every((m) => watcher.held(CLUSTER).has(m)), 'glob members');

    const until = Date.now() + DOWNSTREAM_MS;
    const updates = keepUpdating(origin, watcher, until, SEED);

    const hostile: DeltaClient[] = [];
    let actions = 0;
    const stats = { raw: 0, mutated: 0, valid: 0, frames: 0, sotw: 0, reopened: 0 };
    while (Date.now() < until) {
      // Keep a pool of hostile streams; replace those the relay ended.
      for (let i = hostile.length - 1; i >= 0; i--) if (hostile[i]!.status) hostile.splice(i, 1)[0]!.close();
      while (hostile.length < 4) {
        hostile.push(new DeltaClient(address, { nodeId: `hostile-${actions}`, autoAck: r.chance(0.5) }));
        stats.reopened++;
      }
      const c = r.pick(hostile);
      switch (r.int(10)) {
        case 0:
        case 1:
          c.sendRaw(r.bytes(r.int(300)));
          stats.raw++;
          break;
        case 2:
        case 3:
        case 4:
          c.sendRaw(mutate(r, deltaRequestCodec.encode(fuzzRequest(r))));
          stats.mutated++;
          break;
        case 5:
        case 6:
        case 7:
          c.send(fuzzRequest(r));
          stats.valid++;
          break;
        case 8: {
          // Raw HTTP/2: a burst of random frames, sometimes on a gRPC stream, then gone.
          const conn = await RawH2.connect(relay.port).catch(() => undefined);
          if (conn) {
            const sotw = r.chance(0.3);
            if (sotw) stats.sotw++;
            const id = conn.openStream(sotw ? SOTW_ADS_PATH : undefined);
            for (let k = r.int(6); k > 0; k--) {
              if (r.chance(0.5)) conn.sendData(id, grpcMessage(r.bytes(r.int(64)), r.chance(0.2) ? r.int(2 ** 31) : undefined));
              else conn.write(frame(r.int(10), r.int(256), r.chance(0.5) ? id : r.int(8), r.bytes(r.int(40))));
            }
            await sleep(r.int(20));
            conn.close();
            stats.frames++;
          }
          break;
        }
        default:
          c.close();
          hostile.splice(hostile.indexOf(c), 1);
      }
      actions++;
      if (actions % 8 === 0) await sleep(1);
    }
    for (const c of hostile) c.close();
    const lastVersion = await updates;
    process.stdout.write(`# downstream fuzz seed ${SEED}: ${actions} actions ${JSON.stringify(stats)}, ${lastVersion - 1} updates delivered\n`);

    // The relay is alive and the well-behaved client saw nothing but its own data.
    assert.equal((await http(relay.adminPort!, 'GET', '/healthz')).status, 200);
    assert.equal(watcher.status, undefined, `seed ${SEED}: the well-behaved stream is still open`);
    assert.deepEqual(watcher.violations, [], `seed ${SEED}`);
    assert.equal(watcher.held(LISTENER).get(WATCHED), `v${lastVersion}`);
    assert.deepEqual([...watcher.held(LISTENER).keys()], [WATCHED], `seed ${SEED}: no foreign listener`);
    assert.deepEqual([...watcher.held(CLUSTER).keys()].sort(), [...MEMBERS].sort(), `seed ${SEED}: exactly the glob's members`);
    for (const m of MEMBERS) assert.equal(watcher.held(CLUSTER).get(m), origin.getResource(CLUSTER, m)?.version, `seed ${SEED}: ${m}`);

    // The cache holds only resources the origin has, at the origin's versions.
    await sleep(300);
    for (const e of await cacheEntries(relay.adminPort!)) {
      const real = origin.getResource(e.typeUrl, e.name);
      assert.ok(real, `seed ${SEED}: cached ${e.name} is not an origin resource`);
      assert.equal(e.version, real.version, `seed ${SEED}: cached ${e.name}`);
    }
  });
});

/** A control plane that answers with random and mutated responses, and remembers what it sent that decodes. */
class FuzzingOrigin {
  private server: grpc.Server | undefined;
  /** `type\nname\nversion` of every resource in a response that decoded. */
  readonly sent = new Set<string>();
  streams = 0;
  port = 0;

  constructor(private readonly r: Rand) {}

  async start(): Promise<void> {
    const server = new grpc.Server();
    server.addService(deltaAdsServiceDefinition, { DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.onStream(call) });
    this.port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    this.server = server;
  }

  private response(): Buffer {
    const r = this.r;
    const typeUrl = r.chance(0.9) ? r.pick([LISTENER, CLUSTER]) : r.pick(TYPES);
    const resources: Resource[] = Array.from({ length: r.int(5) }, () => {
      const name = fuzzName(r, ['f', 'f', 'f', 'a']);
      const res: Resource = { name, version: r.chance(0.9) ? `fv${r.int(1000)}` : soup(r, 3) };
      if (r.chance(0.9)) res.resource = { type_url: r.chance(0.85) ? typeUrl : r.pick(TYPES), value: r.bytes(r.int(64)) };
      if (r.chance(0.05)) res.ttl = { seconds: r.int(3) };
      return res;
    });
    const resp: DeltaDiscoveryResponse = { type_url: typeUrl, nonce: String(r.int(1e6)), resources };
    if (r.chance(0.3)) resp.removed_resources = Array.from({ length: r.int(3) }, () => fuzzName(r, ['f', 'a']));
    let bytes = deltaResponseCodec.encode(resp);
    const kind = r.int(10);
    if (kind < 2) bytes = r.bytes(r.int(200));
    else if (kind < 5) bytes = mutate(r, bytes);
    try {
      const decoded = deltaResponseCodec.decode(bytes);
      for (const res of decoded.resources ?? []) this.sent.add(`${decoded.type_url ?? ''}\n${res.name ?? ''}\n${res.version ?? ''}`);
    } catch {
      // undecodable: the relay must drop it
    }
    return bytes;
  }

  private onStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    this.streams++;
    let open = true;
    const end = (): void => {
      if (!open) return;
      open = false;
      clearInterval(spam);
      call.end();
    };
    const send = (): void => {
      if (!open) return;
      if (this.r.chance(0.01)) return end(); // a control plane that hangs up
      call.write(this.response());
    };
    const spam = setInterval(send, 5);
    call.on('data', () => {
      for (let i = this.r.int(3); i > 0; i--) send();
    });
    call.on('error', end);
    call.on('end', end);
    call.on('cancelled', end);
  }

  stop(): void {
    this.server?.forceShutdown();
  }
}

test(`upstream fuzz: random control-plane responses never crash the relay nor leak into another authority (seed ${SEED})`, T(UPSTREAM_MS), async () => {
  const r = new Rand(SEED ^ 0xf00d);
  const fuzzing = new FuzzingOrigin(r);
  await fuzzing.start();
  const good = await TestOrigin.start({ label: 'origin-a' });
  try {
    await withSecureRelay({ admin: true, origin: good, extraAuthorities: [{ name: 'f', uris: [`grpc://127.0.0.1:${fuzzing.port}`] }] }, async ({ origin, relay, client }) => {
      origin.setResource(LISTENER, WATCHED, 'watched-1', 'v1');
      for (const m of MEMBERS) origin.setResource(CLUSTER, m, `member-${m}`, 'v1');
      const watcher = client({ nodeId: 'watcher' });
      watcher.subscribe(LISTENER, [WATCHED]);
      watcher.subscribe(CLUSTER, [WATCHED_GLOB]);
      await watcher.waitForVersion(LISTENER, WATCHED, 'v1');

      // A client of the fuzzed authority, subscribed to a few names and globs the fuzzer uses.
      const fSubs = [xdstp('f', LISTENER, 'fuzz/0/*'), xdstp('f', LISTENER, 'fuzz/1/*'), xdstp('f', CLUSTER, 'fuzz/2/*')];
      const fClient = client({ nodeId: 'f-client' });
      fClient.subscribe(LISTENER, fSubs.slice(0, 2));
      fClient.subscribe(CLUSTER, fSubs.slice(2));

      const lastVersion = await keepUpdating(origin, watcher, Date.now() + UPSTREAM_MS, SEED);
      process.stdout.write(`# upstream fuzz seed ${SEED}: ${fuzzing.streams} streams, ${fuzzing.sent.size} decodable resources sent, f-client got ${fClient.responses.length} responses\n`);

      assert.equal((await http(relay.adminPort!, 'GET', '/healthz')).status, 200);
      assert.equal(watcher.status, undefined);
      assert.deepEqual(watcher.violations, []);
      assert.deepEqual([...watcher.held(LISTENER).entries()], [[WATCHED, `v${lastVersion}`]], `seed ${SEED}: nothing from authority f reached a's client`);
      assert.deepEqual([...watcher.held(CLUSTER).keys()].sort(), [...MEMBERS].sort());

      // The fuzzed authority's client gets only names it subscribed to.
      for (const resp of fClient.responses) {
        for (const res of resp.resources ?? []) {
          assert.ok(fSubs.some((s) => subscriptionCovers(s, res.name ?? '')), `seed ${SEED}: f-client got ${res.name} it never subscribed to`);
        }
      }
      assert.ok(!fClient.violations.some((v) => v.startsWith('undecodable')), fClient.violations.join('\n'));

      // The cache: authority a exactly as its origin has it; authority f only what the fuzzer really sent.
      for (const e of await cacheEntries(relay.adminPort!)) {
        if (e.name.startsWith('xdstp://f/')) {
          assert.ok(fuzzing.sent.has(`${e.typeUrl}\n${e.name}\n${e.version}`), `seed ${SEED}: cached ${e.name}@${e.version} was never sent by the f origin`);
        } else {
          const real = origin.getResource(e.typeUrl, e.name);
          assert.ok(real && real.version === e.version, `seed ${SEED}: cached ${e.name}@${e.version} is not origin a's`);
        }
      }
    });
  } finally {
    fuzzing.stop();
    await good.stop();
  }
});
