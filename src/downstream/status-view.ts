/**
 * The relay's answer to "what does each client hold": a StatusSource over the
 * live per-client SubscriptionStates, plus the relay's own view of each
 * upstream authority (what it subscribed and holds). Read-only.
 */
import type { CacheEntry } from '../cache/memory-cache';
import type { SubscriptionEngine } from '../engine/engine';
import { legacyKey } from '../engine/routing';
import type { Subscription } from '../engine/subscription';
import type { Node } from '../proto/messages';
import { isXdstpName } from '../xdstp';
import type { UpstreamPort } from '../upstream/types';
import type { AdsStream } from './ads-stream';
import { SEVERITY_RANK, severityOf, type ClientResourceStatus, type ConfigStatus, type ResourceStatus, type Severity, type StatusClient, type StatusSource } from './status-source';
import { TOLD_ABSENT } from './outgoing';
import type { SubscriptionState } from './subscription-state';

export interface RelayStatusInputs {
  streams(): Iterable<AdsStream>;
  engine: SubscriptionEngine;
  upstreams(): Iterable<UpstreamPort>;
  /** The node the relay presents upstream. */
  relayNode: Node;
}

function status(
  typeUrl: string,
  name: string,
  version: string,
  configStatus: ConfigStatus,
  clientStatus: ClientResourceStatus,
): ResourceStatus {
  return { typeUrl, name, version, configStatus, clientStatus };
}

/**
 * The (config, client) statuses a name can be in; `verdict` picks one. One
 * table for CSDS's full answers and the scrape-time gauge, so they never
 * disagree.
 */
const VERDICTS = [
  ['ERROR', 'NACKED'], // 0: the client NACKed its last version
  ['SYNCED', 'DOES_NOT_EXIST'], // 1: told (or known) not to exist
  ['NOT_SENT', 'REQUESTED'], // 2: nothing sent yet, the relay waits for the upstream
  ['STALE', 'REQUESTED'], // 3: a first version is on its way
  ['STALE', 'ACKED'], // 4: a newer version is on its way, or the relay holds another one
  ['SYNCED', 'REQUESTED'], // 5: holds nothing, nothing owed
  ['SYNCED', 'ACKED'], // 6: holds what the relay has
] as const satisfies ReadonlyArray<readonly [ConfigStatus, ClientResourceStatus]>;
type Verdict = number;
const VERDICT_SEVERITY: readonly Severity[] = VERDICTS.map(([config, client]) => severityOf(config, client));

type ClientView = ReturnType<SubscriptionState['clientView']>;

/** One name a client subscribes (or holds through a collection), against what the relay has for it. */
function verdict(state: SubscriptionState, name: string, view: ClientView, current: CacheEntry | undefined, absent: boolean): Verdict {
  if (state.ledger.rejected?.has(name)) return 0;
  const { version, pending } = view;
  if (version === TOLD_ABSENT && !pending) return 1;
  if (version === undefined && !pending) return absent ? 1 : 2;
  const holds = version !== undefined && version !== TOLD_ABSENT ? version : '';
  // Behind: a change is on its way (sent, or held back while the client is slow).
  const behind = pending || (current !== undefined && current.version !== holds);
  if (behind) return holds === '' ? 3 : 4;
  return holds === '' ? 5 : 6;
}

function nameStatus(state: SubscriptionState, name: string, current: CacheEntry | undefined, absent: boolean, withContents: boolean, inFlight: ReadonlySet<string>): ResourceStatus {
  const view = state.clientView(name, inFlight);
  const v = verdict(state, name, view, current, absent);
  const [configStatus, clientStatus] = VERDICTS[v]!;
  const holds = view.version !== undefined && view.version !== TOLD_ABSENT ? view.version : '';
  // A SotW client knows a resource by the version_info of the response that changed it.
  const shown = v === 1 || v === 2 ? '' : state.protocol === 'sotw' ? (state.ledger.responseVersion(name) ?? '') : holds;
  const out = status(state.typeUrl, name, shown, configStatus, clientStatus);
  const rejected = v === 0 ? state.ledger.rejected?.get(name) : undefined;
  if (rejected) out.error = { version: rejected.version, details: rejected.details, at: rejected.at };
  if (current && current.version === holds) {
    out.lastUpdated = current.updatedAt;
    if (withContents) out.resource = current.stored.resource;
  }
  return out;
}

