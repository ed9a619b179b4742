/**
 * The checks a delta xDS client (Envoy) makes on a DeltaDiscoveryResponse
 * before it applies any of it. A response that fails one is NACKed whole: the
 * relay keeps its previous state and forwards nothing of it.
 */
import { DeltaResponseError, scanDeltaResponse } from '../proto/delta-response';
import { splitResource } from '../proto/resource-bytes';
import { WireError } from '../proto/wire';
import { RESOURCE_LOCATOR_TYPE } from '../proto/xds-names';
import type { UpstreamResourceError } from './types';

import type { UpstreamNackReason } from '../metrics';

export interface AcceptedResponse {
  ok: true;
  typeUrl: string;
  nonce: string;
  resources: Buffer[];
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

/**
 * Reads and checks one upstream DeltaDiscoveryResponse. Pure: bytes in,
 * verdict out. A response is rejected when it does not decode (top level,
 * any `Resource`, any removal or error entry; strings must be UTF-8), has no
 * type_url, names one resource twice, names a resource both in `resources`
 * and among the removals, or carries an `Any` of another type than the
 * response's (except a ResourceLocator redirect).
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
  const reject = (reason: UpstreamNackReason, message: string): RejectedResponse => ({ ok: false, typeUrl, nonce, reason, message });
  if (typeUrl === '') return reject('undecodable', 'DeltaDiscoveryResponse has no type_url');

  const added = new Set<string>();
  for (let i = 0; i < scanned.resources.length; i++) {
    let parts;
    try {
      parts = splitResource(scanned.resources[i]);
    } catch (err) {
      if (!(err instanceof WireError)) throw err;
      return reject('undecodable', `resources[${i}] is not a decodable Resource: ${err.message}`);
    }
    if (added.has(parts.name)) return reject('duplicate_name', `resource ${quote(parts.name)} appears more than once in resources`);
    added.add(parts.name);
    if (parts.hasBody && parts.payloadType !== typeUrl && parts.payloadType !== RESOURCE_LOCATOR_TYPE) {
      return reject(
        'type_mismatch',
        `resource ${quote(parts.name)} carries type ${quote(parts.payloadType)}, but the response is for ${quote(typeUrl)}`,
      );
    }
  }

  const removed: string[] = [];
  const seenRemoved = new Set<string>();
  for (const name of [...scanned.removed, ...scanned.removedNames]) {
    if (added.has(name)) return reject('added_and_removed', `resource ${quote(name)} is both in resources and removed`);
    if (seenRemoved.has(name)) continue;
    seenRemoved.add(name);
    removed.push(name);
  }
  return { ok: true, typeUrl, nonce, resources: scanned.resources, removed, errors: scanned.errors };
}
