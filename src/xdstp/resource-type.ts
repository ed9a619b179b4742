const TYPE_URL_PREFIX = 'type.googleapis.com/';
const COLLECTION_SUFFIX = 'Collection';

/**
 * A list collection (`<T>Collection`) is one opaque resource, answered under
 * exactly the requested name, rather than a set of members like a glob.
 */
export function isListCollectionType(resourceType: string): boolean {
  return resourceType.endsWith(COLLECTION_SUFFIX);
}

/** The `Any` / stream type URL that carries resources of this xdstp type. */
export function typeUrlOf(resourceType: string): string {
  return TYPE_URL_PREFIX + resourceType;
}
