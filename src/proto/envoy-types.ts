/**
 * Envoy's full API type registry, for the two places that need to understand
 * payloads: the file-backed origin (typed JSON → encoded `Any`) and the debug
 * client (encoded `Any` → JSON). The relay's hot path never comes here.
 *
 * The `.proto` tree is the one shipped inside `@grpc/grpc-js-xds` (deps/:
 * envoy-api, xds, googleapis, protoc-gen-validate); nothing of Envoy's API is
 * copied into this repository. Loading is lazy twice over: the registry is
 * created on first use, and a `.proto` file (with its imports) is parsed only
 * when a type it declares is first asked for. A typical mesh (listeners with
 * the HTTP connection manager, routes, clusters, endpoints) costs ~70 files.
 *
 * JSON follows the proto3 JSON mapping: field names in proto (`snake_case`) or
 * JSON (`lowerCamelCase`) spelling, enums by name or number, 64-bit integers as
 * numbers or decimal strings, bytes as base64, and the well-known types in
 * their special forms (`Any` with `"@type"`, `Duration` as `"5s"`, `Timestamp`
 * as RFC 3339, wrappers as bare values, `Struct` / `Value` as plain JSON,
 * `FieldMask` as `"a.b,c"`). Unknown fields are errors, so typos are caught.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protobuf from 'protobufjs';
import { XdstpNameError, formatName, parseUrl, type XdstpName } from '../xdstp';

const XDS_PACKAGE = '@grpc/grpc-js-xds';
const DEP_ROOTS = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'];

/** A typed-JSON problem, with the JSON path where it was found. */
export class TypedJsonError extends Error {
  constructor(
    readonly where: string,
    readonly reason: string,
  ) {
    super(where ? `${where}: ${reason}` : reason);
  }
}

export interface EncodedAny {
  typeUrl: string;
  value: Buffer;
}

export interface RegistryStats {
  /** .proto files parsed so far. */
  files: number;
  /** Time spent parsing them, in ms. */
  loadMs: number;
}

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** proto3 JSON name of a field: lowerCamelCase of the proto name. */
function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function camelToSnake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The message name of a type URL (`type.googleapis.com/a.b.C` → `a.b.C`). */
export function typeNameOf(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
}

const INT32 = new Set(['int32', 'sint32', 'sfixed32', 'uint32', 'fixed32']);
const INT64 = new Set(['int64', 'sint64', 'sfixed64', 'uint64', 'fixed64']);
const UNSIGNED = new Set(['uint32', 'fixed32', 'uint64', 'fixed64']);
const WRAPPERS = new Set([
  '.google.protobuf.DoubleValue',
  '.google.protobuf.FloatValue',
  '.google.protobuf.Int64Value',
  '.google.protobuf.UInt64Value',
  '.google.protobuf.Int32Value',
  '.google.protobuf.UInt32Value',
  '.google.protobuf.BoolValue',
  '.google.protobuf.StringValue',
  '.google.protobuf.BytesValue',
]);
/** Well-known types whose JSON form is not an object of their fields. */
const SPECIAL_JSON = new Set([
  ...WRAPPERS,
  '.google.protobuf.Duration',
  '.google.protobuf.Timestamp',
  '.google.protobuf.Struct',
  '.google.protobuf.Value',
  '.google.protobuf.ListValue',
  '.google.protobuf.FieldMask',
]);

/** Written and printed as its xdstp:// URL (what list-collection `locator` entries hold). */
const RESOURCE_LOCATOR = '.xds.core.v3.ResourceLocator';

const DURATION = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/;
const BASE64 = /^[A-Za-z0-9+/\-_]*={0,2}$/;

function parseDuration(v: unknown, where: string): { seconds: number; nanos: number } {
  const m = typeof v === 'string' ? DURATION.exec(v.trim()) : null;
  if (!m) throw new TypedJsonError(where, `expected a duration like "5s" or "0.250s", got ${describe(v)}`);
  const sign = m[1] ? -1 : 1;
  const nanos = m[3] ? Number(m[3].padEnd(9, '0')) : 0;
  return { seconds: sign * Number(m[2]), nanos: sign * nanos };
}

