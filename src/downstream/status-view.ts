/**
 * The relay's answer to "what does each client hold": a StatusSource over the
 * live per-client SubscriptionStates, plus the relay's own view of each
 * upstream authority (what it subscribed and holds). Read-only.
 */
import type { CacheEntry } from '../cache/memory-cache';
import type { SubscriptionEngine } from '../hub/engine';
import type { Subscription } from '../hub/subscription';
import type { Node } from '../proto/messages';
import type { UpstreamPort } from '../upstream/types';
import type { AdsStream } from './ads-stream';
import type { ClientResourceStatus, ConfigStatus, ResourceStatus, StatusClient, StatusSource } from './status-source';
import { TOLD_ABSENT, type SubscriptionState } from './subscription-state';

export interface StatusParts {
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

/** One name a client subscribes (or holds through a collection), against what the relay has for it. */
function nameStatus(state: SubscriptionState, name: string, current: CacheEntry | undefined, absent: boolean, withContents: boolean): ResourceStatus {
  const typeUrl = state.typeUrl;
  const rejected = state.rejected?.get(name);
  const { version, pending } = state.clientView(name);
  const holds = version !== undefined && version !== TOLD_ABSENT ? version : '';
  // A SotW client knows a resource by the version_info of the response that changed it.
  const shown = state.protocol === 'sotw' ? (state.responseVersion(name) ?? '') : holds;
  let out: ResourceStatus;
  if (rejected) {
    out = status(typeUrl, name, shown, 'ERROR', 'NACKED');
    out.error = { version: rejected.version, details: rejected.details, at: rejected.at };
  } else if (version === TOLD_ABSENT && !pending) {
    out = status(typeUrl, name, '', 'SYNCED', 'DOES_NOT_EXIST');
  } else if (version === undefined && !pending) {
    // Nothing sent yet: the relay is still waiting for the upstream (or it is gone).
    out = status(typeUrl, name, '', absent ? 'SYNCED' : 'NOT_SENT', absent ? 'DOES_NOT_EXIST' : 'REQUESTED');
  } else {
    // Behind: a change is on its way (sent, or held back while the client is slow).
    const behind = pending || (current !== undefined && current.version !== holds);
    out = status(typeUrl, name, shown, behind ? 'STALE' : 'SYNCED', holds === '' ? 'REQUESTED' : 'ACKED');
  }
  if (current && current.version === holds) {
    out.lastUpdated = current.updatedAt;
    if (withContents) out.resource = current.stored.resource;
  }
  return out;
}

function collectionStatus(state: SubscriptionState, spelling: string, sub: Subscription, members: readonly CacheEntry[], absent: boolean): ResourceStatus {
  if (members.length > 0) {
    let pending = false;
    for (const m of members) if (state.clientView(m.name).pending) pending = true;
    return status(state.typeUrl, spelling, '', pending ? 'STALE' : 'SYNCED', pending ? 'REQUESTED' : 'ACKED');
  }
  if (absent) return status(state.typeUrl, spelling, '', 'SYNCED', 'DOES_NOT_EXIST');
  return status(state.typeUrl, spelling, '', 'NOT_SENT', 'REQUESTED');
}

function stateResources(state: SubscriptionState, engine: SubscriptionEngine, withContents: boolean): ResourceStatus[] {
  const { store } = engine;
  const out: ResourceStatus[] = [];
  const listed = new Set<string>();
  const collections: Array<[string, Subscription]> = [];
  for (const [spelling, sub] of state.names) {
    listed.add(spelling);
    if (sub === null) out.push(status(state.typeUrl, spelling, '', 'SYNCED', 'DOES_NOT_EXIST'));
    else if (sub.isCollection) collections.push([spelling, sub]);
    else out.push(nameStatus(state, spelling, store.get(sub.key), store.isAbsent(sub.key), withContents));
  }
  for (const [spelling, sub] of collections) {
    const members = store.members(sub.key);
    out.push(collectionStatus(state, spelling, sub, members, store.isAbsent(sub.key)));
    // One entry per member under its canonical name; a name also subscribed on its own has one already.
    for (const m of members) {
      if (listed.has(m.name)) continue;
      listed.add(m.name);
      out.push(nameStatus(state, m.name, m, false, withContents));
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
export function relayStatusSource(parts: StatusParts): StatusSource {
  const { engine } = parts;
  return {
    *clients(): Iterable<StatusClient> {
      for (const s of parts.streams()) {
        yield {
          scope: `stream/${s.id}/${s.protocol}`,
          node: s.node,
          resources: (withContents) => {
            const out: ResourceStatus[] = [];
            for (const state of s.states.values()) out.push(...stateResources(state, engine, withContents));
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
      for (const u of parts.upstreams()) {
        const subs = byUpstream.get(u) ?? [];
        yield { scope: `upstream/${u.label}`, node: parts.relayNode, resources: (withContents) => upstreamResources(subs, engine, withContents) };
      }
    },
  };
}
