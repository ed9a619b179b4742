import * as protobuf from 'protobufjs';
import { FieldReader, RecentStrings, WIRE_LEN, WIRE_VARINT, WireError, decodeUtf8Strict, scanFields, type WireField } from './wire';
import { nodeCodec, type Node } from './messages';
import { transportType } from './schema';

/**
 * Wire-level decoders for the two request messages clients send. They read
 * only the fields the relay acts on, and they reject a string that is not
 * valid UTF-8 (as the Go and C++ protobuf parsers do) instead of letting it
 * become a subscription under a different, replacement-character name.
 */

/** A request the relay will not act on; ends that stream with INVALID_ARGUMENT. */
export class RequestError extends Error {}

/** A string of a request that is not valid UTF-8 (a WireError) as the RequestError that ends its stream. */
function asRequestFault(err: unknown): unknown {
  return err instanceof WireError ? new RequestError(err.message) : err;
}

function utf8(buf: Uint8Array, start: number, end: number, field: string): string {
  if (end === start) return '';
  try {
    return decodeUtf8Strict(buf, start, end, field);
  } catch (err) {
    throw asRequestFault(err);
  }
}

/** Type URLs decoded lately: every request of every stream repeats one of a few. */
const recentTypeUrls = new RecentStrings(16);

/** The type_url at buf[start, end): a recent one when the bytes match, else decoded (strictly). */
function typeUrl(buf: Uint8Array, start: number, end: number): string {
  try {
    return recentTypeUrls.decode(buf, start, end, 'type_url');
  } catch (err) {
    throw asRequestFault(err);
  }
}

/** google.rpc.Status as far as a NACK needs it. */
export interface ErrorDetail {
  code: number;
  message: string;
}

function decodeStatus(buf: Uint8Array, field: string): ErrorDetail {
  const out: ErrorDetail = { code: 0, message: '' };
  scanFields(buf, (f) => {
    if (f.field === 1 && f.wireType === WIRE_VARINT) out.code = f.varint;
    else if (f.field === 2 && f.wireType === WIRE_LEN) out.message = utf8(buf, f.valueStart, f.valueEnd, `${field}.message`);
  });
  return out;
}

/** Nesting beyond this (a Struct inside a Struct…) is refused, as protobuf's own parsers refuse deep recursion. */
const MAX_NODE_DEPTH = 100;

let nodeType: protobuf.Type | undefined;

/**
 * Applies the one UTF-8 rule to every `string` in a message, nested messages,
 * map keys and values included, by walking its fields against the schema:
 * protobufjs would otherwise decode invalid bytes to U+FFFD, and a node id or
 * metadata value would silently become another one.
 */
function checkStrings(type: protobuf.Type, buf: Uint8Array, path: string, depth: number): void {
  if (depth > MAX_NODE_DEPTH) throw new RequestError(`${path} nests more than ${MAX_NODE_DEPTH} messages deep`);
  scanFields(buf, (f) => {
    if (f.wireType !== WIRE_LEN) return;
    const field = type.fieldsById[f.field];
    if (!field) return;
    const where = `${path}.${field.name}`;
    if (field instanceof protobuf.MapField) {
      // A map entry is a message of key (1) and value (2).
      const entry = buf.subarray(f.valueStart, f.valueEnd);
      scanFields(entry, (e) => {
        if (e.wireType !== WIRE_LEN) return;
        if (e.field === 1 && field.keyType === 'string') utf8(entry, e.valueStart, e.valueEnd, `${where} key`);
        else if (e.field === 2) checkValue(field, entry.subarray(e.valueStart, e.valueEnd), where, depth);
      });
      return;
    }
    checkValue(field, buf.subarray(f.valueStart, f.valueEnd), where, depth);
  });
}

function checkValue(field: protobuf.Field, value: Uint8Array, where: string, depth: number): void {
  if (field.type === 'string') utf8(value, 0, value.length, where);
  else if (field.resolvedType instanceof protobuf.Type) checkStrings(field.resolvedType, value, where, depth + 1);
}

/** Runs `read` over a node's bytes; malformed wire is a RequestError that says so. */
function readingNode<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof WireError) throw new RequestError(`node does not decode: ${err.message}`);
    throw err;
  }
}

/** Every string of a node (or of some of its fields) is UTF-8, and it nests no deeper than protobuf allows. */
function checkNodeStrings(buf: Uint8Array): void {
  readingNode(() => checkStrings((nodeType ??= transportType('envoy.config.core.v3.Node')), buf, 'node', 0));
}