function formatDuration(seconds: number, nanos: number): string {
  const negative = seconds < 0 || nanos < 0;
  const s = Math.abs(seconds);
  const n = Math.abs(nanos);
  let frac = '';
  if (n !== 0) frac = `.${String(n).padStart(9, '0').replace(/0+$/, '')}`;
  return `${negative ? '-' : ''}${s}${frac}s`;
}

/** protobufjs hands 64-bit integers back as a Long (when `long` is installed) or a number; both print as decimal. */
function longString(v: unknown): string {
  return String(v);
}

function longNumber(v: unknown): number {
  return Number(longString(v));
}

/** Lazily loaded Envoy / xds / googleapis types, with proto3-JSON conversion both ways. */
export class EnvoyTypes {
  private readonly root = new protobuf.Root();
  private readonly roots: string[];
  private readonly protobufDir: string;
  private readonly missing = new Set<string>();
  private readonly fieldIndex = new Map<protobuf.Type, Map<string, protobuf.Field>>();
  private wellKnownLoaded = false;
  private loadNs = 0n;

  constructor(depsDir: string) {
    this.roots = DEP_ROOTS.map((d) => path.join(depsDir, d));
    this.protobufDir = path.dirname(require.resolve('protobufjs/package.json'));
    this.root.resolvePath = (_origin, target) => this.locate(target) ?? target;
  }

  get stats(): RegistryStats {
    return { files: this.root.files.length, loadMs: Math.round(Number(this.loadNs) / 1e5) / 10 };
  }

  /** Path of an import, or null when no root has it. */
  private locate(target: string): string | null {
    if (target.startsWith('google/protobuf/')) {
      if (target in protobuf.common) return target; // protobufjs bundles these
      const p = path.join(this.protobufDir, target);
      return fs.existsSync(p) ? p : null;
    }
    for (const r of this.roots) {
      const p = path.join(r, target);
      if (fs.existsSync(p)) return p;
    }
    return null;
  }

  private load(files: string[]): void {
    const t0 = process.hrtime.bigint();
    try {
      this.root.loadSync(files, { keepCase: true });
    } finally {
      this.loadNs += process.hrtime.bigint() - t0;
    }
  }

  /** The message type called `fullName`, loading the file that declares it on first use. */
  lookup(fullName: string): protobuf.Type | undefined {
    const found = this.find(fullName);
    if (found || this.missing.has(fullName)) return found;
    if (fullName.startsWith('google.protobuf.')) {
      if (!this.wellKnownLoaded) {
        this.wellKnownLoaded = true;
        this.load(Object.keys(protobuf.common).filter((f) => f.endsWith('.proto')));
      }
    } else {
      const file = this.fileDeclaring(fullName);
      if (file) this.load([file]);
    }
    const type = this.find(fullName);
    if (!type) this.missing.add(fullName);
    return type;
  }

