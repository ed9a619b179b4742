/**
 * Row 6's relay-side work without gRPC or sockets: the subscription engine and
 * 2,000 delta clients' states (20 singletons each over 10,000 resources),
 * upstream updates of 10 changed resources, every response ACKed at once. It
 * prints the time per response spent applying the updates, fanning them out
 * and settling the ACKs (the relay's steps only, timed one by one).
 *
 *   node dist/bench/churn-in-process.js                      # caches left alone
 *   node dist/bench/churn-in-process.js --cold               # the relay's state pushed out of the caches between steps
 *   node dist/bench/churn-in-process.js --cold --against DIR # this build (B) against another build's dist/ (A)
 *
 * `--cold` walks a 48 MB buffer between the relay's steps (2 MB of it before
 * each update, 256 KB before each ACK), to push the relay's state out of the
 * core's own caches and the TLB, as other work (the kernel's, the other
 * clients') may between two touches of one client's state in row 6.
 * `--against` loads the other build beside this one, in one process, and feeds
 * both the same updates in alternating order, so the machine's drift falls on
 * both alike; it prints B ÷ A per block of updates and their median. Loaded
 * twice, one build gave 0.96–1.02 at the median in three runs on a 2-vCPU
 * VM: smaller differences are not resolved.
 */
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import type { SubscriptionState } from '../src/downstream/subscription-state';
import { distinctUniform } from './lib/names';
import { median, prng } from './lib/stats';

type Harness = typeof import('../test/support/engine-harness');
type Names = typeof import('../test/support/names');
type Messages = typeof import('../src/proto/messages');
type Origin = typeof import('../test/support/origin');
type ResponseCheck = typeof import('../src/upstream/response-check');

const RESOURCES = 10_000;
const CLIENTS = 2_000;
const SUBS = 20;
const CHANGES_PER_UPDATE = 10;
const PAYLOAD = Buffer.alloc(1024, 3);

/** Cache lines' worth of memory touched between steps (--cold). */
const DISTURB_BEFORE_UPDATE = 32_768;
const DISTURB_BEFORE_ACK = 4_096;

/** Walks `junk` at a stride no cache or prefetcher follows, writing as it goes. */
class Disturber {
  private readonly junk = new Float64Array(6 * 1024 * 1024);
  private at = 0;
  sum = 0;
  constructor(private readonly on: boolean) {}
  touch(lines: number): void {
    if (!this.on) return;
    const junk = this.junk;
    for (let i = 0; i < lines; i++) {
      this.at = (this.at + 40_961) % junk.length;
      this.sum += junk[this.at]!;
      junk[this.at] = i;
    }
  }
}

/** One build's engine and client states, fed updates by name index. */
interface Relay {
  /** A client subscribing to the resources of indexes `picks`. */
  addClient(picks: readonly number[]): void;
  /** Applies one update of `changed` (resource indexes) at `version`, then ACKs every response it caused. */
  step(changed: readonly number[], version: string): void;
  /** Time in the relay's steps and responses sent since the last reset. */
  nanos: bigint;
  responses: number;
}