/** The node as decoded, strictly: every string checked, then decoded whole. */
function decodeNodeFields(buf: Uint8Array): Node {
  checkNodeStrings(buf);
  let node: Node;
  try {
    node = nodeCodec.decode(buf);
  } catch (err) {
    throw new RequestError(`node does not decode: ${(err as Error).message}`);
  }
  shareEmptyFields(node as Record<string, unknown>);
  return node;
}

function decodeNode(buf: Uint8Array): Node {
  const split = splitBuildFields(buf);
  const node = decodeNodeFields(split ? split.rest : buf);
  if (split) {
    const build = buildFieldsOf(split.build);
    if (build.user_agent_build_version !== undefined) node.user_agent_build_version = build.user_agent_build_version;
    node.extensions = build.extensions;
    node.client_features = build.client_features;
  }
  if (node.cluster !== undefined) node.cluster = sharedText(node.cluster);
  if (node.user_agent_name !== undefined) node.user_agent_name = sharedText(node.user_agent_name);
  if (node.user_agent_version !== undefined) node.user_agent_version = sharedText(node.user_agent_version);
  return node;
}

/**
 * Checks a node as decodeNode would, without keeping it: a stream keeps the
 * first node it is sent, and a state-of-the-world client may repeat its node
 * in every request (Envoy does unless told to send it once).
 */
function checkNode(buf: Uint8Array): void {
  const split = splitBuildFields(buf);
  checkNodeStrings(split ? split.rest : buf);
  if (split) buildFieldsOf(split.build);
}

/**
 * The node fields that describe the client's build rather than the client:
 * user_agent_build_version (8), extensions (9), client_features (10). Every
 * client of one build sends them byte for byte alike, and they are most of
 * an Envoy's node: it lists every extension it was built with, hundreds of
 * them, tens of kilobytes that decode to over a hundred kilobytes of objects
 * kept for each stream's life (and decoded again from every request that
 * repeats the node). They are decoded once per distinct build and shared.
 */
const BUILD_FIELDS: ReadonlySet<number> = new Set([8, 9, 10]);

/** The node's bytes as its build fields and the rest, each still a Node message; undefined when there is nothing to share. */
function splitBuildFields(buf: Uint8Array): { build: Uint8Array; rest: Uint8Array } | undefined {
  // The build fields' [start, end) ranges, adjacent ones merged (an Envoy sends them as one run).
  const ranges: number[] = [];
  readingNode(() =>
    scanFields(buf, (f) => {
      if (!BUILD_FIELDS.has(f.field)) return;
      if (ranges.length > 0 && ranges[ranges.length - 1] === f.start) ranges[ranges.length - 1] = f.end;
      else ranges.push(f.start, f.end);
    }),
  );
  if (ranges.length === 0) return undefined;
  const rest: number[] = [];
  let at = 0;
  for (let i = 0; i < ranges.length; i += 2) {
    if (ranges[i]! > at) rest.push(at, ranges[i]!);
    at = ranges[i + 1]!;
  }
  if (at < buf.length) rest.push(at, buf.length);
  return { build: pick(buf, ranges), rest: pick(buf, rest) };
}

/** The bytes of `buf` in `ranges` ([start, end) pairs) as one message: a view when they are one run. */
function pick(buf: Uint8Array, ranges: readonly number[]): Uint8Array {
  if (ranges.length === 2) return buf.subarray(ranges[0], ranges[1]);
  const parts: Uint8Array[] = [];
  for (let i = 0; i < ranges.length; i += 2) parts.push(buf.subarray(ranges[i], ranges[i + 1]));
  return Buffer.concat(parts);
}

interface BuildFields {
  readonly user_agent_build_version: object | undefined;
  readonly extensions: readonly object[];
  readonly client_features: readonly string[];
}

/**
 * Build fields decoded lately, by their bytes; frozen, as every node of the
 * build holds them. Bounded in bytes and in builds, oldest out first: the
 * table outlives the streams, and clients choose what goes in it (a client
 * sending a new build each time costs the others a decode, as before, not
 * memory).
 */
const builds = new Map<string, BuildFields>();
let buildBytes = 0;
const BUILDS_MAX = 64;
const BUILDS_MAX_BYTES = 4 * 1024 * 1024;

/** The build met last, by its bytes: most requests in a row come from one build, and comparing bytes is cheaper than hashing a key. */
let lastBuild: { bytes: Buffer; fields: BuildFields } | undefined;

