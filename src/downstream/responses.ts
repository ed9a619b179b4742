import type { Variant } from '../cache/memory-cache';
import type { FanOut } from '../engine/fan-out';
import type { RelayMetrics } from '../metrics';
import { encodeDeltaResponse } from '../proto/delta-response';
import { withPrefix } from '../proto/message-frame';
import { encodeResourceError, type ResourceErrorInfo } from '../proto/resource-error';
import { encodeSotwResponse } from '../proto/sotw-response';
import type { OutgoingResponse, Pending } from './outgoing';
import type { ResponseBuilder, SubscriptionState } from './subscription-state';

/**
 * Benchmark ablation only (bench/ scenario 2, the CLI's hidden
 * `--no-share-responses`, bench/README.md): response builders made after
 * this call encode every client's response separately, to measure what
 * encoding once per round saves. Only the CLI calls it, for that flag.
 */
export function stopSharingResponses(): void {
  sharingResponses = false;
}
let sharingResponses = true;

/** Room left in every response for its type URL, nonce, version and field tags. */
const ENVELOPE_BYTES = 1024;

/** Nonces unique within a relay, hence within every stream; also SotW's version_info. */
export class NonceSource {
  private counter = 0;

  next(): string {
    return (++this.counter).toString(36);
  }
}

/** Splits `items` into runs whose sizes add up to at most `limit` (an item larger than the limit goes alone). */
export function chunkBySize<T>(items: readonly T[], size: (t: T) => number, limit: number): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const n = size(item);
    if (current.length > 0 && bytes + n > limit) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += n;
  }
  if (current.length > 0 || chunks.length === 0) chunks.push(current);
  return chunks;
}

function totalBytes(variants: readonly Variant[], of: (v: Variant) => number): number {
  let n = 0;
  for (const v of variants) n += of(v);
  return n;
}

const resourceBytes = (v: Variant): number => v.bytes.length + 8;
const payloadBytes = (v: Variant): number => (v.payload?.length ?? 0) + 8;

const NO_NAMES: readonly string[] = [];
/** What stands for "a whole state of the world" among a shared SotW answer's removed names (it has none). */
const WHOLE_STATE: readonly string[] = ['*'];
const NO_ERRORS: readonly Buffer[] = [];

/** `items` in runs that each fit in a response of `maxBytes` (all in one when they fit). */
function runsUnder(items: Variant[], size: (v: Variant) => number, maxBytes: number): Variant[][] {
  const limit = maxBytes - ENVELOPE_BYTES;
  return items.length > 1 && totalBytes(items, size) > limit ? chunkBySize(items, size, limit) : [items];
}

/** How one protocol encodes one response: its resources, nonce, removed names and encoded resource errors. */
type EncodeOne = (adds: Variant[], nonce: string, removes: readonly string[], errors: readonly Buffer[]) => Buffer;

/** One response per run, each under a new nonce; the removals and the errors go in the last. */
function encodeRuns(
  typeUrl: string,
  runs: Variant[][],
  removes: readonly string[],
  errors: readonly ResourceErrorInfo[],
  nonces: NonceSource,
  metrics: RelayMetrics,
  encode: EncodeOne,
): OutgoingResponse[] {
  const encodedErrors = errors.length > 0 ? errors.map(encodeResourceError) : NO_ERRORS;
  return runs.map((adds, i) => {
    const last = i === runs.length - 1;
    const nonce = nonces.next();
    const removed = last ? removes : NO_NAMES;
    const bytes = encode(adds, nonce, removed, last ? encodedErrors : NO_ERRORS);
    metrics.responsesEncoded.inc();
    return { typeUrl, nonce, bytes, framed: withPrefix(bytes), adds, removes: removed };
  });
}

/**
 * An encoding shared between clients, with what it was encoded from: its
 * type, variants (in order) and removed names. Kept under contentHash of
 * those, and compared in full on a hit (answerIfSame), so two contents of
 * one hash are never mixed up: the second is simply not shared.
 */
interface SharedAnswer {
  readonly typeUrl: string;
  readonly adds: readonly Variant[];
  readonly removes: readonly string[];
  readonly responses: OutgoingResponse[];
}

