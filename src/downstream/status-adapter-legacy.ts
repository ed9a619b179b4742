/**
 * STOP-GAP: a StatusSource built from the per-client state that exists before
 * the subscription engine (issue 11) — ClientView.subs / ClientView.held and the
 * stream-wide nonces of ClientStream — so CSDS, `xdstp-relay status` and the
 * clients gauge work end to end now. The lead replaces it with one built on
 * SubscriptionState, which tracks ACKs per name.
 *
 * What it approximates (today's streams keep no per-name ACK state):
 * - "ACKed" means the stream as a whole is settled: its last response's nonce
 *   is the last nonce it ACKed and it is not being held back as slow. Then every
 *   name it holds is SYNCED/ACKED (STALE/ACKED if the cache already has a newer
 *   version it was not sent); otherwise every name it holds is STALE/REQUESTED.
 * - `version` is the version last *offered* to the client (ClientView.held is
 *   set when a response is queued), so a slow client shows the version waiting
 *   for it, not the one it has applied.
 * - NACKs are never reported: the stream counts them but keeps neither the
 *   rejected nonce's names nor the error message, so a NACKing client shows as
 *   STALE (it has not ACKed the latest response), without `error`.
 * - `lastUpdated` is unknown (absent).
 * - `resource` is the cached copy of the version the client holds (the
 *   upstream's encoding: only its payload, field 2, is used); absent when the
 *   cache has moved on to another version.
 * The upstream entries are exact as far as they go: the relay ACKs every
 * upstream response, so what the cache holds is what it ACKed.
 */
import type { CacheEntry, MemoryCache } from '../cache/memory-cache';
import type { Subscription } from '../hub/subscription';
import { TOLD_ABSENT, type ClientView, type UpstreamPort } from '../hub/types';
import type { Node } from '../proto/messages';
import type { ConfigStatus, ClientResourceStatus, ResourceStatus, StatusClient, StatusSource } from './status-source';

/** What the adapter reads of a downstream stream (src/downstream/client-stream.ts). */
export interface LegacyStream {
  readonly id: number;
  readonly node: Node | undefined;
  readonly views: ReadonlyMap<string, ClientView>;
  readonly isSlow: boolean;
  readonly lastNonce: string;
  readonly lastAckedNonce: string;
}

export interface LegacyStatusParts {
  streams(): Iterable<LegacyStream>;
  subscriptions(): Iterable<Subscription>;
  readonly cache: MemoryCache;
  readonly upstreams: ReadonlyMap<string | null, UpstreamPort>;
  /** The node the relay presents upstream. */
  readonly relayNode: Node;
}

function entry(
  typeUrl: string,
  name: string,
  version: string,
  configStatus: ConfigStatus,
  clientStatus: ClientResourceStatus,
  resource?: Buffer,
): ResourceStatus {
  const r: ResourceStatus = { typeUrl, name, version, configStatus, clientStatus };
  if (resource) r.resource = resource;
  return r;
}

/** A name the client was offered (or not) at `held`, against the cache's `current` entry. */
function heldStatus(
  typeUrl: string,
  name: string,
  held: string | undefined,
  current: CacheEntry | undefined,
  settled: boolean,
  withContents: boolean,
): ResourceStatus {
  if (held === undefined) return entry(typeUrl, name, '', 'NOT_SENT', 'REQUESTED');
  if (held === TOLD_ABSENT) return entry(typeUrl, name, '', settled ? 'SYNCED' : 'STALE', 'DOES_NOT_EXIST');
  const behind = current !== undefined && current.version !== held;
  const contents = withContents && current !== undefined && !behind ? current.stored.resource : undefined;
  return entry(typeUrl, name, held, settled && !behind ? 'SYNCED' : 'STALE', settled ? 'ACKED' : 'REQUESTED', contents);
}