/** A glob or wildcard the client subscribes, by its own spelling. */
function collectionVerdict(state: SubscriptionState, members: readonly CacheEntry[], absent: boolean, inFlight?: ReadonlySet<string>): Verdict {
  if (members.length > 0) {
    for (const m of members) if (state.clientView(m.name, inFlight).pending) return 3;
    return 6;
  }
  return absent ? 1 : 2;
}

function collectionStatus(state: SubscriptionState, spelling: string, members: readonly CacheEntry[], absent: boolean, inFlight: ReadonlySet<string>): ResourceStatus {
  const [configStatus, clientStatus] = VERDICTS[collectionVerdict(state, members, absent, inFlight)]!;
  return status(state.typeUrl, spelling, '', configStatus, clientStatus);
}

/**
 * How stateResources lists `name`, if it does: under a subscribed singleton
 * spelling (its subscription) and/or as a member of a subscribed collection
 * (the member's entry). Constant time, a few map lookups and no parsing: a
 * member is stored under its own name (the canonical URN, or the legacy key)
 * and records its collection (engine.heldKey's `collection`).
 */
function listing(state: SubscriptionState, engine: SubscriptionEngine, name: string): { single?: Subscription; member?: CacheEntry } | undefined {
  let single: Subscription | undefined;
  let member: CacheEntry | undefined;
  const sub = state.names.get(name);
  if (sub && !sub.isCollection) single = sub;
  const e = engine.store.get(isXdstpName(name) ? name : legacyKey(state.typeUrl, name));
  if (e !== undefined && e.name === name && e.stored.glob !== undefined && e.stored.typeUrl === state.typeUrl) {
    const coll = engine.subscription(e.stored.glob);
    if (coll?.isCollection && subscribes(state, coll)) member = e;
  }
  return single || member ? { single, member } : undefined;
}

/** Whether one of the client's spellings maps to `sub` (as stateResources walks `names`). */
function subscribes(state: SubscriptionState, sub: Subscription): boolean {
  const spellings = sub.watchers.get(state);
  if (spellings === undefined) return false;
  if (typeof spellings === 'string') return state.names.get(spellings) === sub;
  for (const s of spellings) if (state.names.get(s) === sub) return true;
  return false;
}

/**
 * The worst severity among stateResources(state), in time that does not grow
 * with the names the client subscribes or has not ACKed: the client-status
 * counts call it for every stream that changed since the last scrape. A name can only be NACKed if it is in `rejected`, and only
 * stale if a change for it is on its way or it was kept behind (fleet mode),
 * so those are the only names looked at, and the first one still listed
 * decides. The verdicts are stateResources' (test/clients-gauge.test.ts holds
 * the gauge to CSDS). Names the client dropped while their change is still
 * un-ACKed are passed over one by one (a few map lookups each): only a client
 * that unsubscribes many names it never ACKed, and has nothing else on its
 * way, makes that walk long.
 */
function stateWorst(state: SubscriptionState, engine: SubscriptionEngine): Severity {
  if (state.ledger.rejected) for (const name of state.ledger.rejected.keys()) if (listing(state, engine, name)) return 'nacked';
  for (const name of state.namesInFlight()) if (listing(state, engine, name)) return 'stale';
  const { store } = engine;
  const STALE = SEVERITY_RANK.stale;
  for (const name of state.ledger.behindCandidates()) {
    const how = listing(state, engine, name);
    let rank = 0;
    if (how?.single) rank = SEVERITY_RANK[VERDICT_SEVERITY[verdict(state, name, state.clientView(name), store.get(how.single.key), store.isAbsent(how.single.key))]!];
    if (how?.member) rank = Math.max(rank, SEVERITY_RANK[VERDICT_SEVERITY[verdict(state, name, state.clientView(name), how.member, false)]!]);
    if (rank >= STALE) return 'stale';
    state.ledger.notBehind(name);
  }
  return 'synced';
}

/** A state's status for the per-client figures; undefined (not counted) while it subscribes nothing. */
export function clientStatusJudge(engine: SubscriptionEngine): (state: SubscriptionState) => Severity | undefined {
  return (state) => (state.names.size > 0 ? stateWorst(state, engine) : undefined);
}

