import { FieldReader, RecentStrings, WIRE_LEN, WIRE_VARINT, WireError, decodeUtf8Strict, scanFields, varintSize, writeVarint } from './wire';

/** Field numbers of envoy.service.discovery.v3.Resource that the relay reads or rewrites. */
const RESOURCE_VERSION = 1;
const RESOURCE_ANY = 2;
const RESOURCE_NAME = 3;
const RESOURCE_TTL = 6;
const RESOURCE_CACHE_CONTROL = 7;

/**
 * An upstream `Resource`, read at the wire level. A downstream copy carries
 * the client's own spelling of the name and drops `ttl` for clients that
 * don't understand it, without the payload ever being decoded; a copy that
 * changes neither is the upstream's bytes themselves (see resourceUnder).
 */
export interface SplitResource {
  /** The whole encoded `Resource`, untouched (what the cache stores and shares). */
  bytes: Buffer;
  name: string;
  version: string;
  /** False for a TTL heartbeat (a Resource with a version but no payload). */
  hasBody: boolean;
  /** type_url of the payload `Any`, '' when absent. */
  payloadType: string;
  /** The payload `Any` message itself (a view into the resource bytes), as SotW responses carry it. */
  payload: Buffer | undefined;
  ttlMs: number | undefined;
  doNotCache: boolean;
  /** The encoded `ttl` field (tag included), kept for clients that support TTLs. */
  ttlField: Buffer | undefined;
  /**
   * Whether `bytes` name the resource once and carry `ttl` at most once, so
   * that they read exactly as a copy assembled from `name` and `ttlField`.
   */
  selfContained: boolean;
}

function readDurationMs(buf: Uint8Array, start: number, end: number): number {
  let seconds = 0;
  let nanos = 0;
  scanFields(buf.subarray(start, end), (f) => {
    if (f.wireType !== WIRE_VARINT) return;
    if (f.field === 1) seconds = f.varint;
    else if (f.field === 2) nanos = f.varint;
  });
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

function readBool(buf: Uint8Array, start: number, end: number, fieldNo: number): boolean {
  let value = false;
  scanFields(buf.subarray(start, end), (f) => {
    if (f.field === fieldNo && f.wireType === WIRE_VARINT) value = f.varint !== 0;
  });
  return value;
}

/** Payload type URLs decoded lately: a control plane sends one or a few, and each resource names one. */
const recentPayloadTypes = new RecentStrings(16);

function readAnyType(buf: Uint8Array, start: number, end: number): string {
  let typeUrl = '';
  const fields = new FieldReader(buf.subarray(start, end));
  while (fields.next()) {
    if (fields.field === 1 && fields.wireType === WIRE_LEN) typeUrl = recentPayloadTypes.decode(buf, start + fields.valueStart, start + fields.valueEnd, 'Resource.resource.type_url');
  }
  return typeUrl;
}

/** Throws WireError when the bytes are not a well-formed Resource (strings included: they must be UTF-8). */
export function splitResource(bytes: Buffer): SplitResource {
  const parts: SplitResource = {
    bytes,
    name: '',
    version: '',
    hasBody: false,
    payloadType: '',
    payload: undefined,
    ttlMs: undefined,
    doNotCache: false,
    ttlField: undefined,
    selfContained: true,
  };
  let names = 0;
  let ttls = 0;
  const fields = new FieldReader(bytes);
  while (fields.next()) {
    const isLen = fields.wireType === WIRE_LEN;
    switch (fields.field) {
      case RESOURCE_NAME:
        if (!isLen) throw new WireError('Resource.name is not length-delimited');
        parts.name = decodeUtf8Strict(bytes, fields.valueStart, fields.valueEnd, 'Resource.name');
        names++;
        break;
      case RESOURCE_TTL:
        if (!isLen) throw new WireError('Resource.ttl is not length-delimited');
        parts.ttlMs = readDurationMs(bytes, fields.valueStart, fields.valueEnd);
        // A view: the resource's bytes are kept as long as its parts are.
        parts.ttlField = bytes.subarray(fields.start, fields.end);
        ttls++;
        break;
      case RESOURCE_VERSION:
        if (isLen) parts.version = decodeUtf8Strict(bytes, fields.valueStart, fields.valueEnd, 'Resource.version');
        break;
      case RESOURCE_ANY:
        if (isLen) {
          parts.hasBody = true;
          parts.payload = bytes.subarray(fields.valueStart, fields.valueEnd);
          parts.payloadType = readAnyType(bytes, fields.valueStart, fields.valueEnd);
        }
        break;
      case RESOURCE_CACHE_CONTROL:
        if (isLen) parts.doNotCache = readBool(bytes, fields.valueStart, fields.valueEnd, 1);
        break;
    }
  }
  parts.selfContained = names === 1 && ttls <= 1;
  return parts;
}

/**
 * The resource as a client gets it: under `name`, with its `ttl` only when
 * `withTtl`. When that changes nothing, the upstream's own bytes (no copy):
 * a cached resource then holds one buffer, shared by every client that
 * spells it as the control plane does.
 */
export function resourceUnder(parts: Pick<SplitResource, 'bytes' | 'name' | 'ttlField' | 'selfContained'>, name: string, withTtl: boolean): Buffer {
  if (parts.selfContained && name === parts.name && (withTtl || parts.ttlField === undefined)) return parts.bytes;
  return assembleResource(name, parts.bytes, withTtl ? parts.ttlField : undefined);
}

/** A downstream copy of a resource: `name` (the spelling a client expects), every field of `resource` but its name and ttl [, ttl]. */
function assembleResource(name: string, resource: Buffer, ttlField: Buffer | undefined): Buffer {
  let bodyLen = 0;
  const fields = new FieldReader(resource);
  while (fields.next()) if (fields.field !== RESOURCE_NAME && fields.field !== RESOURCE_TTL) bodyLen += fields.end - fields.start;
  const nameLen = Buffer.byteLength(name, 'utf8');
  const tag = RESOURCE_NAME * 8 + WIRE_LEN;
  const size = varintSize(tag) + varintSize(nameLen) + nameLen + bodyLen + (ttlField ? ttlField.length : 0);
  const out = Buffer.allocUnsafe(size);
  let pos = writeVarint(out, 0, tag);
  pos = writeVarint(out, pos, nameLen);
  pos += out.write(name, pos, 'utf8');
  const again = new FieldReader(resource);
  while (again.next()) if (again.field !== RESOURCE_NAME && again.field !== RESOURCE_TTL) pos += resource.copy(out, pos, again.start, again.end);
  if (ttlField) ttlField.copy(out, pos);
  return out;
}
