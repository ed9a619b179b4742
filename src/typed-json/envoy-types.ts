/**
 * Envoy's API types as proto3 JSON, for the two places that need to
 * understand payloads: the file-backed origin (typed JSON → encoded `Any`)
 * and the debug views and client (encoded `Any` → JSON). The relay's hot
 * path never comes here. The types come from registry.ts, loaded on demand.
 *
 * JSON follows the proto3 JSON mapping: field names in proto (`snake_case`) or
 * JSON (`lowerCamelCase`) spelling, enums by name or number, 64-bit integers as
 * numbers or decimal strings, bytes as base64, and the well-known types in
 * their special forms (`Any` with `"@type"`, `Duration` as `"5s"`, `Timestamp`
 * as RFC 3339, wrappers as bare values, `Struct` / `Value` as plain JSON,
 * `FieldMask` as `"a.b,c"`). Unknown fields are errors, so typos are caught.
 */
import * as protobuf from 'protobufjs';
import {
  RESOURCE_LOCATOR,
  SPECIAL_JSON,
  TypedJsonError,
  WRAPPERS,
  camelToSnake,
  describe,
  formatDuration,
  isObject,
  jsonName,
  locatorFromUrl,
  locatorToUrl,
  longNumber,
  parseDuration,
  scalarFromJson,
  scalarToJson,
  structFromJson,
  structToJson,
  typeNameOf,
  valueFromJson,
  type JsonObject,
} from './json-values';
import { EnvoyTypeRegistry, XDS_PACKAGE, envoyProtoDir } from './registry';

export { TypedJsonError } from './json-values';

export interface EncodedAny {
  typeUrl: string;
  value: Buffer;
}

/** The Envoy type registry, with proto3-JSON conversion both ways. */
export class EnvoyTypes extends EnvoyTypeRegistry {
  private readonly fieldIndex = new Map<protobuf.Type, Map<string, protobuf.Field>>();

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

let shared: EnvoyTypes | undefined;

/** The process-wide registry, created on first use. */
export function envoyTypes(): EnvoyTypes {
  return (shared ??= new EnvoyTypes(envoyProtoDir()));
}

/** True once something asked for the registry (it is never created otherwise). */
export function envoyTypesLoaded(): boolean {
  return shared !== undefined;
}
