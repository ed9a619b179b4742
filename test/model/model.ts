/**
 * The reference model: what each client of the relay must hold, computed from
 * the steps alone. It is the relay's promise written as plain code —
 *
 *   each client holds exactly what its subscriptions cover, at the control
 *   plane's current version, and is never told that a live resource was removed —
 *
 * with no gRPC, no timers and nothing from src/: the relay must not judge
 * itself. Names are canonicalized and glob membership decided by
 * test/support/names.ts, an independent implementation of XDSTP.md.
 *
 * How to read a client's view (what the checker may assume):
 *
 * - Delta: the client holds `expected()` exactly — names as it knows them
 *   (a singleton under each spelling it subscribed, glob members under their
 *   canonical names, legacy names verbatim) at the control plane's current
 *   version. A client forgets what it unsubscribes by itself (Envoy does; the
 *   protocol does not require the server to confirm an unsubscribe), so the
 *   checker drops held names no subscription covers any more (see `covers`).
 * - SotW, full-state types (Listener, Cluster): the view is the last full
 *   response, which must equal `expected()`: the names inside the payloads,
 *   current versions. A client drops what it stops asking for.
 * - SotW names are canonical in every answer and may be given in any spelling
 *   to every query: a SotW response carries only payloads, so a client tells
 *   resources apart by the (canonical) name inside them, not by its spelling.
 * - SotW, per-name types: SotW cannot say "removed", so a name the client
 *   once received may stay after it was deleted or stopped being asked for.
 *   Every name of `expected()` must be present at its version; any other name
 *   present must satisfy `mayLinger()`.
 *
 * At a quiet point (no step in flight, the relay idle), the views must match.
 */
import { canonical, globKeyOf, isGlob, isXdstp, keyOf, parseName } from '../support/names';
import type { Authority, ModelOptions, Protocol, ReferenceModel, Step } from './types';

/** What one spelling means on a stream of one type. */
export type Subscription =
  | { kind: 'refused' }
  /** Every legacy resource of the type on the default upstream. */
  | { kind: 'wildcard' }
  /** Direct members of the canonical glob `key` on `authority`. */
  | { kind: 'glob'; authority: string; key: string }
  /** The resource whose canonical name is `key`. */
  | { kind: 'singleton'; authority: string; key: string }
  /** The default upstream's resource named `key` (verbatim). */
  | { kind: 'legacy'; key: string };

const REFUSED: Subscription = { kind: 'refused' };
const WILDCARD = '*';

/**
 * The spec's classification of a subscription. Refused: a malformed xdstp
 * name, one carrying a `#` directive, one naming an unknown authority or
 * another type than the stream's; a legacy name without a default upstream.
 */
export function classify(opts: ModelOptions, typeUrl: string, spelling: string): Subscription {
  if (spelling === WILDCARD) return { kind: 'wildcard' };
  if (!isXdstp(spelling)) return opts.hasDefaultUpstream ? { kind: 'legacy', key: spelling } : REFUSED;
  if (spelling.includes('#')) return REFUSED;
  let parsed;
  try {
    parsed = parseName(spelling);
  } catch {
    return REFUSED;
  }
  const authority = parsed.authority.toString('utf8');
  if (!opts.authorities.has(authority)) return REFUSED;
  if (`type.googleapis.com/${parsed.type}` !== typeUrl) return REFUSED;
  const key = canonical(spelling);
  return isGlob(spelling) ? { kind: 'glob', authority, key } : { kind: 'singleton', authority, key };
}

/** Whether the resource keyed `key` is a direct member of the canonical glob `glob` (a glob is no member of itself). */
function isMember(key: string, glob: string): boolean {
  if (!isXdstp(key) || isGlob(key)) return false;
  try {
    return globKeyOf(key) === glob;
  } catch {
    return false;
  }
}

/** A name as the model keys a client's view: SotW clients tell resources apart canonically. */
function heldName(protocol: Protocol, name: string): string {
  return protocol === 'sotw' ? keyOf(name) : name;
}

/** One resource of one control plane, as a map key. */
function unseenId(authority: Authority, typeUrl: string, key: string): string {
  return `${authority ?? ''}\n${typeUrl}\n${key}`;
}

