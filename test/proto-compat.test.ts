/**
 * Wire compatibility between OUR minimal transport protos (protos/) and the
 * real upstream definitions shipped by @grpc/grpc-js-xds under deps/
 * (envoy-api, cncf/xds, googleapis, protoc-gen-validate).
 *
 * Three layers:
 *  1. Schema: every field declared in our protos exists upstream with the same
 *     name, number, type, cardinality and oneof, and every enum value matches.
 *     This catches a wrong field number even for a field no value case sets.
 *  2. Values: for each transport message, a sample that sets EVERY field we
 *     declare with a distinct non-default value is encoded with one side and
 *     decoded with the other, in both directions, and compared via toObject
 *     with identical options; the two sides' encodings must also be
 *     byte-for-byte equal.
 *  3. Service: the ADS method paths and streaming flags agree, both as
 *     protobufjs sees the services and as @grpc/proto-loader / grpc-js do.
 *
 * Fields we declare that the npm package's (older) snapshot does not have yet
 * are listed explicitly in KNOWN_NEWER_FIELDS / KNOWN_NEWER_TYPES below, with
 * their public field numbers; they are checked against those numbers instead
 * of being skipped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protobuf from 'protobufjs';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_DIR, statusRoot, transportRoot } from '../src/proto/schema';
import { CSDS_SERVICE, csdsServiceDefinition } from '../src/proto/csds-messages';
import { DELTA_ADS_PATH, SOTW_ADS_PATH, deltaAdsMethod } from '../src/proto/ads-service';
import { deltaRequestCodec, deltaResponseCodec } from '../src/proto/messages';

type Obj = Record<string, unknown>;

// ---------------------------------------------------------------------------
// Loading both sides
// ---------------------------------------------------------------------------

const XDS_PKG_DIR = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
const UPSTREAM_INCLUDE_DIRS = [
  path.join(XDS_PKG_DIR, 'deps', 'envoy-api'),
  path.join(XDS_PKG_DIR, 'deps', 'xds'),
  path.join(XDS_PKG_DIR, 'deps', 'googleapis'),
  path.join(XDS_PKG_DIR, 'deps', 'protoc-gen-validate'),
  // google/protobuf/descriptor.proto (imported by the validate/udpa annotation
  // protos) is not one of protobufjs' bundled definitions; protobufjs ships the file.
  path.dirname(require.resolve('protobufjs/package.json')),
];

const UPSTREAM_ENTRY_FILES = [
  'envoy/service/discovery/v3/ads.proto',
  'xds/core/v3/resource_name.proto',
  'xds/core/v3/resource_locator.proto',
  'xds/core/v3/collection_entry.proto',
  'xds/core/v3/authority.proto',
  'google/rpc/status.proto',
  'envoy/service/status/v3/csds.proto',
];

function loadUpstreamRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    for (const dir of UPSTREAM_INCLUDE_DIRS) {
      const candidate = path.join(dir, target);
      if (fs.existsSync(candidate)) return candidate;
    }
    // google/protobuf/{any,struct,duration,...}: protobufjs' bundled well-known types,
    // exactly as our own schema.ts resolves them.
    if (target.startsWith('google/protobuf/')) return target;
    throw new Error(`upstream import not found in grpc-js-xds deps: ${target}`);
  };
  root.loadSync(UPSTREAM_ENTRY_FILES, { keepCase: true });
  root.resolveAll();
  return root;
}

function listOurProtoFiles(dir = PROTO_DIR, prefix = ''): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...listOurProtoFiles(path.join(dir, entry.name), rel));
    else if (entry.name.endsWith('.proto')) out.push(rel);
  }
  return out.sort();
}

/**
 * Every .proto under protos/ (not only the transport root's entry files), loaded
 * the same way src/proto/schema.ts does, so the schema walk sees all of it.
 */
function loadAllOfOurs(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) =>
    target.startsWith('google/protobuf/') ? target : path.join(PROTO_DIR, target);
  root.loadSync(listOurProtoFiles(), { keepCase: true });
  root.resolveAll();
  return root;
}

/** The root the relay itself encodes and decodes with. */
const ours = transportRoot();
/** The CSDS root (loaded on the relay's first CSDS call). */
const oursStatus = statusRoot();

/** A message from the root the relay uses for it: transport first, else CSDS. */
function ourLookup(typeName: string): protobuf.Type {
  const found = ours.lookup(typeName);
  return found instanceof protobuf.Type ? found : oursStatus.lookupType(typeName);
}
const oursAll = loadAllOfOurs();
const upstream = loadUpstreamRoot();

// ---------------------------------------------------------------------------
// Known differences, listed explicitly
// ---------------------------------------------------------------------------

/**
 * Message types we declare under a different package than upstream. Message
 * names never appear on the wire (no Any packs them here), so the fields are
 * compared against the upstream type instead.
 */
const RELOCATED_TYPES: Record<string, string> = {
  // Upstream: envoy/type/v3/semantic_version.proto. We keep our copy in
  // envoy/config/core/v3/base.proto to avoid another file for three uint32s.
  'envoy.config.core.v3.SemanticVersion': 'envoy.type.v3.SemanticVersion',
};

interface ExpectedField {
  id: number;
  /** Scalar type name, or the fully-qualified message/enum name (no leading dot). */
  type: string;
  repeated: boolean;
}