  private find(fullName: string): protobuf.Type | undefined {
    try {
      const t = this.root.lookup(fullName);
      return t instanceof protobuf.Type ? t : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Envoy's layout puts package `a.b.v3` in directory `a/b/v3/`. Find the
   * package directory (longest prefix first, so nested messages work) and the
   * file in it that declares the top-level message.
   */
  private fileDeclaring(fullName: string): string | undefined {
    const parts = fullName.split('.');
    for (let i = parts.length - 1; i >= 1; i--) {
      const pkg = parts.slice(0, i).join('.');
      const dir = parts.slice(0, i).join('/');
      const decl = new RegExp(`^\\s*message\\s+${parts[i]}\\s*\\{`, 'm');
      const pkgDecl = new RegExp(`^\\s*package\\s+${pkg.replace(/\./g, '\\.')}\\s*;`, 'm');
      for (const r of this.roots) {
        let entries: string[];
        try {
          entries = fs.readdirSync(path.join(r, dir)).filter((f) => f.endsWith('.proto')).sort();
        } catch {
          continue;
        }
        for (const f of entries) {
          let text: string;
          try {
            text = fs.readFileSync(path.join(r, dir, f), 'utf8');
          } catch {
            continue;
          }
          if (pkgDecl.test(text) && decl.test(text)) return `${dir}/${f}`;
        }
      }
    }
    return undefined;
  }

  private requireType(typeUrl: unknown, where: string): protobuf.Type {
    if (typeof typeUrl !== 'string' || !typeUrl.includes('/')) {
      throw new TypedJsonError(where, `"@type" must be a type URL like "type.googleapis.com/envoy.config.cluster.v3.Cluster", got ${describe(typeUrl)}`);
    }
    const name = typeNameOf(typeUrl);
    let type: protobuf.Type | undefined;
    try {
      type = this.lookup(name);
    } catch (err) {
      throw new TypedJsonError(where, `cannot load the proto declaring ${name}: ${(err as Error).message}`);
    }
    if (!type) throw new TypedJsonError(where, `unknown type ${name} (not in the Envoy API protos of ${XDS_PACKAGE})`);
    return type;
  }

  // --- JSON → binary ---------------------------------------------------------

  /** Encodes `{"@type": URL, ...fields}` as an `Any`'s type URL and value bytes. */
  encodeAny(json: unknown, where = ''): EncodedAny {
    if (!isObject(json)) throw new TypedJsonError(where, `expected an object with "@type", got ${describe(json)}`);
    const typeUrl = json['@type'];
    const type = this.requireType(typeUrl, where ? `${where}["@type"]` : '"@type"');
    const rest: JsonObject = {};
    for (const [k, v] of Object.entries(json)) if (k !== '@type') rest[k] = v;
    let object: JsonObject;
    if (SPECIAL_JSON.has(type.fullName)) {
      const keys = Object.keys(rest);
      if (keys.length !== 1 || keys[0] !== 'value') {
        throw new TypedJsonError(where, `an Any holding ${type.fullName.slice(1)} needs exactly one other key, "value"`);
      }
      object = this.messageFromJson(type, rest.value, where ? `${where}.value` : 'value');
    } else {
      object = this.messageFromJson(type, rest, where);
    }
    let bytes: Uint8Array;
    try {
      bytes = type.encode(type.fromObject(object)).finish();
    } catch (err) {
      throw new TypedJsonError(where, `cannot encode ${type.fullName.slice(1)}: ${(err as Error).message}`);
    }
    return { typeUrl: typeUrl as string, value: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) };
  }

  private fieldsOf(type: protobuf.Type): Map<string, protobuf.Field> {
    let index = this.fieldIndex.get(type);
    if (!index) {
      index = new Map();
      for (const f of type.fieldsArray) {
        f.resolve();
        index.set(f.name, f);
        index.set(jsonName(f.name), f);
      }
      this.fieldIndex.set(type, index);
    }
    return index;
  }

  /** proto3 JSON of a message → protobufjs plain object (proto field names). */
  private messageFromJson(type: protobuf.Type, json: unknown, where: string): JsonObject {
    const special = this.wellKnownFromJson(type, json, where);
    if (special) return special;
    if (type.fullName === RESOURCE_LOCATOR && typeof json === 'string') return locatorFromUrl(json, where);
    if (!isObject(json)) throw new TypedJsonError(where, `expected an object for ${type.fullName.slice(1)}, got ${describe(json)}`);
    const fields = this.fieldsOf(type);
    const out: JsonObject = {};
    const oneofSet = new Map<string, string>();
    for (const [key, value] of Object.entries(json)) {
      const at = where ? `${where}.${key}` : key;
      const field = fields.get(key);
      if (!field) throw new TypedJsonError(at, `unknown field "${key}" in ${type.fullName.slice(1)}`);
      const isValue = field.resolvedType?.fullName === '.google.protobuf.Value';
      if (value === null && !(isValue && !field.repeated && !field.map)) continue;
      if (out[field.name] !== undefined) throw new TypedJsonError(at, `field ${field.name} is given twice`);
      if (field.partOf) {
        const other = oneofSet.get(field.partOf.name);
        if (other !== undefined) {
          throw new TypedJsonError(at, `"${field.name}" and "${other}" are both set, but only one of oneof ${field.partOf.name} may be`);
        }
        oneofSet.set(field.partOf.name, field.name);
      }
      out[field.name] = this.fieldFromJson(field, value, at);
    }
    return out;
  }

  private fieldFromJson(field: protobuf.Field, value: unknown, where: string): unknown {
    if (field.map) {
      if (!isObject(value)) throw new TypedJsonError(where, `expected an object (map), got ${describe(value)}`);
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(value)) out[k] = this.singleFromJson(field, v, `${where}.${k}`);
      return out;
    }
    if (field.repeated) {
      if (!Array.isArray(value)) throw new TypedJsonError(where, `expected a list, got ${describe(value)}`);
      return value.map((v, i) => this.singleFromJson(field, v, `${where}[${i}]`));
    }
    return this.singleFromJson(field, value, where);
  }