/**
 * A 32-bit hash of a response's content: its variants' ids in order, then its
 * removed names. Variant ids are unique, so one hash almost always means one
 * content. Computed for every client a round sends anything but a single
 * change (a reconnect storm: every client); a string of every id, as a key,
 * cost each such client a few kilobytes of garbage and the hashing of that
 * string. Exported for the test that finds two contents of one hash.
 */
export function contentHash(adds: readonly Variant[], removes: readonly string[]): number {
  let h = Math.imul(adds.length ^ 0x811c9dc5, 0x01000193) ^ removes.length;
  for (let i = 0; i < adds.length; i++) h = Math.imul(h ^ adds[i]!.id, 0x01000193);
  for (const name of removes) for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h;
}

/** `kept` when it was encoded from exactly this content; undefined otherwise (none kept, or another content of its hash). */
function answerIfSame(kept: SharedAnswer | undefined, typeUrl: string, adds: readonly Variant[], removes: readonly string[]): SharedAnswer | undefined {
  if (!kept || kept.typeUrl !== typeUrl || kept.adds.length !== adds.length || kept.removes.length !== removes.length) return undefined;
  for (let i = 0; i < adds.length; i++) if (kept.adds[i] !== adds[i]) return undefined;
  for (let i = 0; i < removes.length; i++) if (kept.removes[i] !== removes[i]) return undefined;
  return kept;
}

/**
 * Large answers that clients asking for the same thing get one after another
 * (a reconnect storm: each client's first request is its own round, but most
 * ask for the same names), shared across rounds. Kept under the hash of
 * their content and taken only for the same content: variants are immutable
 * and their ids unique, so a hit is byte-for-byte the answer. Bounded by
 * bytes; the oldest go first; one hash keeps one answer (the latest).
 *
 * An answer holding a variant the cache has retired (a newer version came,
 * or the last subscriber left and the resource was dropped) can never be
 * asked for again: its content names that variant. Such answers are
 * dropped as they are found — a few are looked at on every store, in turn
 * round the memo, and all of them once a second while any are kept — rather than
 * kept until the byte bound pushes them out: streams coming and going, each
 * re-fetching what the previous ones let go, would otherwise leave the heap
 * growing by every answer they were sent, up to the bound.
 */
class RecentAnswers {
  private readonly byHash = new Map<number, SharedAnswer>();
  /**
   * Where the sweep goes on from: a live iterator over byHash, which a Map's
   * iterator stays while entries come and go. Starting each sweep at the
   * front instead, and moving live answers to the back, left a run of
   * deleted slots at the front of the table that every sweep walked over
   * again until the table was rebuilt.
   */
  private cursor: MapIterator<[number, SharedAnswer]> | undefined;
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly maxBytes: number) {}

  /** Drops everything and stops the periodic sweep (the relay is stopping). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.byHash.clear();
    this.cursor = undefined;
    this.bytes = 0;
  }

  /** The answer kept for this content (its contentHash `hash`) that `state` may be sent. */
  get(hash: number, typeUrl: string, adds: readonly Variant[], removes: readonly string[], state: SubscriptionState): SharedAnswer | undefined {
    const hit = answerIfSame(this.byHash.get(hash), typeUrl, adds, removes);
    if (!hit) return undefined;
    if (isStale(hit.responses)) {
      this.drop(hash, hit);
      return undefined;
    }
    // A stream never gets the same nonce twice.
    if (hit.responses.some((r) => r.nonce === state.ledger.lastNonce || state.ledger.unacked.includes(r))) return undefined;
    return hit;
  }

  /** Keeps `answer` under `hash`, in place of whatever that hash kept. */
  set(hash: number, answer: SharedAnswer): void {
    if (this.closed) return;
    this.sweep(SWEEP_PER_STORE);
    this.scheduleSweep();
    const size = bytesOf(answer);
    if (size > this.maxBytes / 4) return;
    const prev = this.byHash.get(hash);
    if (prev) this.drop(hash, prev);
    this.byHash.set(hash, answer);
    this.bytes += size;
    // Only past the bound: even one step of an iterator walks the deleted slots at the table's front.
    if (this.bytes <= this.maxBytes) return;
    for (const [h, a] of this.byHash) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(h, a);
    }
  }

  /** Looks at up to `n` answers, going on from where the last sweep stopped (round the table): stale ones go. */
  sweep(n: number): void {
    for (let i = 0; i < n && this.byHash.size > 0; i++) {
      let next = (this.cursor ??= this.byHash.entries()).next();
      if (next.done) next = (this.cursor = this.byHash.entries()).next();
      if (next.done) return;
      const [h, a] = next.value;
      if (isStale(a.responses)) this.drop(h, a);
    }
  }

  /** A full sweep a second from now, and again after it while answers are kept (the timer never holds the process up). */
  private scheduleSweep(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.sweep(this.byHash.size);
      if (this.byHash.size > 0) this.scheduleSweep();
    }, SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  private drop(hash: number, answer: SharedAnswer): void {
    this.byHash.delete(hash);
    this.bytes -= bytesOf(answer);
  }
}