/**
 * Fields we declare that the @grpc/grpc-js-xds 1.14 snapshot of envoy-api predates.
 * Each carries the field number of the current public definition; the schema
 * test checks our declaration against it, and the value tests strip exactly
 * these fields before comparing (an older decoder skips them as unknown fields).
 * If a package upgrade brings one of them in, the "known-newer" test fails so the
 * entry gets removed and the field is compared against upstream like any other.
 */
const KNOWN_NEWER_FIELDS: Record<string, ExpectedField> = {
  // xDS TP3 per-resource errors (DiscoveryResponse [#next-free-field] was 7).
  'envoy.service.discovery.v3.DiscoveryResponse.resource_errors': {
    id: 7,
    type: 'envoy.service.discovery.v3.ResourceError',
    repeated: true,
  },
  // xDS TP3 per-resource errors (DeltaDiscoveryResponse [#next-free-field] was 9).
  'envoy.service.discovery.v3.DeltaDiscoveryResponse.resource_errors': {
    id: 9,
    type: 'envoy.service.discovery.v3.ResourceError',
    repeated: true,
  },
  // Linux network namespace of a socket (SocketAddress [#next-free-field] was 7).
  'envoy.config.core.v3.SocketAddress.network_namespace_filepath': {
    id: 7,
    type: 'string',
    repeated: false,
  },
};

/** Whole message types newer than the npm snapshot, with their public fields. */
const KNOWN_NEWER_TYPES: Record<string, Record<string, ExpectedField>> = {
  // xDS TP3: the element type of resource_errors.
  'envoy.service.discovery.v3.ResourceError': {
    resource_name: { id: 1, type: 'envoy.service.discovery.v3.ResourceName', repeated: false },
    error_detail: { id: 2, type: 'google.rpc.Status', repeated: false },
  },
};

// ---------------------------------------------------------------------------
// Reflection helpers
// ---------------------------------------------------------------------------

const nameOf = (t: protobuf.ReflectionObject): string => t.fullName.replace(/^\./, '');
const isWellKnown = (t: protobuf.ReflectionObject): boolean => nameOf(t).startsWith('google.protobuf.');
const upstreamNameOf = (oursName: string): string => RELOCATED_TYPES[oursName] ?? oursName;

/** A field's type as a comparable string: scalar name or mapped full type name. */
function typeKey(field: protobuf.Field): string {
  return field.resolvedType ? upstreamNameOf(nameOf(field.resolvedType)) : field.type;
}

function allTypes(ns: protobuf.NamespaceBase): protobuf.Type[] {
  const out: protobuf.Type[] = [];
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) out.push(nested);
    if (nested instanceof protobuf.Namespace) out.push(...allTypes(nested));
  }
  return out;
}

function allEnums(ns: protobuf.NamespaceBase): protobuf.Enum[] {
  const out: protobuf.Enum[] = [];
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Enum) out.push(nested);
    if (nested instanceof protobuf.Namespace) out.push(...allEnums(nested));
  }
  return out;
}

/** Our own declarations (the bundled google.protobuf.* types are shared, not ours). */
const ourTypes = allTypes(oursAll).filter((t) => !isWellKnown(t));
const ourEnums = allEnums(oursAll).filter((e) => !isWellKnown(e));

function lookupUpstreamType(oursName: string): protobuf.Type | undefined {
  const found = upstream.lookup(upstreamNameOf(oursName));
  return found instanceof protobuf.Type ? found : undefined;
}

/**
 * Visits every set field of a plain object shaped like `type`, recursing into
 * our message types (not into google.protobuf.*). Throws on a key the type does
 * not declare, so a typo in a sample cannot be silently dropped by fromObject.
 * Keys naming a oneof (added by toObject({ oneofs: true })) are allowed.
 */
function walk(
  type: protobuf.Type,
  obj: Obj,
  visit: (owner: protobuf.Type, field: protobuf.Field, value: unknown) => void,
): void {
  for (const [key, value] of Object.entries(obj)) {
    const field = type.fields[key];
    if (!field) {
      if (type.oneofs && key in type.oneofs) continue;
      throw new Error(`${nameOf(type)} declares no field "${key}"`);
    }
    visit(type, field, value);
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type && !isWellKnown(rt) && value != null) {
      const items = field.map
        ? Object.values(value as Obj)
        : field.repeated
          ? (value as unknown[])
          : [value];
      for (const item of items) walk(rt, item as Obj, visit);
    }
  }
}

function isNonDefault(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'string') return value !== '' && value !== '0';
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'boolean') return value;
  if (value instanceof Uint8Array) return value.length > 0;
  if (typeof value === 'object') return true; // a present message (even an empty one) or a map
  return true;
}

/** Deep copy of `obj` without the KNOWN_NEWER_FIELDS, at any depth. */
function stripKnownNewer(type: protobuf.Type, obj: Obj): Obj {
  const out: Obj = {};
  for (const [key, value] of Object.entries(obj)) {
    const field = type.fields[key];
    if (field && `${nameOf(type)}.${key}` in KNOWN_NEWER_FIELDS) continue;
    const rt = field?.resolvedType;
    if (field && rt instanceof protobuf.Type && !isWellKnown(rt) && value != null) {
      if (field.map) {
        out[key] = Object.fromEntries(
          Object.entries(value as Obj).map(([k, v]) => [k, stripKnownNewer(rt, v as Obj)]),
        );
      } else if (field.repeated) {
        out[key] = (value as Obj[]).map((v) => stripKnownNewer(rt, v));
      } else {
        out[key] = stripKnownNewer(rt, value as Obj);
      }
    } else {
      out[key] = value;
    }
  }
  return out;
}