/** Where a resource the client names lives: its upstream and its key there. */
function locate(name: string): { authority: Authority; key: string } {
  if (!isXdstp(name)) return { authority: null, key: name };
  try {
    const p = parseName(name);
    return { authority: p.authority.toString('utf8'), key: canonical(name) };
  } catch {
    return { authority: null, key: name };
  }
}

/** A NACK on a per-name view: the client keeps `kept` while the resource is still at `version` ('' = absent). */
interface NackRecord {
  version: string;
  kept: string | undefined;
}

interface TypeState {
  /** Delta: the subscribed spellings. SotW: the name list as last sent. */
  names: Set<string>;
  /** The legacy wildcard (an empty first request on a Listener/Cluster type). */
  legacyWildcard: boolean;
  /** Whether the current stream has sent a request of this type (the next one is then not the first). */
  requestedOnStream: boolean;
  /** Per-name NACK records, by name as the client holds it (delta; SotW per-name types). */
  nacks: Map<string, NackRecord>;
  /** SotW full-state types: the rejected full state, by name: its version there ('' = left out) and what the client kept. */
  pinned: Map<string, NackRecord>;
}

interface ClientState {
  protocol: Protocol;
  /** The relay the client's stream is on (two relays in runs with Redis). */
  relay: 0 | 1;
  types: Map<string, TypeState>;
}

export class Model implements ReferenceModel {
  /** The control plane's resources: authority → type URL → key → version. */
  private readonly store = new Map<Authority, Map<string, Map<string, string>>>();
  /** Authorities whose control plane is stopped: the relay learns their changes when they start again. */
  private readonly stopped = new Set<Authority>();
  /** Changes on stopped control planes, by resource: the version the relay last saw (undefined: absent). */
  private readonly unseen = new Map<string, { authority: Authority; typeUrl: string; key: string; before: string | undefined }>();
  /** Clients with an open stream. */
  private readonly clientStates = new Map<string, ClientState>();

  constructor(private readonly opts: ModelOptions) {}

  // ------------------------------------------------------------------ steps

  apply(step: Step): void {
    switch (step.op) {
      case 'connect':
        // A known id connecting again is a new client: nothing subscribed.
        this.clientStates.set(step.client, { protocol: step.protocol, relay: 0, types: new Map() });
        return;
      case 'request':
        this.request(step.client, step.typeUrl, step.subscribe, step.unsubscribe);
        return;
      case 'reconnect':
        this.newStream(step.client);
        return;
      case 'moveClient': {
        const client = this.clientStates.get(step.client);
        if (!client) return;
        client.relay = client.relay === 0 ? 1 : 0;
        this.newStream(step.client);
        return;
      }
      case 'relayRestart':
        // The streams on the restarted relay end; each of its clients opens a new one.
        for (const [id, client] of this.clientStates) if (client.relay === 0) this.newStream(id);
        return;
      case 'disconnect':
        this.clientStates.delete(step.client);
        return;
      case 'put':
        this.put(step.authority, step.typeUrl, step.name, step.version);
        return;
      case 'delete':
        this.remove(step.authority, step.typeUrl, step.name);
        return;
      // An unreachable, restarted or replaced control plane keeps its resources
      // and takes no configuration away; flow control, waiting and a cleared
      // shared tier change nothing a client must hold once things settle.
      case 'cpStop':
        this.stopped.add(step.authority);
        return;
      case 'cpStart':
        this.started(step.authority);
        return;
      case 'nackNext':
      case 'stall':
      case 'resume':
      case 'cpRestart':
      case 'failover':
      case 'redisRestartEmpty':
      case 'wait':
        return;
    }
  }