function bytesOf(answer: SharedAnswer): number {
  let size = 0;
  for (const r of answer.responses) size += r.bytes.length;
  return size;
}

/** Answers looked at per store: more than one, so stale answers go faster than new ones come. */
const SWEEP_PER_STORE = 4;
/** Every answer is looked at this often while any are kept: a full pass costs microseconds per answer. */
const SWEEP_INTERVAL_MS = 1000;

function carriesHeartbeat(adds: readonly Variant[]): boolean {
  for (const v of adds) if (v.payload === undefined) return true;
  return false;
}

function isStale(rs: readonly OutgoingResponse[]): boolean {
  for (const r of rs) for (const v of r.adds) if (v.retired) return true;
  return false;
}

/**
 * The payloads of `items`, each resource once: a SotW response carries no
 * names, and a client that subscribes a resource under two names (a glob and
 * one of its members) must not find it twice — Envoy and gRPC reject that.
 * The newest copy of a resource wins.
 */
function payloadsOnce(items: readonly Variant[]): Buffer[] {
  if (items.length < 2) return items.map((v) => v.payload!);
  const newest = new Map<string, Variant>();
  for (const v of items) {
    const seen = newest.get(v.key);
    if (!seen || v.id > seen.id) newest.set(v.key, v);
  }
  if (newest.size === items.length) return items.map((v) => v.payload!);
  const out: Buffer[] = [];
  for (const v of items) if (newest.get(v.key) === v) out.push(v.payload!);
  return out;
}

/** Answers with at least this many resources are worth sharing across rounds, however small... */
const RECENT_MIN_RESOURCES = 8;
/**
 * ...and answers of two or more resources this large too: encoding such an
 * answer per client (a glob's few members, as every sidecar of a service asks
 * for them) costs a copy of every byte and a buffer per client, which the
 * lookup of the content key, built for the round's memo anyway, does not.
 */
const RECENT_MIN_BYTES = 2048;

/** Whether an answer of `adds` is kept for the next clients asking for the same (RecentAnswers). */
function worthSharingAcrossRounds(adds: readonly Variant[]): boolean {
  if (adds.length >= RECENT_MIN_RESOURCES) return true;
  return adds.length >= 2 && totalBytes(adds, resourceBytes) >= RECENT_MIN_BYTES;
}

/** Incremental (delta) responses: the changed resources and removed names, split by size. */
export class DeltaResponses implements ResponseBuilder {
  readonly protocol = 'delta';
  private readonly recent = new RecentAnswers(32 * 1024 * 1024);

  constructor(
    private readonly nonces: NonceSource,
    private readonly metrics: RelayMetrics,
    private readonly maxBytes: number,
  ) {}

  /** Off only for the encode-once ablation benchmark (stopSharingResponses). */
  private readonly share = sharingResponses;

  /** Lets go of the answers kept across rounds (the server is shutting down). */
  close(): void {
    this.recent.close();
  }