/** The same conversion options on both sides. */
const TO_OBJECT: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  bytes: String,
  defaults: false,
  arrays: false,
  objects: false,
  oneofs: true,
};

function encode(type: protobuf.Type, obj: Obj): Uint8Array {
  return type.encode(type.fromObject(obj)).finish();
}

function view(type: protobuf.Type, bytes: Uint8Array): Obj {
  return type.toObject(type.decode(bytes), TO_OBJECT) as Obj;
}

/** Top-level field numbers present in an encoding, in wire order. */
function wireFieldNumbers(bytes: Uint8Array): number[] {
  const reader = protobuf.Reader.create(bytes);
  const ids: number[] = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    ids.push(tag >>> 3);
    reader.skipType(tag & 7);
  }
  return ids;
}

// ---------------------------------------------------------------------------
// Samples: every declared field, distinct non-default values
// ---------------------------------------------------------------------------

/** Hands out values that are unique within one sample. */
class Distinct {
  private n = 0;
  s(label: string): string {
    return `${label}-${++this.n}`;
  }
  u(): number {
    return 100 + ++this.n;
  }
}

const anyOf = (g: Distinct, what: string): Obj => ({
  type_url: `type.googleapis.com/test.${g.s(what)}`,
  value: Buffer.from(g.s(`${what}-payload`)),
});

const struct = (g: Distinct): Obj => ({
  fields: {
    [g.s('str')]: { stringValue: g.s('sv') },
    [g.s('num')]: { numberValue: g.u() + 0.5 },
    [g.s('bool')]: { boolValue: true },
    [g.s('null')]: { nullValue: 'NULL_VALUE' },
    [g.s('list')]: { listValue: { values: [{ stringValue: g.s('lv') }, { numberValue: g.u() }] } },
    [g.s('obj')]: { structValue: { fields: { [g.s('inner')]: { stringValue: g.s('iv') } } } },
  },
});

const rpcStatus = (g: Distinct): Obj => ({
  code: g.u(),
  message: g.s('status-message'),
  details: [anyOf(g, 'detail'), anyOf(g, 'detail')],
});

const contextParams = (g: Distinct): Obj => ({
  params: { [g.s('ctx-key')]: g.s('ctx-val'), [g.s('ctx-key')]: g.s('ctx-val') },
});

const semanticVersion = (g: Distinct): Obj => ({
  major_number: g.u(),
  minor_number: g.u(),
  patch: g.u(),
});

const buildVersion = (g: Distinct): Obj => ({ version: semanticVersion(g), metadata: struct(g) });

const extension = (g: Distinct, disabled: boolean): Obj => ({
  name: g.s('ext-name'),
  category: g.s('ext-category'),
  type_descriptor: g.s('ext-type-descriptor'),
  version: buildVersion(g),
  disabled,
  type_urls: [g.s('type.googleapis.com/ext.A'), g.s('type.googleapis.com/ext.B')],
});

const listeningAddresses = (g: Distinct): Obj[] => [
  {
    socket_address: {
      protocol: 'UDP',
      address: g.s('10.0.0.1'),
      port_value: g.u(),
      resolver_name: g.s('resolver'),
      ipv4_compat: true,
      network_namespace_filepath: g.s('/var/run/netns/ns'),
    },
  },
  { socket_address: { address: g.s('host.example'), named_port: g.s('named-port') } },
  { pipe: { path: g.s('/run/pipe.sock'), mode: g.u() } },
  { envoy_internal_address: { server_listener_name: g.s('internal-listener'), endpoint_id: g.s('endpoint') } },
];

function node(g: Distinct, agentVersion: 'user_agent_version' | 'user_agent_build_version'): Obj {
  return {
    id: g.s('node-id'),
    cluster: g.s('node-cluster'),
    metadata: struct(g),
    locality: { region: g.s('region'), zone: g.s('zone'), sub_zone: g.s('sub-zone') },
    user_agent_name: g.s('envoy'),
    ...(agentVersion === 'user_agent_version'
      ? { user_agent_version: g.s('1.34.0') }
      : { user_agent_build_version: buildVersion(g) }),
    extensions: [extension(g, true), extension(g, false)],
    client_features: [g.s('xds.config.supports-resource-ttl'), g.s('envoy.lb.does_not_support_overprovisioning')],
    listening_addresses: listeningAddresses(g),
    dynamic_parameters: {
      [g.s('dyn-type-a')]: contextParams(g),
      [g.s('dyn-type-b')]: contextParams(g),
    },
  };
}

/** A constraint tree that uses every DynamicParameterConstraints variant. */
const constraints = (g: Distinct): Obj => ({
  and_constraints: {
    constraints: [
      { constraint: { key: g.s('c-key'), value: g.s('c-value') } },
      { constraint: { key: g.s('c-key'), exists: {} } },
      {
        or_constraints: {
          constraints: [
            { constraint: { key: g.s('c-key'), value: g.s('c-value') } },
            { not_constraints: { constraint: { key: g.s('c-key'), value: g.s('c-value') } } },
          ],
        },
      },
    ],
  },
});