function buildFieldsOf(bytes: Uint8Array): BuildFields {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  if (lastBuild && lastBuild.bytes.equals(view)) return lastBuild.fields;
  const fields = buildFieldsByKey(view);
  lastBuild = { bytes: Buffer.from(view), fields };
  return fields;
}

function buildFieldsByKey(bytes: Buffer): BuildFields {
  const key = bytes.toString('latin1');
  const known = builds.get(key);
  if (known) return known;
  const decoded = decodeNodeFields(bytes);
  const fields: BuildFields = deepFreeze({
    user_agent_build_version: decoded.user_agent_build_version,
    extensions: decoded.extensions ?? (EMPTY_LIST as readonly object[]),
    client_features: (decoded.client_features ?? EMPTY_LIST) as readonly string[],
  });
  if (key.length <= BUILDS_MAX_BYTES) {
    builds.set(key, fields);
    buildBytes += key.length;
    for (const [oldest] of builds) {
      if (builds.size <= BUILDS_MAX && buildBytes <= BUILDS_MAX_BYTES) break;
      builds.delete(oldest);
      buildBytes -= oldest.length;
    }
  }
  return fields;
}

/** Freezes `value` and everything it holds (plain objects and arrays, as protobufjs decodes them; byte views stay as they are). */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}

/**
 * One copy of each node text many clients send alike (cluster, user agent
 * name and version), as a node is kept for its stream's life. Bounded, as
 * the table outlives the streams and clients choose what goes in it: past
 * SHARED_TEXTS_MAX distinct values, or above SHARED_TEXT_MAX_LENGTH
 * characters, a text is kept as decoded (at most ~0.5 MB held).
 */
const sharedTexts = new Map<string, string>();
const SHARED_TEXTS_MAX = 1024;
const SHARED_TEXT_MAX_LENGTH = 256;

function sharedText(text: string): string {
  if (text.length > SHARED_TEXT_MAX_LENGTH) return text;
  const known = sharedTexts.get(text);
  if (known !== undefined) return known;
  if (sharedTexts.size < SHARED_TEXTS_MAX) sharedTexts.set(text, text);
  return text;
}

/**
 * Shared by every decoded node for its empty list and map fields (decoding
 * makes one of each per node, and most are empty, e.g. listening_addresses,
 * dynamic_parameters): a client's node is kept for as long as its stream.
 * Frozen, so nothing can add to one node's field through another's.
 */
const EMPTY_LIST: readonly unknown[] = Object.freeze([]);
const EMPTY_MAP: Readonly<Record<string, unknown>> = Object.freeze({});

/** Replaces `node`'s empty lists and maps (top level) by the shared empty ones; the keys and their order stay. */
function shareEmptyFields(node: Record<string, unknown>): void {
  for (const key of Object.keys(node)) {
    const value = node[key];
    if (Array.isArray(value)) {
      if (value.length === 0) node[key] = EMPTY_LIST;
    } else if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype && Object.keys(value).length === 0) {
      node[key] = EMPTY_MAP;
    }
  }
}

/** The fields both request messages carry, as the relay reads them. */
interface RequestCommon {
  node: Node | undefined;
  typeUrl: string;
  nonce: string;
  errorDetail: ErrorDetail | undefined;
}

/** Where the fields both request messages carry stand in each (their field numbers differ). */
export interface CommonFieldNumbers {
  readonly node: number;
  readonly typeUrl: number;
  readonly nonce: number;
  readonly errorDetail: number;
}

function lenOnly(wireType: number, field: string): void {
  if (wireType !== WIRE_LEN) throw new RequestError(`${field} has the wrong wire type`);
}

/** A length-delimited string field, strictly UTF-8. */
function stringValue(bytes: Uint8Array, f: WireField, field: string): string {
  lenOnly(f.wireType, field);
  return utf8(bytes, f.valueStart, f.valueEnd, field);
}

/**
 * Reads `f` into `req` when it is one of the fields both requests carry
 * (numbered as `at` says); false when it is not. A node is decoded only when
 * `keepNode`, else checked alone.
 */
function readCommonField(req: RequestCommon, bytes: Uint8Array, f: WireField, at: CommonFieldNumbers, keepNode: boolean): boolean {
  switch (f.field) {
    case at.node:
      lenOnly(f.wireType, 'node');
      if (keepNode) req.node = decodeNode(bytes.subarray(f.valueStart, f.valueEnd));
      else checkNode(bytes.subarray(f.valueStart, f.valueEnd));
      return true;
    case at.typeUrl:
      lenOnly(f.wireType, 'type_url');
      req.typeUrl = typeUrl(bytes, f.valueStart, f.valueEnd);
      return true;
    case at.nonce:
      req.nonce = stringValue(bytes, f, 'response_nonce');
      return true;
    case at.errorDetail:
      lenOnly(f.wireType, 'error_detail');
      req.errorDetail = decodeStatus(bytes.subarray(f.valueStart, f.valueEnd), 'error_detail');
      return true;
  }
  return false;
}