  private singleFromJson(field: protobuf.Field, value: unknown, where: string): unknown {
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type) {
      if (rt.fullName === '.google.protobuf.Any') {
        const any = this.encodeAny(value, where);
        return { type_url: any.typeUrl, value: any.value };
      }
      return this.messageFromJson(rt, value, where);
    }
    if (rt instanceof protobuf.Enum) {
      if (typeof value === 'string') {
        if (!(value in rt.values)) {
          throw new TypedJsonError(where, `"${value}" is not a value of enum ${rt.fullName.slice(1)} (${Object.keys(rt.values).join(', ')})`);
        }
        return rt.values[value];
      }
      if (typeof value === 'number' && Number.isInteger(value)) return value;
      throw new TypedJsonError(where, `expected an enum name of ${rt.fullName.slice(1)}, got ${describe(value)}`);
    }
    return scalarFromJson(field.type, value, where);
  }

  private wellKnownFromJson(type: protobuf.Type, json: unknown, where: string): JsonObject | undefined {
    const name = type.fullName;
    if (!SPECIAL_JSON.has(name)) return undefined;
    if (WRAPPERS.has(name)) {
      const valueField = type.fields.value;
      return { value: scalarFromJson(valueField.type, json, where) };
    }
    switch (name) {
      case '.google.protobuf.Duration':
        return parseDuration(json, where);
      case '.google.protobuf.Timestamp': {
        const ms = typeof json === 'string' ? Date.parse(json) : NaN;
        if (!Number.isFinite(ms)) throw new TypedJsonError(where, `expected an RFC 3339 timestamp, got ${describe(json)}`);
        const frac = /\.(\d{1,9})/.exec(json as string);
        const nanos = frac ? Number(frac[1].padEnd(9, '0')) : 0;
        return { seconds: Math.floor(ms / 1000), nanos };
      }
      case '.google.protobuf.FieldMask':
        if (typeof json !== 'string') throw new TypedJsonError(where, `expected a field mask like "a.b,c", got ${describe(json)}`);
        return { paths: json === '' ? [] : json.split(',').map(camelToSnake) };
      case '.google.protobuf.Struct':
        if (!isObject(json)) throw new TypedJsonError(where, `expected an object, got ${describe(json)}`);
        return structFromJson(json);
      case '.google.protobuf.ListValue':
        if (!Array.isArray(json)) throw new TypedJsonError(where, `expected a list, got ${describe(json)}`);
        return { values: json.map(valueFromJson) };
      default:
        return valueFromJson(json);
    }
  }

  // --- binary → JSON ---------------------------------------------------------

  /** `{"@type": typeUrl, ...}` for a payload; unknown types keep their bytes as base64 `value`. */
  decodeAny(typeUrl: string, value: Uint8Array): JsonObject {
    let type: protobuf.Type | undefined;
    try {
      type = this.lookup(typeNameOf(typeUrl));
    } catch {
      type = undefined;
    }
    if (!type) return { '@type': typeUrl, value: Buffer.from(value).toString('base64') };
    let message: protobuf.Message;
    try {
      message = type.decode(value);
    } catch (err) {
      return { '@type': typeUrl, value: Buffer.from(value).toString('base64'), error: (err as Error).message };
    }
    const json = this.messageToJson(type, message);
    if (SPECIAL_JSON.has(type.fullName)) return { '@type': typeUrl, value: json };
    return { '@type': typeUrl, ...(json as JsonObject) };
  }

  private messageToJson(type: protobuf.Type, message: protobuf.Message | JsonObject): unknown {
    const m = message as unknown as JsonObject;
    const has = (k: string): boolean => Object.prototype.hasOwnProperty.call(m, k) && m[k] !== undefined && m[k] !== null;
    switch (type.fullName) {
      case '.google.protobuf.Any':
        return this.decodeAny(String(m.type_url ?? ''), (m.value as Uint8Array | undefined) ?? new Uint8Array());
      case '.google.protobuf.Duration':
        return formatDuration(has('seconds') ? longNumber(m.seconds) : 0, has('nanos') ? Number(m.nanos) : 0);
      case '.google.protobuf.Timestamp':
        return new Date((has('seconds') ? longNumber(m.seconds) : 0) * 1000 + Math.floor((has('nanos') ? Number(m.nanos) : 0) / 1e6)).toISOString();
      case '.google.protobuf.FieldMask':
        return ((m.paths as string[] | undefined) ?? []).map(jsonName).join(',');
      case '.google.protobuf.Struct':
      case '.google.protobuf.Value':
      case '.google.protobuf.ListValue':
        return structToJson(type.fullName, m);
    }
    if (WRAPPERS.has(type.fullName)) {
      return scalarToJson(type.fields.value, has('value') ? m.value : type.fields.value.typeDefault);
    }
    if (type.fullName === RESOURCE_LOCATOR) {
      const url = locatorToUrl(m);
      if (url !== undefined) return url;
    }
    const out: JsonObject = {};
    for (const field of type.fieldsArray) {
      if (!has(field.name)) continue;
      field.resolve();
      const v = m[field.name];
      if (field.map) {
        const entries = Object.entries(v as JsonObject);
        if (entries.length === 0) continue;
        const obj: JsonObject = {};
        for (const [k, x] of entries) obj[k] = this.singleToJson(field, x);
        out[field.name] = obj;
      } else if (field.repeated) {
        const arr = v as unknown[];
        if (arr.length === 0) continue;
        out[field.name] = arr.map((x) => this.singleToJson(field, x));
      } else {
        out[field.name] = this.singleToJson(field, v);
      }
    }
    return out;
  }

  private singleToJson(field: protobuf.Field, v: unknown): unknown {
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type) return this.messageToJson(rt, v as JsonObject);
    if (rt instanceof protobuf.Enum) return rt.valuesById[v as number] ?? v;
    return scalarToJson(field, v);
  }
}