  /**
   * One request. Steps for a client without an open stream are ignored, so a
   * shrunk sequence that lost its `connect` stays meaningful.
   *
   * Delta: subscribe is added, then unsubscribe removed (a name in both ends
   * unsubscribed, like SotW's list). The stream's first request of a
   * legacy-wildcard type that names nothing at all is the legacy wildcard; it
   * continues when names are added and ends on an unsubscribe of `*`.
   * SotW: the list becomes (list ∪ subscribe) ∖ unsubscribe and is sent whole;
   * an empty list is the legacy wildcard only while the stream has never sent a
   * non-empty list of that type; after that a list without `*` has no wildcard.
   */
  private request(id: string, typeUrl: string, subscribe: string[], unsubscribe: string[]): void {
    const client = this.clientStates.get(id);
    if (!client) return;
    let ts = client.types.get(typeUrl);
    if (!ts) {
      ts = { names: new Set(), legacyWildcard: false, requestedOnStream: false, nacks: new Map(), pinned: new Map() };
      client.types.set(typeUrl, ts);
    }
    const first = !ts.requestedOnStream;
    ts.requestedOnStream = true;
    const before = new Set(ts.names);
    const wildcardBefore = this.hasWildcard(ts);
    for (const s of subscribe) ts.names.add(s);
    for (const s of unsubscribe) ts.names.delete(s);
    const legacyType = this.opts.legacyWildcardTypes.has(typeUrl);

    if (client.protocol === 'delta') {
      if (first && legacyType && subscribe.length === 0 && unsubscribe.length === 0) ts.legacyWildcard = true;
      if (unsubscribe.includes(WILDCARD) && !subscribe.includes(WILDCARD)) ts.legacyWildcard = false;
      // Asking again means "send it again": every name a subscribed spelling
      // holds is sent anew, and so is a name unsubscribed while still covered.
      for (const s of subscribe) this.endNacksHeldBy(ts, client.protocol, typeUrl, s);
      for (const s of unsubscribe) ts.nacks.delete(s);
    } else {
      if (first && legacyType && ts.names.size === 0) ts.legacyWildcard = true;
      if (ts.names.size > 0) ts.legacyWildcard = false;
      // An unchanged list is no news to the server; only newly listed names
      // are sent again. `*` listed while the legacy wildcard holds is the
      // same subscription under another form: nothing new.
      const added = [...ts.names].filter((s) => !before.has(s) && !(s === WILDCARD && wildcardBefore));
      for (const s of added) this.endNacksHeldBy(ts, client.protocol, typeUrl, s);
      // A rejected full state stands until the relay sends another: it answers
      // every newly listed name (the resource, or that it does not exist), but
      // a list that only drops names gets no answer.
      const listed = added.length > 0 || (this.hasWildcard(ts) && !wildcardBefore);
      if (listed) ts.pinned.clear();
    }
    // A record for a name the client no longer holds is moot.
    for (const name of [...ts.nacks.keys()]) {
      if (!this.coversName(client.protocol, typeUrl, ts, name)) ts.nacks.delete(name);
    }
  }

  /**
   * A new stream with the same subscriptions: NACK records end (the relay
   * starts over and sends current versions). The client re-sends, per type,
   * what it subscribes — the legacy wildcard as an empty first request when it
   * names nothing else, else as an explicit `*` — and sends nothing for a type
   * with nothing subscribed, whose next request is then the stream's first.
   */
  private newStream(id: string): void {
    const client = this.clientStates.get(id);
    if (!client) return;
    for (const ts of client.types.values()) {
      ts.nacks.clear();
      ts.pinned.clear();
      ts.requestedOnStream = ts.names.size > 0 || ts.legacyWildcard;
    }
  }

  private put(authority: Authority, typeUrl: string, name: string, version: string): void {
    const key = keyOf(name);
    const resources = this.resourcesOf(authority, typeUrl, true);
    const prev = resources.get(key);
    resources.set(key, version);
    if (prev !== version) this.changed(authority, typeUrl, key, prev);
  }

  private remove(authority: Authority, typeUrl: string, name: string): void {
    const key = keyOf(name);
    const resources = this.resourcesOf(authority, typeUrl, false);
    const prev = resources?.get(key);
    if (prev === undefined) return;
    resources!.delete(key);
    this.changed(authority, typeUrl, key, prev);
  }

  /**
   * A resource changed (it was at `prev`): NACK records about it end; a SotW
   * full-state view covering it gets a new full state — once the relay can
   * see the change, which on a stopped control plane is when it starts again.
   */
  private changed(authority: Authority, typeUrl: string, key: string, prev: string | undefined): void {
    for (const client of this.clientStates.values()) {
      const ts = client.types.get(typeUrl);
      if (!ts) continue;
      for (const held of [...ts.nacks.keys()]) {
        const at = locate(held);
        if (at.authority === authority && at.key === key) ts.nacks.delete(held);
      }
    }
    if (!this.stopped.has(authority)) {
      this.endRejectedStates(authority, typeUrl, key);
      return;
    }
    const id = unseenId(authority, typeUrl, key);
    // The relay last saw the version before the first change it has not seen.
    if (!this.unseen.has(id)) this.unseen.set(id, { authority, typeUrl, key, before: prev });
  }