const envoyResourceName = (g: Distinct): Obj => ({
  name: g.s('xdstp://authority/envoy.config.cluster.v3.Cluster/variant'),
  dynamic_parameter_constraints: constraints(g),
});

const envoyResourceLocator = (g: Distinct): Obj => ({
  name: g.s('xdstp://authority/envoy.config.cluster.v3.Cluster/locator'),
  dynamic_parameters: { [g.s('dp-key')]: g.s('dp-value'), [g.s('dp-key')]: g.s('dp-value') },
});

const resourceError = (g: Distinct): Obj => ({
  resource_name: envoyResourceName(g),
  error_detail: rpcStatus(g),
});

const controlPlane = (g: Distinct): Obj => ({ identifier: g.s('control-plane') });

const resource = (g: Distinct): Obj => ({
  version: g.s('resource-version'),
  resource: anyOf(g, 'Cluster'),
  name: g.s('xdstp://authority/envoy.config.cluster.v3.Cluster/name'),
  aliases: [g.s('alias'), g.s('alias')],
  ttl: { seconds: g.u(), nanos: g.u() },
  cache_control: { do_not_cache: true },
  resource_name: envoyResourceName(g),
  metadata: {
    filter_metadata: { [g.s('filter')]: struct(g) },
    typed_filter_metadata: { [g.s('typed-filter')]: anyOf(g, 'TypedMeta') },
  },
});

const xdsResourceLocator = (g: Distinct): Obj => ({
  scheme: 'HTTP',
  id: g.s('locator/id'),
  authority: g.s('locator.authority'),
  resource_type: g.s('envoy.config.listener.v3.Listener'),
  exact_context: contextParams(g),
  directives: [
    {
      alt: {
        scheme: 'FILE',
        id: g.s('alt/id'),
        authority: g.s('alt.authority'),
        resource_type: g.s('envoy.config.listener.v3.Listener'),
        exact_context: contextParams(g),
      },
    },
    { entry: g.s('entry-name') },
  ],
});

interface Case {
  label: string;
  type: string;
  build: (g: Distinct) => Obj;
}