/** `xdstp://…` URL → xds.core.v3.ResourceLocator (scheme XDSTP). */
function locatorFromUrl(url: string, where: string): JsonObject {
  let n: XdstpName;
  try {
    n = parseUrl(url);
  } catch (err) {
    throw new TypedJsonError(where, err instanceof XdstpNameError ? err.message : `not an xdstp:// URL: ${url}`);
  }
  const out: JsonObject = { scheme: 0, authority: n.authority, resource_type: n.resourceType, id: n.id };
  if (n.params.length > 0) out.exact_context = { params: Object.fromEntries(n.params) };
  const directives: JsonObject[] = [];
  if (n.alt !== undefined) directives.push({ alt: locatorFromUrl(n.alt, where) });
  if (n.entry !== undefined) directives.push({ entry: n.entry });
  if (directives.length > 0) out.directives = directives;
  return out;
}

/** xds.core.v3.ResourceLocator (decoded) → its xdstp:// URL; undefined when it is not one. */
function locatorToUrl(m: JsonObject): string | undefined {
  const str = (k: string): string => (typeof m[k] === 'string' ? (m[k] as string) : '');
  if (Number(m.scheme ?? 0) !== 0 || str('resource_type') === '') return undefined;
  const ctx = m.exact_context as { params?: Record<string, string> } | undefined;
  let alt: string | undefined;
  let entry: string | undefined;
  for (const d of (m.directives as JsonObject[] | undefined) ?? []) {
    if (d.alt) alt = locatorToUrl(d.alt as JsonObject);
    if (typeof d.entry === 'string' && d.entry !== '') entry = d.entry;
  }
  const id = str('id');
  const name: XdstpName = {
    authority: str('authority'),
    resourceType: str('resource_type'),
    id,
    params: Object.entries(ctx?.params ?? {}),
    glob: id === '*' || id.endsWith('/*'),
    ...(alt !== undefined ? { alt } : {}),
    ...(entry !== undefined ? { entry } : {}),
  };
  try {
    return formatName(name);
  } catch {
    return undefined;
  }
}