  /** A change to `key` reaches the relay: every rejected SotW full state covering it is outdated. */
  private endRejectedStates(authority: Authority, typeUrl: string, key: string): void {
    if (!this.opts.fullStateTypes.has(typeUrl)) return;
    for (const client of this.clientStates.values()) {
      const ts = client.types.get(typeUrl);
      if (client.protocol !== 'sotw' || !ts || ts.pinned.size === 0) continue;
      if (this.subscriptionsOf(ts, typeUrl).some((sub) => this.subCoversResource(sub, authority, key))) ts.pinned.clear();
    }
  }

  /** A stopped control plane starts again: the relay learns what changed there meanwhile. */
  private started(authority: Authority): void {
    if (!this.stopped.delete(authority)) return;
    for (const [id, change] of [...this.unseen]) {
      if (change.authority !== authority) continue;
      this.unseen.delete(id);
      this.endRejectedStates(authority, change.typeUrl, change.key);
    }
  }

  /** The version of `name` (as a client holds it) the relay can have seen: `view`'s, unless its control plane changed it while stopped. */
  private seenVersion(typeUrl: string, name: string, view: ReadonlyMap<string, string>): string | undefined {
    const at = locate(name);
    const change = this.unseen.get(unseenId(at.authority, typeUrl, at.key));
    return change ? change.before : view.get(name);
  }

  // ------------------------------------------------------------------ NACKs

  /**
   * A NACK the checker observed: `client` rejected `version` of `name` and
   * keeps `kept` (undefined: it holds nothing under that name).
   *
   * Delta and SotW per-name types: the record lasts while the control plane's
   * version of that resource is still `version` — pass '' when the rejected
   * response removed the name (then: while it does not exist) — and ends when
   * the client subscribes it again, unsubscribes it, or its stream ends.
   *
   * SotW full-state types (a NACK rejects a whole state of the world): call it
   * for every name of the rejected response (`kept` may equal `version`) and,
   * with version '', for every held name the response left out. The client's
   * kept view stands while the relay owes it no new full state: while each
   * noted name is still at its rejected version (absent for ''), no resource
   * the client covers has changed since, its list is unchanged and its stream
   * the same. Noting every name, not only the differing ones, lets the model
   * see that a change it applied before the NACK arrived (a burst) already
   * outdated the rejected state.
   */
  noteNack(client: string, typeUrl: string, name: string, version: string, kept: string | undefined): void {
    const c = this.clientStates.get(client);
    const ts = c?.types.get(typeUrl);
    if (!c || !ts) return;
    const held = heldName(c.protocol, name);
    if (c.protocol === 'sotw' && this.opts.fullStateTypes.has(typeUrl)) ts.pinned.set(held, { version, kept });
    else ts.nacks.set(held, { version, kept });
  }

  /**
   * Ends the per-name NACK records of names that spelling `s` holds: it was
   * just subscribed again, and asking again means "send it again". A name is
   * answered anew (resource or removal); a glob or the wildcard is answered
   * with the members that exist, so a NACKed removal of a member stands.
   */
  private endNacksHeldBy(ts: TypeState, protocol: Protocol, typeUrl: string, s: string): void {
    const sub = classify(this.opts, typeUrl, s);
    const collection = sub.kind === 'glob' || sub.kind === 'wildcard';
    for (const name of [...ts.nacks.keys()]) {
      if (!this.subHoldsName(protocol, sub, s, name)) continue;
      if (collection && !this.exists(typeUrl, name)) continue;
      ts.nacks.delete(name);
    }
  }

  /** Whether the resource a client holds under `name` exists upstream now. */
  private exists(typeUrl: string, name: string): boolean {
    const at = locate(name);
    return this.resourcesOf(at.authority, typeUrl, false)?.has(at.key) ?? false;
  }

  // ---------------------------------------------------------------- queries

  clients(): string[] {
    return [...this.clientStates.keys()];
  }

  typesOf(client: string): string[] {
    return [...(this.clientStates.get(client)?.types.keys() ?? [])];
  }