function loadRelay(dist: string, disturb: Disturber): Relay {
  const load = <T>(rel: string): T => require(path.join(dist, rel)) as T;
  const { setup, L } = load<Harness>('test/support/engine-harness.js');
  const { LISTENER } = load<Names>('test/support/names.js');
  const { resourceCodec } = load<Messages>('src/proto/messages.js');
  const { makeResource } = load<Origin>('test/support/origin.js');
  const { checkContent } = load<ResponseCheck>('src/upstream/response-check.js');
  const h = setup();
  const name = (i: number): string => L(`churn/r${i}`);
  const encode = (i: number, version: string): Buffer => resourceCodec.encode(makeResource(LISTENER, name(i), PAYLOAD, version));
  const apply = (encoded: Buffer[]): void => {
    const checked = checkContent(LISTENER, encoded, []);
    if (!checked.ok) throw new Error(checked.message);
    h.engine.onResponse(h.a, { typeUrl: LISTENER, resources: checked.resources, removed: [], errors: [], receivedAt: process.hrtime.bigint() });
  };
  let acks: Array<[SubscriptionState, string]> = [];
  const relay: Relay = {
    nanos: 0n,
    responses: 0,
    addClient(picks) {
      const client = h.client();
      // Every response is ACKed once the update is applied, as the load generator's clients do.
      client.stream.send = (state, r) => {
        relay.responses++;
        acks.push([state, r.nonce]);
      };
      client.subscribe(picks.map(name));
    },
    step(changed, version) {
      const encoded = changed.map((i) => encode(i, version));
      disturb.touch(DISTURB_BEFORE_UPDATE);
      let t = process.hrtime.bigint();
      apply(encoded);
      relay.nanos += process.hrtime.bigint() - t;
      const answered = acks;
      acks = [];
      for (const [state, nonce] of answered) {
        disturb.touch(DISTURB_BEFORE_ACK);
        t = process.hrtime.bigint();
        state.acknowledge(nonce, undefined);
        relay.nanos += process.hrtime.bigint() - t;
      }
    },
  };
  return relay;
}

function main(): void {
  const { values } = parseArgs({ options: { cold: { type: 'boolean', default: false }, against: { type: 'string' }, updates: { type: 'string', default: '7000' } } });
  const updates = Number(values.updates);
  const disturb = new Disturber(values.cold ?? false);
  const here = path.resolve(__dirname, '..');
  const builds: Array<[string, Relay]> = [];
  if (values.against) builds.push(['A', loadRelay(path.resolve(values.against), disturb)]);
  builds.push([values.against ? 'B' : 'this build', loadRelay(here, disturb)]);
  // The builds' clients are made in turn, so neither build's state sits in younger or older memory than the other's.
  const picker = prng(12_345);
  for (let c = 0; c < CLIENTS; c++) {
    const picks = distinctUniform(RESOURCES, SUBS, picker);
    for (const [, relay] of builds) relay.addClient(picks);
  }
  for (let i = 0; i < RESOURCES; i += 20) {
    const first = Array.from({ length: 20 }, (_, j) => i + j);
    for (const [, relay] of builds) relay.step(first, 'v0');
  }
  const rand = prng(777);
  let version = 0;
  const nextUpdate = (): [number[], string] => [distinctUniform(RESOURCES, CHANGES_PER_UPDATE, rand), `v${++version}`];
  const feed = (n: number): void => {
    for (let i = 0; i < n; i++) {
      const [changed, v] = nextUpdate();
      // Which build goes first alternates, so neither always runs right after the other's work.
      const order = i % 2 === 0 ? builds : [...builds].reverse();
      for (const [, relay] of order) relay.step(changed, v);
    }
  };
  feed(1000);
  const blocks = 7;
  const ratios: number[] = [];
  for (let b = 0; b < blocks; b++) {
    for (const [, relay] of builds) {
      relay.nanos = 0n;
      relay.responses = 0;
    }
    feed(Math.ceil(updates / blocks));
    const perResponse = builds.map(([label, relay]) => [label, Number(relay.nanos) / 1000 / relay.responses] as const);
    let line = `block ${b + 1}: ${perResponse.map(([label, us]) => `${label} ${us.toFixed(2)} µs`).join(', ')} per response`;
    if (perResponse.length === 2) {
      ratios.push(perResponse[1]![1] / perResponse[0]![1]);
      line += `, B ÷ A ${ratios[b]!.toFixed(3)}`;
    }
    console.log(line);
  }
  if (ratios.length > 0) console.log(`median B ÷ A ${median(ratios).toFixed(3)}`);
  // Keeps the disturbing walk from being optimized away.
  if (Number.isNaN(disturb.sum)) console.log('');
}

main();