const CASES: Case[] = [
  {
    label: 'DiscoveryRequest',
    type: 'envoy.service.discovery.v3.DiscoveryRequest',
    build: (g) => ({
      version_info: g.s('version-info'),
      node: node(g, 'user_agent_version'),
      resource_names: [g.s('resource'), g.s('resource')],
      type_url: g.s('type.googleapis.com/envoy.config.cluster.v3.Cluster'),
      response_nonce: g.s('nonce'),
      error_detail: rpcStatus(g),
      resource_locators: [envoyResourceLocator(g), envoyResourceLocator(g)],
    }),
  },
  {
    label: 'DiscoveryResponse',
    type: 'envoy.service.discovery.v3.DiscoveryResponse',
    build: (g) => ({
      version_info: g.s('version-info'),
      resources: [anyOf(g, 'Cluster'), anyOf(g, 'Cluster')],
      canary: true,
      type_url: g.s('type.googleapis.com/envoy.config.cluster.v3.Cluster'),
      nonce: g.s('nonce'),
      control_plane: controlPlane(g),
      resource_errors: [resourceError(g), resourceError(g)],
    }),
  },
  {
    label: 'DeltaDiscoveryRequest',
    type: 'envoy.service.discovery.v3.DeltaDiscoveryRequest',
    build: (g) => ({
      node: node(g, 'user_agent_build_version'),
      type_url: g.s('type.googleapis.com/envoy.config.listener.v3.Listener'),
      resource_names_subscribe: [g.s('sub'), g.s('sub')],
      resource_names_unsubscribe: [g.s('unsub'), g.s('unsub')],
      initial_resource_versions: { [g.s('known')]: g.s('v'), [g.s('known')]: g.s('v') },
      response_nonce: g.s('nonce'),
      error_detail: rpcStatus(g),
      resource_locators_subscribe: [envoyResourceLocator(g), envoyResourceLocator(g)],
      resource_locators_unsubscribe: [envoyResourceLocator(g)],
    }),
  },
  {
    label: 'DeltaDiscoveryResponse',
    type: 'envoy.service.discovery.v3.DeltaDiscoveryResponse',
    build: (g) => ({
      system_version_info: g.s('system-version'),
      resources: [resource(g), resource(g)],
      type_url: g.s('type.googleapis.com/envoy.config.listener.v3.Listener'),
      nonce: g.s('nonce'),
      removed_resources: [g.s('removed'), g.s('removed')],
      control_plane: controlPlane(g),
      removed_resource_names: [envoyResourceName(g), envoyResourceName(g)],
      resource_errors: [resourceError(g), resourceError(g)],
    }),
  },
  {
    label: 'Resource (ttl, cache_control, aliases, resource_name, metadata)',
    type: 'envoy.service.discovery.v3.Resource',
    build: (g) => resource(g),
  },
  {
    label: 'Node with user_agent_version',
    type: 'envoy.config.core.v3.Node',
    build: (g) => node(g, 'user_agent_version'),
  },
  {
    label: 'Node with user_agent_build_version',
    type: 'envoy.config.core.v3.Node',
    build: (g) => node(g, 'user_agent_build_version'),
  },
  {
    label: 'google.rpc.Status',
    type: 'google.rpc.Status',
    build: (g) => rpcStatus(g),
  },
  {
    label: 'xds.core.v3.ResourceLocator (exact_context, alt and entry directives)',
    type: 'xds.core.v3.ResourceLocator',
    build: (g) => xdsResourceLocator(g),
  },
  {
    label: 'xds.core.v3.ResourceName',
    type: 'xds.core.v3.ResourceName',
    build: (g) => ({
      id: g.s('name/id'),
      authority: g.s('name.authority'),
      resource_type: g.s('envoy.config.route.v3.RouteConfiguration'),
      context: contextParams(g),
    }),
  },
  {
    label: 'xds.core.v3.ContextParams',
    type: 'xds.core.v3.ContextParams',
    build: (g) => contextParams(g),
  },
  {
    label: 'xds.core.v3.CollectionEntry with locator',
    type: 'xds.core.v3.CollectionEntry',
    build: (g) => ({ locator: xdsResourceLocator(g) }),
  },
  {
    label: 'xds.core.v3.CollectionEntry with inline_entry',
    type: 'xds.core.v3.CollectionEntry',
    build: (g) => ({
      inline_entry: { name: g.s('inline-name'), version: g.s('inline-version'), resource: anyOf(g, 'Inline') },
    }),
  },
  {
    label: 'xds.core.v3.Authority',
    type: 'xds.core.v3.Authority',
    build: (g) => ({ name: g.s('authority-name') }),
  },
  {
    label: 'ClientStatusRequest (every node matcher variant)',
    type: 'envoy.service.status.v3.ClientStatusRequest',
    build: (g) => ({
      node_matchers: [
        {
          node_id: { exact: g.s('node-exact'), ignore_case: true },
          node_metadatas: [
            { path: [{ key: g.s('md') }, { key: g.s('md') }], value: { string_match: { prefix: g.s('md-prefix') } } },
            { path: [{ key: g.s('md') }], value: { null_match: {} } },
            { path: [{ key: g.s('md') }], value: { double_match: { exact: g.u() + 0.5 } } },
            { path: [{ key: g.s('md') }], value: { double_match: { range: { start: g.u() + 0.25, end: g.u() + 0.75 } } } },
            { path: [{ key: g.s('md') }], value: { bool_match: true } },
            { path: [{ key: g.s('md') }], value: { present_match: true } },
            { path: [{ key: g.s('md') }], value: { list_match: { one_of: { string_match: { exact: g.s('md-item') } } } } },
            {
              path: [{ key: g.s('md') }],
              value: { or_match: { value_matchers: [{ string_match: { suffix: g.s('md-suffix') } }, { bool_match: true }] } },
            },
          ],
        },
        { node_id: { prefix: g.s('node-prefix') } },
        { node_id: { suffix: g.s('node-suffix') } },
        { node_id: { safe_regex: { regex: g.s('node-[0-9]+') } } },
        { node_id: { contains: g.s('node-part') } },
      ],
      node: node(g, 'user_agent_version'),
      exclude_resource_contents: true,
    }),
  },
  {
    label: 'ClientStatusResponse (GenericXdsConfig with error_state)',
    type: 'envoy.service.status.v3.ClientStatusResponse',
    build: (g) => ({
      config: [
        {
          node: node(g, 'user_agent_build_version'),
          generic_xds_configs: [
            {
              type_url: g.s('type.googleapis.com/envoy.config.listener.v3.Listener'),
              name: g.s('xdstp://a/envoy.config.listener.v3.Listener/l'),
              version_info: g.s('held-version'),
              xds_config: anyOf(g, 'Listener'),
              last_updated: { seconds: g.u(), nanos: g.u() },
              config_status: 'ERROR',
              client_status: 'NACKED',
              error_state: {
                failed_configuration: anyOf(g, 'Listener'),
                last_update_attempt: { seconds: g.u(), nanos: g.u() },
                details: g.s('nack-message'),
                version_info: g.s('rejected-version'),
              },
              is_static_resource: true,
            },
            { type_url: g.s('type.googleapis.com/envoy.config.cluster.v3.Cluster'), name: g.s('c'), config_status: 'SYNCED', client_status: 'ACKED' },
          ],
          client_scope: g.s('stream/1/delta'),
        },
      ],
    }),
  },
];

function caseFor(label: string): Case {
  const found = CASES.find((c) => c.label === label);
  if (!found) throw new Error(`no value case labelled ${label}`);
  return found;
}

function upstreamLabel(typeName: string): string {
  if (typeName.startsWith('envoy.')) return "Envoy's";
  if (typeName.startsWith('xds.')) return "cncf/xds's";
  return "googleapis'";
}

// ---------------------------------------------------------------------------
// 1. Schema
// ---------------------------------------------------------------------------

test('upstream protos from @grpc/grpc-js-xds load with protobufjs and contain the transport messages', () => {
  for (const c of CASES) {
    assert.ok(lookupUpstreamType(c.type), `upstream lacks ${c.type}`);
  }
  // The relay's own root and the all-files root agree on the tested messages.
  for (const c of CASES) {
    assert.deepEqual(
      ourLookup(c.type).fieldsArray.map((f) => [f.name, f.id, f.type]),
      oursAll.lookupType(c.type).fieldsArray.map((f) => [f.name, f.id, f.type]),
    );
  }
});