  expected(client: string, typeUrl: string): Map<string, string> {
    const c = this.clientStates.get(client);
    const ts = c?.types.get(typeUrl);
    if (!c || !ts) return new Map();
    const view = this.covered(c.protocol, typeUrl, ts);
    if (c.protocol === 'sotw' && this.opts.fullStateTypes.has(typeUrl)) {
      // Judged by what the relay can have seen: a stopped control plane's changes reach it when it starts again.
      const stillRejected = [...ts.pinned].every(([name, p]) => this.seenVersion(typeUrl, name, view) === (p.version === '' ? undefined : p.version));
      if (!stillRejected) return view;
      // The kept state matters only for what the client still asks for: a
      // name it dropped from its list is gone from its view, NACK or not.
      for (const [name, p] of ts.pinned) {
        if (p.kept === undefined) view.delete(name);
        else if (this.coversName(c.protocol, typeUrl, ts, name)) view.set(name, p.kept);
      }
      return view;
    }
    for (const [name, nack] of ts.nacks) {
      if (!this.coversName(c.protocol, typeUrl, ts, name)) continue;
      const at = locate(name);
      const now = this.resourcesOf(at.authority, typeUrl, false)?.get(at.key);
      const stillRejected = nack.version === '' ? now === undefined : now === nack.version;
      if (!stillRejected) continue;
      if (nack.kept === undefined) view.delete(name);
      else view.set(name, nack.kept);
    }
    return view;
  }

  mayRemove(client: string, typeUrl: string, name: string): boolean {
    const c = this.clientStates.get(client);
    const ts = c?.types.get(typeUrl);
    if (!c || !ts) return true;
    return !this.covered(c.protocol, typeUrl, ts).has(heldName(c.protocol, name));
  }

  covers(client: string, typeUrl: string, name: string): boolean {
    const c = this.clientStates.get(client);
    const ts = c?.types.get(typeUrl);
    if (!c || !ts) return false;
    return this.coversName(c.protocol, typeUrl, ts, heldName(c.protocol, name));
  }

  /**
   * SotW per-name types only: whether `name` may be in the client's view
   * although `expected()` lacks it — a name it received earlier that was since
   * deleted or is no longer asked for (SotW cannot say "removed"). Never for
   * delta clients or full-state types, whose views are exact.
   */
  mayLinger(client: string, typeUrl: string, name: string): boolean {
    const c = this.clientStates.get(client);
    if (!c || c.protocol !== 'sotw' || this.opts.fullStateTypes.has(typeUrl)) return false;
    return !this.expected(client, typeUrl).has(heldName(c.protocol, name));
  }

  /** The protocol of an open client's stream. */
  protocolOf(client: string): Protocol | undefined {
    return this.clientStates.get(client)?.protocol;
  }

  /** The client's subscriptions of a type as it sent them (delta: its set; SotW: its list) and its legacy wildcard. */
  subscriptions(client: string, typeUrl: string): { names: string[]; legacyWildcard: boolean } {
    const ts = this.clientStates.get(client)?.types.get(typeUrl);
    return { names: [...(ts?.names ?? [])], legacyWildcard: ts?.legacyWildcard ?? false };
  }

  /** Names whose expected value a NACK decides now (the client keeps what it had instead of the current version). */
  nackedNames(client: string, typeUrl: string): string[] {
    const c = this.clientStates.get(client);
    const ts = c?.types.get(typeUrl);
    if (!c || !ts) return [];
    const current = this.covered(c.protocol, typeUrl, ts);
    const shown = this.expected(client, typeUrl);
    const names = new Set([...ts.nacks.keys(), ...ts.pinned.keys()]);
    return [...names].filter((n) => current.get(n) !== shown.get(n));
  }

  upstreamKeys(authority: Authority): Set<string> {
    const keys = new Set<string>();
    for (const c of this.clientStates.values()) {
      for (const [typeUrl, ts] of c.types) {
        for (const sub of this.subscriptionsOf(ts, typeUrl)) {
          if (sub.kind === 'wildcard') {
            if (authority === null && this.opts.hasDefaultUpstream) keys.add(`${typeUrl}\n${WILDCARD}`);
          } else if (sub.kind === 'legacy') {
            if (authority === null) keys.add(`${typeUrl}\n${sub.key}`);
          } else if (sub.kind !== 'refused' && sub.authority === authority) {
            keys.add(`${typeUrl}\n${sub.key}`);
          }
        }
      }
    }
    return keys;
  }

  // -------------------------------------------------------------- coverage

  private hasWildcard(ts: TypeState): boolean {
    return ts.legacyWildcard || ts.names.has(WILDCARD);
  }