function streamResources(s: LegacyStream, cache: MemoryCache, withContents: boolean): ResourceStatus[] {
  const settled = s.lastNonce === s.lastAckedNonce && !s.isSlow;
  const out: ResourceStatus[] = [];
  for (const view of s.views.values()) {
    const typeUrl = view.typeUrl;
    const members: CacheEntry[] = [];
    for (const [spelling, sub] of view.subs) {
      if (sub === null) {
        // Could not be routed: answered as not existing.
        out.push(entry(typeUrl, spelling, '', 'SYNCED', 'DOES_NOT_EXIST'));
      } else if (!sub.isCollection) {
        out.push(heldStatus(typeUrl, spelling, view.held.get(spelling), cache.get(sub.key), settled, withContents));
      } else {
        const found = cache.members(sub.key);
        const sync: ConfigStatus = settled ? 'SYNCED' : 'STALE';
        if (found.length > 0) out.push(entry(typeUrl, spelling, '', sync, settled ? 'ACKED' : 'REQUESTED'));
        else if (cache.isAbsent(sub.key)) out.push(entry(typeUrl, spelling, '', sync, 'DOES_NOT_EXIST'));
        else out.push(entry(typeUrl, spelling, '', 'NOT_SENT', 'REQUESTED'));
        for (const m of found) members.push(m);
      }
    }
    // One entry per member, under its canonical name; a name also subscribed on its own has one already.
    const listed = new Set<string>();
    for (const m of members) {
      if (view.subs.has(m.name) || listed.has(m.name)) continue;
      listed.add(m.name);
      out.push(heldStatus(typeUrl, m.name, view.held.get(m.name), m, settled, withContents));
    }
  }
  return out;
}

function upstreamResources(subs: readonly Subscription[], cache: MemoryCache, withContents: boolean): ResourceStatus[] {
  const out: ResourceStatus[] = [];
  const listed = new Set<string>();
  const held = (typeUrl: string, name: string, e: CacheEntry): ResourceStatus =>
    entry(typeUrl, name, e.version, 'SYNCED', 'ACKED', withContents ? e.stored.resource : undefined);
  for (const sub of subs) {
    if (sub.isCollection) continue;
    listed.add(`${sub.typeUrl}\n${sub.key}`);
    const e = cache.get(sub.key);
    if (e) out.push(held(sub.typeUrl, sub.upstreamName, e));
    else if (cache.isAbsent(sub.key)) out.push(entry(sub.typeUrl, sub.upstreamName, '', 'SYNCED', 'DOES_NOT_EXIST'));
    else out.push(entry(sub.typeUrl, sub.upstreamName, '', 'NOT_SENT', 'REQUESTED'));
  }
  for (const sub of subs) {
    if (!sub.isCollection) continue;
    const found = cache.members(sub.key);
    if (found.length > 0) out.push(entry(sub.typeUrl, sub.upstreamName, '', 'SYNCED', 'ACKED'));
    else if (cache.isAbsent(sub.key)) out.push(entry(sub.typeUrl, sub.upstreamName, '', 'SYNCED', 'DOES_NOT_EXIST'));
    else out.push(entry(sub.typeUrl, sub.upstreamName, '', 'NOT_SENT', 'REQUESTED'));
    for (const m of found) {
      const id = `${sub.typeUrl}\n${m.key}`;
      if (listed.has(id)) continue;
      listed.add(id);
      out.push(held(sub.typeUrl, m.name, m));
    }
  }
  return out;
}

export function legacyStatusSource(parts: LegacyStatusParts): StatusSource {
  return {
    *clients(): Iterable<StatusClient> {
      for (const s of parts.streams()) {
        yield {
          scope: `stream/${s.id}/delta`,
          node: s.node,
          resources: (withContents) => streamResources(s, parts.cache, withContents),
        };
      }
      const byUpstream = new Map<UpstreamPort, Subscription[]>();
      for (const sub of parts.subscriptions()) {
        let list = byUpstream.get(sub.upstream);
        if (!list) byUpstream.set(sub.upstream, (list = []));
        list.push(sub);
      }
      for (const u of parts.upstreams.values()) {
        const subs = byUpstream.get(u) ?? [];
        yield {
          scope: `upstream/${u.label}`,
          node: parts.relayNode,
          resources: (withContents) => upstreamResources(subs, parts.cache, withContents),
        };
      }
    },
  };
}
