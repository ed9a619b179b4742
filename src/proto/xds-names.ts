/** Names the xDS protocol fixes, each written once. */

/** The node client feature of a client that honours Resource.ttl and heartbeats. */
export const TTL_CLIENT_FEATURE = 'xds.config.supports-resource-ttl';

/** The legacy (non-xdstp) wildcard: subscribing to it asks for every resource of the type. */
export const WILDCARD = '*';

/** Whether a subscribed name can be a collection: the wildcard, or a glob (its last path segment is `*`). */
export function mayNameCollection(name: string): boolean {
  return name === WILDCARD || name.endsWith('/*') || name.includes('/*?');
}

/** Payloads of this type are redirects (glob collection members may be redirected); a response of any type may carry them. */
export const RESOURCE_LOCATOR_TYPE = 'type.googleapis.com/xds.core.v3.ResourceLocator';