test('every field declared in our protos exists upstream with the same name, number, type, cardinality and oneof', () => {
  const problems: string[] = [];
  let checked = 0;
  for (const type of ourTypes) {
    const typeName = nameOf(type);
    const theirs = lookupUpstreamType(typeName);
    if (!theirs) {
      const expected = KNOWN_NEWER_TYPES[typeName];
      if (!expected) {
        problems.push(`${typeName}: no such message upstream (and not listed as known-newer)`);
        continue;
      }
      // Known-newer type: check our declaration against the public definition.
      const declared = type.fieldsArray.map((f) => f.name).sort();
      if (JSON.stringify(declared) !== JSON.stringify(Object.keys(expected).sort())) {
        problems.push(`${typeName}: declares [${declared}] but the public message has [${Object.keys(expected).sort()}]`);
      }
      for (const field of type.fieldsArray) {
        const want = expected[field.name];
        if (!want) continue;
        checked++;
        if (field.id !== want.id) problems.push(`${typeName}.${field.name}: number ${field.id}, public ${want.id}`);
        if (typeKey(field) !== want.type) problems.push(`${typeName}.${field.name}: type ${typeKey(field)}, public ${want.type}`);
        if (field.repeated !== want.repeated) problems.push(`${typeName}.${field.name}: repeated ${field.repeated}, public ${want.repeated}`);
      }
      continue;
    }
    for (const field of type.fieldsArray) {
      const where = `${typeName}.${field.name}`;
      checked++;
      const theirField = theirs.fields[field.name];
      if (!theirField) {
        const want = KNOWN_NEWER_FIELDS[where];
        if (!want) {
          problems.push(`${where}: absent upstream (and not listed as known-newer)`);
          continue;
        }
        if (field.id !== want.id) problems.push(`${where}: number ${field.id}, public ${want.id}`);
        if (typeKey(field) !== want.type) problems.push(`${where}: type ${typeKey(field)}, public ${want.type}`);
        if (field.repeated !== want.repeated) problems.push(`${where}: repeated ${field.repeated}, public ${want.repeated}`);
        if (theirs.fieldsById[field.id]) {
          problems.push(`${where}: number ${field.id} is taken upstream by ${theirs.fieldsById[field.id]!.name}`);
        }
        continue;
      }
      if (field.id !== theirField.id) problems.push(`${where}: number ${field.id}, upstream ${theirField.id}`);
      if (typeKey(field) !== typeKey(theirField)) {
        problems.push(`${where}: type ${typeKey(field)}, upstream ${typeKey(theirField)}`);
      }
      const kind = (f: protobuf.Field): string =>
        f.resolvedType instanceof protobuf.Enum ? 'enum' : f.resolvedType ? 'message' : 'scalar';
      if (kind(field) !== kind(theirField)) problems.push(`${where}: ${kind(field)}, upstream ${kind(theirField)}`);
      if (field.repeated !== theirField.repeated) {
        problems.push(`${where}: repeated ${field.repeated}, upstream ${theirField.repeated}`);
      }
      if (field.map !== theirField.map) problems.push(`${where}: map ${field.map}, upstream ${theirField.map}`);
      if (field.map && theirField.map) {
        const ourKey = (field as unknown as protobuf.MapField).keyType;
        const theirKey = (theirField as unknown as protobuf.MapField).keyType;
        if (ourKey !== theirKey) problems.push(`${where}: map key ${ourKey}, upstream ${theirKey}`);
      }
      if (field.packed !== theirField.packed) problems.push(`${where}: packed ${field.packed}, upstream ${theirField.packed}`);
      const ourOneof = field.partOf?.name ?? null;
      const theirOneof = theirField.partOf?.name ?? null;
      if (ourOneof !== theirOneof) problems.push(`${where}: oneof ${ourOneof}, upstream ${theirOneof}`);
    }
  }
  assert.deepEqual(problems, []);
  assert.ok(checked > 100, `walked only ${checked} fields`);
});

test('every enum declared in our protos has the same value names and numbers upstream', () => {
  assert.ok(ourEnums.length >= 2);
  for (const e of ourEnums) {
    const theirs = upstream.lookup(upstreamNameOf(nameOf(e)));
    assert.ok(theirs instanceof protobuf.Enum, `upstream lacks enum ${nameOf(e)}`);
    for (const [valueName, num] of Object.entries(e.values)) {
      assert.equal(theirs.values[valueName], num, `${nameOf(e)}.${valueName}`);
    }
  }
});

test('known-newer fields and types are genuinely absent from the npm snapshot and declared by us with their public numbers', () => {
  for (const [where, want] of Object.entries(KNOWN_NEWER_FIELDS)) {
    const typeName = where.slice(0, where.lastIndexOf('.'));
    const fieldName = where.slice(where.lastIndexOf('.') + 1);
    const ourField = oursAll.lookupType(typeName).fields[fieldName];
    assert.ok(ourField, `stale known-newer entry: we no longer declare ${where}`);
    assert.equal(ourField.id, want.id, where);
    assert.equal(typeKey(ourField), want.type, where);
    const theirType = lookupUpstreamType(typeName);
    assert.ok(theirType, `upstream lacks ${typeName}`);
    assert.equal(
      theirType.fields[fieldName],
      undefined,
      `${where} now exists in @grpc/grpc-js-xds: delete it from KNOWN_NEWER_FIELDS so it is compared like any other field`,
    );

    // An older decoder skips the field as unknown and keeps everything else.
    const ourType = oursAll.lookupType(typeName);
    const g = new Distinct();
    const sibling = ourType.fieldsArray.find(
      (f) => f.name !== fieldName && !f.resolvedType && !f.repeated && f.type === 'string',
    );
    assert.ok(sibling, `${typeName} has no plain string field to carry alongside`);
    const onlyNew: Obj = {
      [sibling.name]: g.s('sibling'),
      [fieldName]: ourField.resolvedType
        ? [stripKnownNewer(ourField.resolvedType as protobuf.Type, resourceError(g))]
        : g.s('newer'),
    };
    const bytes = encode(ourType, onlyNew);
    assert.ok(wireFieldNumbers(bytes).includes(want.id), `${where} not on the wire as field ${want.id}`);
    assert.deepEqual(view(theirType, bytes), { [sibling.name]: onlyNew[sibling.name] });
  }
  for (const typeName of Object.keys(KNOWN_NEWER_TYPES)) {
    assert.ok(oursAll.lookup(typeName) instanceof protobuf.Type, `stale known-newer type ${typeName}`);
    assert.equal(
      lookupUpstreamType(typeName),
      undefined,
      `${typeName} now exists in @grpc/grpc-js-xds: delete it from KNOWN_NEWER_TYPES`,
    );
  }
});