/** `err` as thrown while reading a request: malformed wire becomes a RequestError naming `message`. */
function asRequestError(err: unknown, message: string): unknown {
  return err instanceof WireError ? new RequestError(`malformed ${message}: ${err.message}`) : err;
}

/** Fields of envoy.service.discovery.v3.DeltaDiscoveryRequest the relay reads. */
export interface DeltaRequest extends RequestCommon {
  subscribe: string[];
  unsubscribe: string[];
  /** Name → version the client holds (reconnect); empty when none. */
  initialVersions: Map<string, string>;
}

const NO_NAMES: string[] = [];
const NO_VERSIONS: Map<string, string> = new Map();

/** Where a DeltaDiscoveryRequest carries the common fields (the upstream ACK, delta-request.ts, is written with them). */
export const DELTA_COMMON: CommonFieldNumbers = { node: 1, typeUrl: 2, nonce: 6, errorDetail: 7 };

/** `keepNode`: decode the request's node (false: only check it, as for a stream that has its node). */
export function decodeDeltaRequest(bytes: Uint8Array, keepNode = true): DeltaRequest {
  const req: DeltaRequest = {
    node: undefined,
    typeUrl: '',
    subscribe: NO_NAMES,
    unsubscribe: NO_NAMES,
    initialVersions: NO_VERSIONS,
    nonce: '',
    errorDetail: undefined,
  };
  // Read field by field, with no closure per request: a delta client sends one per response it ACKs.
  const f = new FieldReader(bytes);
  try {
    while (f.next()) {
      if (readCommonField(req, bytes, f, DELTA_COMMON, keepNode)) continue;
      switch (f.field) {
        case 3:
          if (req.subscribe === NO_NAMES) req.subscribe = [];
          req.subscribe.push(stringValue(bytes, f, 'resource_names_subscribe'));
          break;
        case 4:
          if (req.unsubscribe === NO_NAMES) req.unsubscribe = [];
          req.unsubscribe.push(stringValue(bytes, f, 'resource_names_unsubscribe'));
          break;
        case 5: {
          lenOnly(f.wireType, 'initial_resource_versions');
          const entry = bytes.subarray(f.valueStart, f.valueEnd);
          const e = new FieldReader(entry);
          let key = '';
          let value = '';
          while (e.next()) {
            if (e.wireType !== WIRE_LEN) continue;
            if (e.field === 1) key = utf8(entry, e.valueStart, e.valueEnd, 'initial_resource_versions key');
            else if (e.field === 2) value = utf8(entry, e.valueStart, e.valueEnd, 'initial_resource_versions value');
          }
          if (req.initialVersions === NO_VERSIONS) req.initialVersions = new Map();
          req.initialVersions.set(key, value);
          break;
        }
      }
    }
  } catch (err) {
    throw asRequestError(err, 'DeltaDiscoveryRequest');
  }
  return req;
}

/** Fields of envoy.service.discovery.v3.DiscoveryRequest (state of the world) the relay reads. */
export interface SotwRequest extends RequestCommon {
  versionInfo: string;
  /** The client's whole name list for this type. */
  names: string[];
}

const SOTW_COMMON: CommonFieldNumbers = { node: 2, typeUrl: 4, nonce: 5, errorDetail: 6 };

/** `keepNode`: decode the request's node (false: only check it, as for a stream that has its node). */
export function decodeSotwRequest(bytes: Uint8Array, keepNode = true): SotwRequest {
  const req: SotwRequest = { versionInfo: '', node: undefined, names: [], typeUrl: '', nonce: '', errorDetail: undefined };
  const f = new FieldReader(bytes);
  try {
    while (f.next()) {
      if (readCommonField(req, bytes, f, SOTW_COMMON, keepNode)) continue;
      if (f.field === 1) req.versionInfo = stringValue(bytes, f, 'version_info');
      else if (f.field === 3) req.names.push(stringValue(bytes, f, 'resource_names'));
    }
  } catch (err) {
    throw asRequestError(err, 'DiscoveryRequest');
  }
  return req;
}
