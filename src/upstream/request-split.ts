/**
 * Splitting one logical subscription change into DeltaDiscoveryRequests that
 * each stay within the control plane's receive limit (gRPC's default is
 * 4 MiB; a larger message ends the whole stream with RESOURCE_EXHAUSTED).
 */
import { deltaRequestCodec, type DeltaDiscoveryRequest, type Node } from '../proto/messages';
import { varintSize } from '../proto/wire';

/** A subscription change for one type URL, before splitting. */
export interface SubscriptionChange {
  typeUrl: string;
  subscribe: readonly string[];
  unsubscribe?: readonly string[];
  initialVersions?: Readonly<Record<string, string>>;
}

/** Encoded size of a length-delimited field with a one-byte tag (DeltaDiscoveryRequest's are 1..9). */
function lenFieldSize(len: number): number {
  return 1 + varintSize(len) + len;
}

function stringFieldSize(s: string): number {
  return lenFieldSize(Buffer.byteLength(s, 'utf8'));
}

/** A map<string,string> entry: key (1) and value (2), counted even when empty (an upper bound). */
function mapEntrySize(key: string, value: string): number {
  return lenFieldSize(stringFieldSize(key) + stringFieldSize(value));
}

type Item = { kind: 'sub' | 'unsub'; name: string } | { kind: 'version'; name: string; version: string };

function itemSize(item: Item): number {
  return item.kind === 'version' ? mapEntrySize(item.name, item.version) : stringFieldSize(item.name);
}

/**
 * Splits `change` into requests of at most `maxBytes` encoded bytes each. The
 * first carries `node` (when given) and at least one subscribed name, so it is
 * never read as a legacy wildcard request. `initial_resource_versions` come
 * first: a control plane that reads them only from the first request of a
 * type gets as many as fit. One item that alone exceeds the limit goes in a
 * request of its own (nothing smaller can carry it).
 */
export function splitSubscriptionChange(change: SubscriptionChange, maxBytes: number, node?: Node): DeltaDiscoveryRequest[] {
  const items: Item[] = [];
  const [firstSub, ...restSubs] = change.subscribe;
  if (firstSub !== undefined) items.push({ kind: 'sub', name: firstSub });
  for (const [name, version] of Object.entries(change.initialVersions ?? {})) items.push({ kind: 'version', name, version });
  for (const name of restSubs) items.push({ kind: 'sub', name });
  for (const name of change.unsubscribe ?? []) items.push({ kind: 'unsub', name });

  const typeSize = stringFieldSize(change.typeUrl);
  const nodeSize = node ? deltaRequestCodec.encode({ node }).length : 0;
  const out: DeltaDiscoveryRequest[] = [];
  let req: DeltaDiscoveryRequest | undefined;
  let size = 0;
  let count = 0;
  const open = (): DeltaDiscoveryRequest => {
    const r: DeltaDiscoveryRequest = { type_url: change.typeUrl };
    if (out.length === 0 && node) r.node = node;
    size = typeSize + (r.node ? nodeSize : 0);
    count = 0;
    out.push(r);
    return r;
  };
  for (const item of items) {
    const n = itemSize(item);
    if (!req || (count > 0 && size + n > maxBytes)) req = open();
    size += n;
    count++;
    // No prototype: a resource may well be called `__proto__`.
    if (item.kind === 'version') (req.initial_resource_versions ??= Object.create(null) as Record<string, string>)[item.name] = item.version;
    else if (item.kind === 'sub') (req.resource_names_subscribe ??= []).push(item.name);
    else (req.resource_names_unsubscribe ??= []).push(item.name);
  }
  return out;
}