// ---------------------------------------------------------------------------
// 2. Values, both directions
// ---------------------------------------------------------------------------

test('the value samples set every field we declare, with distinct non-default values', () => {
  const covered = new Set<string>();
  for (const c of CASES) {
    const type = ourLookup(c.type);
    const sample = c.build(new Distinct());

    // Distinct leaves within one sample: a swapped pair of same-typed fields shows up.
    const leaves: unknown[] = [];
    walk(type, sample, (_owner, field, value) => {
      if (field.resolvedType) return;
      for (const leaf of field.repeated ? (value as unknown[]) : field.map ? Object.values(value as Obj) : [value]) {
        if (typeof leaf === 'string' || typeof leaf === 'number') leaves.push(leaf);
      }
    });
    const dupes = leaves.filter((v, i) => leaves.indexOf(v) !== i);
    assert.deepEqual(dupes, [], `${c.label}: repeated leaf values`);

    // Coverage is taken from what survived our own encode/decode, not from the input.
    const decoded = view(type, encode(type, sample));
    walk(type, decoded, (owner, field, value) => {
      if (isNonDefault(value)) covered.add(`${nameOf(owner)}.${field.name}`);
    });
  }
  const missing = ourTypes
    .flatMap((t) => t.fieldsArray.map((f) => `${nameOf(t)}.${f.name}`))
    .filter((f) => !covered.has(f));
  assert.deepEqual(missing, [], 'declared fields that no value case sets');
});

for (const c of CASES) {
  const upstreamName = upstreamLabel(c.type);

  test(`${c.label} encoded with our protos decodes identically under ${upstreamName}`, () => {
    const ourType = ourLookup(c.type);
    const theirType = lookupUpstreamType(c.type)!;
    const sample = c.build(new Distinct());

    const bytes = encode(ourType, sample);
    const ourView = view(ourType, bytes);
    const theirView = view(theirType, bytes);
    // The only permitted loss: fields the older upstream snapshot does not know.
    assert.deepEqual(theirView, stripKnownNewer(ourType, ourView));
    // And what we decode is what we meant to send.
    assert.deepEqual(ourView, view(ourType, encode(ourType, ourView)));
  });

  test(`${c.label} encoded with ${upstreamName} protos decodes identically under ours, byte for byte`, () => {
    const ourType = ourLookup(c.type);
    const theirType = lookupUpstreamType(c.type)!;
    const sample = stripKnownNewer(ourType, c.build(new Distinct()));

    const theirBytes = encode(theirType, sample);
    assert.deepEqual(view(ourType, theirBytes), view(theirType, theirBytes));
    // Both sides serialize the same message to the same bytes.
    assert.deepEqual(Buffer.from(encode(ourType, sample)), Buffer.from(theirBytes));
    // Nothing but the known-newer fields was lost on the way in.
    assert.deepEqual(
      view(theirType, theirBytes),
      stripKnownNewer(ourType, view(ourType, encode(ourType, c.build(new Distinct())))),
    );
  });
}

// ---------------------------------------------------------------------------
// 3. The ADS service
// ---------------------------------------------------------------------------

const ADS = 'envoy.service.discovery.v3.AggregatedDiscoveryService';
const EXPECTED_METHODS = {
  StreamAggregatedResources: {
    path: `/${ADS}/StreamAggregatedResources`,
    request: 'envoy.service.discovery.v3.DiscoveryRequest',
    response: 'envoy.service.discovery.v3.DiscoveryResponse',
  },
  DeltaAggregatedResources: {
    path: `/${ADS}/DeltaAggregatedResources`,
    request: 'envoy.service.discovery.v3.DeltaDiscoveryRequest',
    response: 'envoy.service.discovery.v3.DeltaDiscoveryResponse',
  },
};

function protobufjsMethods(root: protobuf.Root): Obj {
  const service = root.lookupService(ADS);
  service.resolveAll();
  return Object.fromEntries(
    service.methodsArray.map((m) => [
      m.name,
      {
        path: `/${nameOf(service)}/${m.name}`,
        requestStream: m.requestStream === true,
        responseStream: m.responseStream === true,
        request: nameOf(m.resolvedRequestType!),
        response: nameOf(m.resolvedResponseType!),
      },
    ]),
  );
}

const loaderOptions = { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true };

