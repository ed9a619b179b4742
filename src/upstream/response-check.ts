/**
 * The checks a delta xDS client (Envoy) makes on a DeltaDiscoveryResponse
 * before it applies any of it. A response that fails one is NACKed whole: the
 * relay keeps its previous state and forwards nothing of it. Every upstream
 * resource is split here, once, and reaches the engine split.
 */
import { DeltaResponseError, scanDeltaResponse } from '../proto/delta-response';
import { splitResource, type SplitResource } from '../proto/resource-bytes';
import { WireError } from '../proto/wire';
import { RESOURCE_LOCATOR_TYPE } from '../proto/xds-names';
import type { UpstreamResourceError } from './types';

import type { UpstreamNackReason } from '../metrics';

export interface AcceptedResponse {
  ok: true;
  typeUrl: string;
  nonce: string;
  /** Each checked and split once (see checkContent); the engine uses them as they are. */
  resources: SplitResource[];
  /** removed_resources and removed_resource_names together, each name once. */
  removed: string[];
  errors: UpstreamResourceError[];
}

export interface RejectedResponse {
  ok: false;
  /** What could be read of them ('' when the fault came first): the NACK needs both. */
  typeUrl: string;
  nonce: string;
  reason: UpstreamNackReason;
  /** Why, for the NACK's error_detail and the log. */
  message: string;
}

export type CheckedResponse = AcceptedResponse | RejectedResponse;

/** Longest name quoted in a NACK message: the message is for people, and names can be long. */
const QUOTE_MAX = 200;

function quote(name: string): string {
  return JSON.stringify(name.length > QUOTE_MAX ? `${name.slice(0, QUOTE_MAX)}…` : name);
}

/** An update's resources and removals that passed the checks: each resource split once, here. */
export interface CheckedContent {
  ok: true;
  resources: SplitResource[];
  /** Each name once, in the order first given. */
  removed: string[];
}

/** Why an update's content fails the checks. */
export interface ContentFault {
  ok: false;
  reason: UpstreamNackReason;
  message: string;
}

/**
 * The checks on what an update carries, whoever sends it (a control plane's
 * response, a file origin's delta): every resource must decode (strings
 * UTF-8), no resource may be named twice or both sent and removed, and every
 * payload must be of the update's type or a ResourceLocator redirect. Pure.
 */
export function checkContent(typeUrl: string, resources: readonly Buffer[], removals: Iterable<string>): CheckedContent | ContentFault {
  const fault = (reason: UpstreamNackReason, message: string): ContentFault => ({ ok: false, reason, message });
  const split: SplitResource[] = [];
  const added = new Set<string>();
  for (let i = 0; i < resources.length; i++) {
    let resource: SplitResource;
    try {
      resource = splitResource(resources[i]);
    } catch (err) {
      if (!(err instanceof WireError)) throw err;
      return fault('undecodable', `resources[${i}] is not a decodable Resource: ${err.message}`);
    }
    if (added.has(resource.name)) return fault('duplicate_name', `resource ${quote(resource.name)} appears more than once in resources`);
    added.add(resource.name);
    if (resource.hasBody && resource.payloadType !== typeUrl && resource.payloadType !== RESOURCE_LOCATOR_TYPE) {
      return fault(
        'type_mismatch',
        `resource ${quote(resource.name)} carries type ${quote(resource.payloadType)}, but the response is for ${quote(typeUrl)}`,
      );
    }
    split.push(resource);
  }

  const removed: string[] = [];
  const seenRemoved = new Set<string>();
  for (const name of removals) {
    if (added.has(name)) return fault('added_and_removed', `resource ${quote(name)} is both in resources and removed`);
    if (seenRemoved.has(name)) continue;
    seenRemoved.add(name);
    removed.push(name);
  }
  return { ok: true, resources: split, removed };
}

/**
 * Reads and checks one upstream DeltaDiscoveryResponse. Pure: bytes in,
 * verdict out. A response is rejected when it does not decode (top level,
 * any removal or error entry), has no type_url, or its content fails
 * checkContent (removed_resources and removed_resource_names together).
 */
export function checkDeltaResponse(bytes: Buffer): CheckedResponse {
  let scanned;
  try {
    scanned = scanDeltaResponse(bytes);
  } catch (err) {
    if (!(err instanceof DeltaResponseError)) throw err;
    return { ok: false, typeUrl: err.typeUrl, nonce: err.nonce, reason: 'undecodable', message: `undecodable DeltaDiscoveryResponse: ${err.message}` };
  }
  const { typeUrl, nonce } = scanned;
  if (typeUrl === '') return { ok: false, typeUrl, nonce, reason: 'undecodable', message: 'DeltaDiscoveryResponse has no type_url' };
  const content = checkContent(typeUrl, scanned.resources, [...scanned.removed, ...scanned.removedNames]);
  if (!content.ok) return { ok: false, typeUrl, nonce, reason: content.reason, message: content.message };
  return { ok: true, typeUrl, nonce, resources: content.resources, removed: content.removed, errors: scanned.errors };
}
