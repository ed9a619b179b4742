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

/** Content signature for sharing an encoding between clients: variant ids, then removed names. */
function signature(typeUrl: string, adds: readonly Variant[], removes: readonly string[]): string {
  let sig = typeUrl;
  for (const v of adds) sig += `,${v.id}`;
  if (removes.length > 0) sig += `\n${removes.join('\n')}`;
  return sig;
}

/** The responses for `key` in this fan-out round: encoded by the first client that needs them, shared by the rest. */
function shared(fan: FanOut, protocol: string, key: unknown, encode: () => OutgoingResponse[]): OutgoingResponse[] {
  const memo = fan.memo(protocol);
  let responses = memo.get(key) as OutgoingResponse[] | undefined;
  if (!responses) {
    responses = encode();
    memo.set(key, responses);
  }
  return responses;
}

/**
 * Large answers that clients asking for the same thing get one after another
 * (a reconnect storm: each client's first request is its own round, but most
 * ask for the same names), shared across rounds. Keyed by content: variants
 * are immutable and their ids unique, so a hit is byte-for-byte the answer.
 * Bounded by bytes; the oldest go first.
 *
 * An answer holding a variant the cache has retired (a newer version came,
 * or the last subscriber left and the resource was dropped) can never be
 * asked for again: its key names that variant's id. Such answers are
 * dropped as they are found — a few of the oldest are looked at on every
 * store, and all of them once a second while any are kept — rather than
 * kept until the byte bound pushes them out: streams coming and going, each
 * re-fetching what the previous ones let go, would otherwise leave the heap
 * growing by every answer they were sent, up to the bound.
 */
class RecentAnswers {
  private readonly byKey = new Map<string, OutgoingResponse[]>();
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly maxBytes: number) {}

  /** Drops everything and stops the periodic sweep (the relay is stopping). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.byKey.clear();
    this.bytes = 0;
  }

  get(key: string, state: SubscriptionState): OutgoingResponse[] | undefined {
    const hit = this.byKey.get(key);
    if (!hit) return undefined;
    if (isStale(hit)) {
      this.drop(key, hit);
      return undefined;
    }
    // A stream never gets the same nonce twice.
    if (hit.some((r) => r.nonce === state.ledger.lastNonce || state.ledger.unacked.includes(r))) return undefined;
    return hit;
  }

  set(key: string, responses: OutgoingResponse[]): void {
    if (this.closed) return;
    this.sweep(SWEEP_PER_STORE);
    this.scheduleSweep();
    let size = 0;
    for (const r of responses) size += r.bytes.length;
    if (size > this.maxBytes / 4) return;
    const prev = this.byKey.get(key);
    if (prev) this.drop(key, prev);
    this.byKey.set(key, responses);
    this.bytes += size;
    for (const [k, rs] of this.byKey) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(k, rs);
    }
  }

  /** Looks at up to `n` of the oldest answers: stale ones go, live ones move to the back. */
  sweep(n: number): void {
    for (let i = 0; i < n && this.byKey.size > 0; i++) {
      const [k, rs] = this.byKey.entries().next().value as [string, OutgoingResponse[]];
      this.byKey.delete(k);
      if (isStale(rs)) {
        for (const r of rs) this.bytes -= r.bytes.length;
      } else {
        this.byKey.set(k, rs);
      }
    }
  }

  /** A full sweep a second from now, and again after it while answers are kept (the timer never holds the process up). */
  private scheduleSweep(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.sweep(this.byKey.size);
      if (this.byKey.size > 0) this.scheduleSweep();
    }, SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  private drop(key: string, rs: OutgoingResponse[]): void {
    this.byKey.delete(key);
    for (const r of rs) this.bytes -= r.bytes.length;
  }
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
    // The common case — one changed resource — is keyed by the shared variant itself: no string building.
    if (p.adds.length === 1 && p.removes.length === 0 && !p.forced) return shared(fan, this.protocol, p.adds[0], () => this.encode(state.typeUrl, p));
    const key = signature(state.typeUrl, p.adds, p.removes);
    return shared(fan, this.protocol, key, () => {
      // A heartbeat's copy is made for one refresh and never offered again: an answer carrying one would never be hit.
      if (p.forced || !worthSharingAcrossRounds(p.adds) || carriesHeartbeat(p.adds)) return this.encode(state.typeUrl, p);
      const hit = this.recent.get(key, state);
      if (hit) return hit;
      const fresh = this.encode(state.typeUrl, p);
      this.recent.set(key, fresh);
      return fresh;
    });
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
    if (!fan || !this.share || p.errors.length > 0) return this.encode(state.typeUrl, items, p, world !== undefined);
    const key: unknown = !world && items.length === 1 ? items[0] : signature(state.typeUrl, items, world ? ['*'] : []);
    return shared(fan, this.protocol, key, () => this.encode(state.typeUrl, items, p, world !== undefined));
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