function grpcMethods(includeDirs: string[]): protoLoader.ServiceDefinition {
  const pkg = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', { ...loaderOptions, includeDirs });
  return pkg[ADS] as protoLoader.ServiceDefinition;
}

test('ADS methods have identical paths, message types and bidi-streaming flags in our protos and upstream', () => {
  const expected = Object.fromEntries(
    Object.entries(EXPECTED_METHODS).map(([name, m]) => [
      name,
      { path: m.path, requestStream: true, responseStream: true, request: m.request, response: m.response },
    ]),
  );
  assert.deepEqual(protobufjsMethods(ours), expected);
  assert.deepEqual(protobufjsMethods(upstream), expected);
});

test('grpc-js sees the same ADS method paths and streaming flags from our protos as from upstream, and the relay uses them', () => {
  const ourService = grpcMethods([PROTO_DIR]);
  const theirService = grpcMethods(UPSTREAM_INCLUDE_DIRS);
  const summary = (s: protoLoader.ServiceDefinition): Obj =>
    Object.fromEntries(
      Object.entries(s).map(([name, m]) => [
        name,
        { path: m.path, requestStream: m.requestStream, responseStream: m.responseStream },
      ]),
    );
  assert.deepEqual(summary(ourService), summary(theirService));
  assert.deepEqual(Object.keys(summary(theirService)).sort(), Object.keys(EXPECTED_METHODS).sort());

  assert.equal(DELTA_ADS_PATH, theirService.DeltaAggregatedResources!.path);
  assert.equal(SOTW_ADS_PATH, theirService.StreamAggregatedResources!.path);
  assert.equal(deltaAdsMethod.path, theirService.DeltaAggregatedResources!.path);
  assert.equal(deltaAdsMethod.requestStream, true);
  assert.equal(deltaAdsMethod.responseStream, true);
});

test('CSDS methods have the public paths, message types and streaming flags in our protos, upstream, grpc-js and the relay', () => {
  const summary = (root: protobuf.Root): Obj => {
    const service = root.lookupService(CSDS_SERVICE);
    service.resolveAll();
    return Object.fromEntries(
      service.methodsArray.map((m) => [
        m.name,
        {
          path: `/${nameOf(service)}/${m.name}`,
          requestStream: m.requestStream === true,
          responseStream: m.responseStream === true,
          request: nameOf(m.resolvedRequestType!),
          response: nameOf(m.resolvedResponseType!),
        },
      ]),
    );
  };
  const request = 'envoy.service.status.v3.ClientStatusRequest';
  const response = 'envoy.service.status.v3.ClientStatusResponse';
  const expected = {
    StreamClientStatus: { path: `/${CSDS_SERVICE}/StreamClientStatus`, requestStream: true, responseStream: true, request, response },
    FetchClientStatus: { path: `/${CSDS_SERVICE}/FetchClientStatus`, requestStream: false, responseStream: false, request, response },
  };
  assert.deepEqual(summary(oursStatus), expected);
  assert.deepEqual(summary(upstream), expected);

  const loaded = protoLoader.loadSync('envoy/service/status/v3/csds.proto', { ...loaderOptions, includeDirs: UPSTREAM_INCLUDE_DIRS });
  const theirs = loaded[CSDS_SERVICE] as protoLoader.ServiceDefinition;
  for (const [name, m] of Object.entries(expected)) {
    const relay = csdsServiceDefinition[name]!;
    assert.equal(relay.path, theirs[name]!.path, name);
    assert.equal(relay.path, m.path, name);
    assert.equal(relay.requestStream, m.requestStream, name);
    assert.equal(relay.responseStream, m.responseStream, name);
  }
});

test("the relay's delta codecs interoperate with upstream's grpc-js (de)serializers for DeltaAggregatedResources", () => {
  const method = grpcMethods(UPSTREAM_INCLUDE_DIRS).DeltaAggregatedResources!;
  const ourRequestType = ours.lookupType(EXPECTED_METHODS.DeltaAggregatedResources.request);
  const ourResponseType = ours.lookupType(EXPECTED_METHODS.DeltaAggregatedResources.response);

  // A request as an upstream grpc-js client would serialize it, read by our codec.
  const request = stripKnownNewer(ourRequestType, caseFor('DeltaDiscoveryRequest').build(new Distinct()));
  const requestBytes = method.requestSerialize(request);
  const decodedRequest = deltaRequestCodec.decode(requestBytes) as unknown as Obj;
  assert.deepEqual(
    view(ourRequestType, encode(ourRequestType, decodedRequest)),
    view(ourRequestType, requestBytes),
  );

  // A response from our codec, read by an upstream grpc-js client.
  const response = stripKnownNewer(ourResponseType, caseFor('DeltaDiscoveryResponse').build(new Distinct()));
  const responseBytes = deltaResponseCodec.encode(response as Parameters<typeof deltaResponseCodec.encode>[0]);
  const theirResponse = method.responseDeserialize(responseBytes) as Obj;
  assert.equal(theirResponse.nonce, response.nonce);
  assert.equal(theirResponse.type_url, response.type_url);
  assert.deepEqual(theirResponse.removed_resources, response.removed_resources);
  assert.deepEqual(
    view(lookupUpstreamType(EXPECTED_METHODS.DeltaAggregatedResources.response)!, responseBytes),
    stripKnownNewer(ourResponseType, view(ourResponseType, encode(ourResponseType, response))),
  );
});