  build(state: SubscriptionState, p: Pending, fan: FanOut | undefined): OutgoingResponse[] {
    // Errors are rare and per client: never shared.
    if (!fan || !this.share || p.errors.length > 0) return this.encode(state.typeUrl, p);
    const { typeUrl } = state;
    const memo = fan.memo(this.protocol);
    // The common case — one changed resource — is keyed by the shared variant itself. (No closure
    // here: this runs for every client a round reaches.)
    if (p.adds.length === 1 && p.removes.length === 0 && !p.forced) {
      const variant = p.adds[0]!;
      let responses = memo.get(variant) as OutgoingResponse[] | undefined;
      if (!responses) memo.set(variant, (responses = this.encode(typeUrl, p)));
      return responses;
    }
    // The round keeps one answer per hash, the latest: another content of the same hash replaces it.
    const hash = contentHash(p.adds, p.removes);
    const inRound = answerIfSame(memo.get(hash) as SharedAnswer | undefined, typeUrl, p.adds, p.removes);
    if (inRound) return inRound.responses;
    // A heartbeat's copy is made for one refresh and never offered again: an answer carrying one would never be hit.
    const acrossRounds = !p.forced && worthSharingAcrossRounds(p.adds) && !carriesHeartbeat(p.adds);
    let answer = acrossRounds ? this.recent.get(hash, typeUrl, p.adds, p.removes, state) : undefined;
    if (!answer) {
      answer = { typeUrl, adds: p.adds, removes: p.removes, responses: this.encode(typeUrl, p) };
      if (acrossRounds) this.recent.set(hash, answer);
    }
    memo.set(hash, answer);
    return answer.responses;
  }

  private encode(typeUrl: string, p: Pending): OutgoingResponse[] {
    const runs = runsUnder(p.adds, resourceBytes, this.maxBytes);
    return encodeRuns(typeUrl, runs, p.removes, p.errors, this.nonces, this.metrics, (adds, nonce, removes, errors) =>
      encodeDeltaResponse(
        typeUrl,
        adds.map((v) => v.bytes),
        removes,
        nonce,
        errors,
      ),
    );
  }
}

/**
 * State-of-the-world responses. Listener and Cluster carry the client's whole
 * state of the world every time (kept in `state.world`); other types carry
 * the changed resources, like delta. Removals of other types cannot be said
 * in SotW (the client's does-not-exist timer covers them).
 */
export class SotwResponses implements ResponseBuilder {
  readonly protocol = 'sotw';

  constructor(
    private readonly nonces: NonceSource,
    private readonly metrics: RelayMetrics,
    private readonly maxBytes: number,
  ) {}

  /** Off only for the encode-once ablation benchmark (stopSharingResponses). */
  private readonly share = sharingResponses;

  build(state: SubscriptionState, p: Pending, fan: FanOut | undefined): OutgoingResponse[] {
    const world = state.world;
    let items: Variant[];
    if (world) {
      if (p.adds.length === 0 && p.removes.length === 0 && !p.forced && p.errors.length === 0) return [];
      items = [...world.values()].filter((v) => v.payload !== undefined);
      items.sort((a, b) => a.id - b.id);
    } else {
      // Latest version per name; heartbeats (no payload) mean nothing in SotW.
      const byName = new Map<string, Variant>();
      for (const v of p.adds) if (v.payload !== undefined) byName.set(v.name, v);
      items = [...byName.values()];
      if (items.length === 0 && p.errors.length === 0 && !p.forced) return [];
    }
    const fullState = world !== undefined;
    if (!fan || !this.share || p.errors.length > 0) return this.encode(state.typeUrl, items, p, fullState);
    const { typeUrl } = state;
    const memo = fan.memo(this.protocol);
    if (!fullState && items.length === 1) {
      const variant = items[0]!;
      let responses = memo.get(variant) as OutgoingResponse[] | undefined;
      if (!responses) memo.set(variant, (responses = this.encode(typeUrl, items, p, false)));
      return responses;
    }
    // A whole state is encoded unsplit: it shares only with another whole state.
    const marker = fullState ? WHOLE_STATE : NO_NAMES;
    const hash = contentHash(items, marker);
    const inRound = answerIfSame(memo.get(hash) as SharedAnswer | undefined, typeUrl, items, marker);
    if (inRound) return inRound.responses;
    const responses = this.encode(typeUrl, items, p, fullState);
    memo.set(hash, { typeUrl, adds: items, removes: marker, responses });
    return responses;
  }

  private encode(typeUrl: string, items: Variant[], p: Pending, fullState: boolean): OutgoingResponse[] {
    // A full state of the world cannot be split: each response replaces the previous one.
    const runs = fullState ? [items] : runsUnder(items, payloadBytes, this.maxBytes);
    // Removals cannot be said in a state of the world.
    return encodeRuns(typeUrl, runs, NO_NAMES, p.errors, this.nonces, this.metrics, (chunk, nonce, _removes, errors) =>
      encodeSotwResponse(typeUrl, nonce, payloadsOnce(chunk), nonce, errors),
    );
  }
}