  /** The client's subscriptions of a type, the legacy wildcard included. */
  private subscriptionsOf(ts: TypeState, typeUrl: string): Subscription[] {
    const subs = [...ts.names].map((s) => classify(this.opts, typeUrl, s));
    if (ts.legacyWildcard) subs.push({ kind: 'wildcard' });
    return subs;
  }

  /**
   * What the subscriptions cover that exists now, by name as the client holds
   * it, at the control plane's version (no NACK taken into account).
   * Delta: a singleton under the client's spelling, glob members canonical,
   * legacy names verbatim. SotW: canonical names.
   */
  private covered(protocol: Protocol, typeUrl: string, ts: TypeState): Map<string, string> {
    const view = new Map<string, string>();
    const hold = (spelling: string | undefined, version: string, key: string): void => {
      view.set(protocol === 'sotw' ? key : (spelling ?? key), version);
    };
    const addSub = (sub: Subscription, spelling: string | undefined): void => {
      switch (sub.kind) {
        case 'refused':
          return;
        case 'wildcard': {
          if (!this.opts.hasDefaultUpstream) return;
          for (const [key, version] of this.resourcesOf(null, typeUrl, false) ?? []) if (!isXdstp(key)) hold(undefined, version, key);
          return;
        }
        case 'glob': {
          for (const [key, version] of this.resourcesOf(sub.authority, typeUrl, false) ?? []) {
            if (isMember(key, sub.key)) hold(undefined, version, key);
          }
          return;
        }
        case 'singleton':
        case 'legacy': {
          const version = this.resourcesOf(sub.kind === 'legacy' ? null : sub.authority, typeUrl, false)?.get(sub.key);
          if (version !== undefined) hold(spelling, version, sub.key);
          return;
        }
      }
    };
    for (const s of ts.names) addSub(classify(this.opts, typeUrl, s), s);
    if (ts.legacyWildcard) addSub({ kind: 'wildcard' }, undefined);
    return view;
  }

  /** Whether some subscription of the client covers `name` as the client would hold it (existing or not). */
  private coversName(protocol: Protocol, typeUrl: string, ts: TypeState, name: string): boolean {
    for (const s of ts.names) if (this.subHoldsName(protocol, classify(this.opts, typeUrl, s), s, name)) return true;
    return ts.legacyWildcard && this.subHoldsName(protocol, { kind: 'wildcard' }, WILDCARD, name);
  }

  /**
   * Whether subscription `sub` (spelled `s`) holds a resource under `name`.
   * Delta: a singleton only under its own spelling, a glob member only under
   * its canonical name. SotW: names are the resources' own, compared canonically.
   */
  private subHoldsName(protocol: Protocol, sub: Subscription, s: string, name: string): boolean {
    switch (sub.kind) {
      case 'refused':
        return false;
      case 'wildcard':
        return this.opts.hasDefaultUpstream && !isXdstp(name);
      case 'legacy':
        return name === sub.key;
      case 'singleton':
        return protocol === 'delta' ? name === s : isXdstp(name) && keyOf(name) === sub.key;
      case 'glob': {
        if (!isMember(keyOf(name), sub.key)) return false;
        return protocol === 'sotw' || keyOf(name) === name;
      }
    }
  }

  /** Whether `sub` covers the resource keyed `key` on `authority` (whatever name it is held under). */
  private subCoversResource(sub: Subscription, authority: Authority, key: string): boolean {
    switch (sub.kind) {
      case 'refused':
        return false;
      case 'wildcard':
        return authority === null && this.opts.hasDefaultUpstream && !isXdstp(key);
      case 'legacy':
        return authority === null && key === sub.key;
      case 'singleton':
        return authority === sub.authority && key === sub.key;
      case 'glob':
        return authority === sub.authority && isMember(key, sub.key);
    }
  }

  private resourcesOf(authority: Authority, typeUrl: string, create: true): Map<string, string>;
  private resourcesOf(authority: Authority, typeUrl: string, create: false): Map<string, string> | undefined;
  private resourcesOf(authority: Authority, typeUrl: string, create: boolean): Map<string, string> | undefined {
    let byType = this.store.get(authority);
    if (!byType) {
      if (!create) return undefined;
      this.store.set(authority, (byType = new Map()));
    }
    let resources = byType.get(typeUrl);
    if (!resources && create) byType.set(typeUrl, (resources = new Map()));
    return resources;
  }
}