function stateResources(state: SubscriptionState, engine: SubscriptionEngine, withContents: boolean): ResourceStatus[] {
  const { store } = engine;
  const out: ResourceStatus[] = [];
  const listed = new Set<string>();
  const collections: Array<[string, Subscription]> = [];
  // Once per state: asking the un-ACKed queue per name would cost names × queue.
  const inFlight = new Set(state.namesInFlight());
  for (const [spelling, sub] of state.names) {
    listed.add(spelling);
    if (sub === null) out.push(status(state.typeUrl, spelling, '', 'SYNCED', 'DOES_NOT_EXIST'));
    else if (sub.isCollection) collections.push([spelling, sub]);
    else out.push(nameStatus(state, spelling, store.get(sub.key), store.isAbsent(sub.key), withContents, inFlight));
  }
  for (const [spelling, sub] of collections) {
    const members = store.members(sub.key);
    out.push(collectionStatus(state, spelling, members, store.isAbsent(sub.key), inFlight));
    // One entry per member under its canonical name; a name also subscribed on its own has one already.
    for (const m of members) {
      if (listed.has(m.name)) continue;
      listed.add(m.name);
      out.push(nameStatus(state, m.name, m, false, withContents, inFlight));
    }
  }
  return out;
}

/**
 * The relay's own view of one upstream: every name it subscribed there, at
 * the version it holds. The relay ACKs every response it applies (and NACKs,
 * without applying, one it must reject), so what it holds is what it ACKed.
 */
function upstreamResources(subs: readonly Subscription[], engine: SubscriptionEngine, withContents: boolean): ResourceStatus[] {
  const { store } = engine;
  const out: ResourceStatus[] = [];
  const listed = new Set<string>();
  const held = (typeUrl: string, name: string, e: CacheEntry): ResourceStatus => {
    const r = status(typeUrl, name, e.version, 'SYNCED', 'ACKED');
    r.lastUpdated = e.updatedAt;
    if (withContents) r.resource = e.stored.resource;
    return r;
  };
  const unheld = (sub: Subscription): ResourceStatus =>
    store.isAbsent(sub.key)
      ? status(sub.typeUrl, sub.upstreamName, '', 'SYNCED', 'DOES_NOT_EXIST')
      : status(sub.typeUrl, sub.upstreamName, '', 'NOT_SENT', 'REQUESTED');
  for (const sub of subs) {
    if (sub.isCollection) continue;
    listed.add(`${sub.typeUrl}\n${sub.key}`);
    const e = store.get(sub.key);
    out.push(e ? held(sub.typeUrl, sub.upstreamName, e) : unheld(sub));
  }
  for (const sub of subs) {
    if (!sub.isCollection) continue;
    const members = store.members(sub.key);
    out.push(members.length > 0 ? status(sub.typeUrl, sub.upstreamName, '', 'SYNCED', 'ACKED') : unheld(sub));
    for (const m of members) {
      const id = `${sub.typeUrl}\n${m.key}`;
      if (listed.has(id)) continue;
      listed.add(id);
      out.push(held(sub.typeUrl, m.name, m));
    }
  }
  return out;
}

/** CSDS's view of the relay: each client stream (`stream/<id>/<protocol>`), then each upstream (`upstream/<authority>`). */
export function relayStatusSource(inputs: RelayStatusInputs): StatusSource {
  const { engine } = inputs;
  return {
    *clients(): Iterable<StatusClient> {
      for (const s of inputs.streams()) {
        yield {
          scope: `stream/${s.id}/${s.protocol}`,
          node: s.node,
          resources: (withContents) => {
            const out: ResourceStatus[] = [];
            for (const state of s.states) out.push(...stateResources(state, engine, withContents));
            return out;
          },
        };
      }
      const byUpstream = new Map<UpstreamPort, Subscription[]>();
      for (const sub of engine.subscriptions()) {
        let list = byUpstream.get(sub.upstream);
        if (!list) byUpstream.set(sub.upstream, (list = []));
        list.push(sub);
      }
      for (const u of inputs.upstreams()) {
        const subs = byUpstream.get(u) ?? [];
        yield { scope: `upstream/${u.label}`, node: inputs.relayNode, resources: (withContents) => upstreamResources(subs, engine, withContents) };
      }
    },
  };
}