function scalarFromJson(fieldType: string, value: unknown, where: string): unknown {
  const bad = (what: string): TypedJsonError => new TypedJsonError(where, `expected ${what}, got ${describe(value)}`);
  if (fieldType === 'string') {
    if (typeof value !== 'string') throw bad('a string');
    return value;
  }
  if (fieldType === 'bool') {
    if (typeof value !== 'boolean') throw bad('true or false');
    return value;
  }
  if (fieldType === 'bytes') {
    if (typeof value !== 'string' || !BASE64.test(value)) throw bad('base64 bytes');
    return Buffer.from(value, 'base64');
  }
  if (fieldType === 'double' || fieldType === 'float') {
    if (typeof value === 'number') return value;
    if (value === 'NaN' || value === 'Infinity' || value === '-Infinity') return Number(value);
    if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
    throw bad('a number');
  }
  if (INT32.has(fieldType) || INT64.has(fieldType)) {
    let text: string;
    if (typeof value === 'number' && Number.isInteger(value)) text = String(value);
    else if (typeof value === 'string' && /^-?\d+$/.test(value.trim())) text = value.trim();
    else throw bad('an integer');
    if (UNSIGNED.has(fieldType) && text.startsWith('-')) throw bad('a non-negative integer');
    if (INT32.has(fieldType)) {
      const n = Number(text);
      const [lo, hi] = UNSIGNED.has(fieldType) ? [0, 0xffffffff] : [-0x80000000, 0x7fffffff];
      if (n < lo || n > hi) throw bad(`an integer in [${lo}, ${hi}]`);
      return n;
    }
    return text; // protobufjs takes 64-bit values as decimal strings
  }
  throw new TypedJsonError(where, `unsupported field type ${fieldType}`);
}

function scalarToJson(field: protobuf.Field, v: unknown): unknown {
  if (INT64.has(field.type)) return longString(v);
  if (field.type === 'bytes') return Buffer.from(v as Uint8Array).toString('base64');
  if ((field.type === 'double' || field.type === 'float') && typeof v === 'number' && !Number.isFinite(v)) return String(v);
  return v;
}

/** google.protobuf.Value as protobufjs bundles it (its field names are camelCase there). */
function valueFromJson(v: unknown): JsonObject {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(valueFromJson) } };
  return { structValue: structFromJson(v as JsonObject) };
}

function structFromJson(o: JsonObject): JsonObject {
  const fields: JsonObject = {};
  for (const [k, v] of Object.entries(o)) fields[k] = valueFromJson(v);
  return { fields };
}

function own(o: JsonObject, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined && o[k] !== null;
}

function valueToJson(v: JsonObject | undefined): unknown {
  if (!v) return null;
  if (own(v, 'structValue')) return structToJson('.google.protobuf.Struct', v.structValue as JsonObject);
  if (own(v, 'listValue')) return structToJson('.google.protobuf.ListValue', v.listValue as JsonObject);
  if (own(v, 'numberValue')) return v.numberValue;
  if (own(v, 'stringValue')) return v.stringValue;
  if (own(v, 'boolValue')) return v.boolValue;
  return null;
}

function structToJson(fullName: string, m: JsonObject): unknown {
  if (fullName === '.google.protobuf.Struct') {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(own(m, 'fields') ? (m.fields as JsonObject) : {})) out[k] = valueToJson(v as JsonObject);
    return out;
  }
  if (fullName === '.google.protobuf.ListValue') {
    return (own(m, 'values') ? (m.values as JsonObject[]) : []).map(valueToJson);
  }
  return valueToJson(m);
}

let shared: EnvoyTypes | undefined;

/** Where `@grpc/grpc-js-xds` keeps the API protos; throws a clear error when it is not installed. */
export function envoyProtoDir(): string {
  let pkg: string;
  try {
    pkg = require.resolve(`${XDS_PACKAGE}/package.json`);
  } catch {
    throw new Error(`typed JSON needs the Envoy API protos from ${XDS_PACKAGE}; run npm install`);
  }
  return path.join(path.dirname(pkg), 'deps');
}

/** The process-wide registry, created on first use. */
export function envoyTypes(): EnvoyTypes {
  return (shared ??= new EnvoyTypes(envoyProtoDir()));
}

/** True once something asked for the registry (it is never created otherwise). */
export function envoyTypesLoaded(): boolean {
  return shared !== undefined;
}
