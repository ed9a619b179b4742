/**
 * The proto3 JSON mapping of single values: scalars, 64-bit integers,
 * durations, the Struct / Value family, and ResourceLocator as its xdstp://
 * URL. The message walk that uses them is envoy-types.ts.
 */
import * as protobuf from 'protobufjs';
import { XdstpNameError, formatName, parseUrl, type XdstpName } from '../xdstp';

/** A typed-JSON problem, with the JSON path where it was found. */
export class TypedJsonError extends Error {
  constructor(
    readonly where: string,
    readonly reason: string,
  ) {
    super(where ? `${where}: ${reason}` : reason);
  }
}

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);
}

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** proto3 JSON name of a field: lowerCamelCase of the proto name. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

export function camelToSnake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The message name of a type URL (`type.googleapis.com/a.b.C` → `a.b.C`). */
export function typeNameOf(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
}

const INT32 = new Set(['int32', 'sint32', 'sfixed32', 'uint32', 'fixed32']);
const INT64 = new Set(['int64', 'sint64', 'sfixed64', 'uint64', 'fixed64']);
const UNSIGNED = new Set(['uint32', 'fixed32', 'uint64', 'fixed64']);
export const WRAPPERS = new Set([
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
export const SPECIAL_JSON = new Set([
  ...WRAPPERS,
  '.google.protobuf.Duration',
  '.google.protobuf.Timestamp',
  '.google.protobuf.Struct',
  '.google.protobuf.Value',
  '.google.protobuf.ListValue',
  '.google.protobuf.FieldMask',
]);

/** Written and printed as its xdstp:// URL (what list-collection `locator` entries hold). */
export const RESOURCE_LOCATOR = '.xds.core.v3.ResourceLocator';

const DURATION = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/;
const BASE64 = /^[A-Za-z0-9+/\-_]*={0,2}$/;

export function parseDuration(v: unknown, where: string): { seconds: number; nanos: number } {
  const m = typeof v === 'string' ? DURATION.exec(v.trim()) : null;
  if (!m) throw new TypedJsonError(where, `expected a duration like "5s" or "0.250s", got ${describe(v)}`);
  const sign = m[1] ? -1 : 1;
  const nanos = m[3] ? Number(m[3].padEnd(9, '0')) : 0;
  return { seconds: sign * Number(m[2]), nanos: sign * nanos };
}

export function formatDuration(seconds: number, nanos: number): string {
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

export function longNumber(v: unknown): number {
  return Number(longString(v));
}

/** `xdstp://…` URL → xds.core.v3.ResourceLocator (scheme XDSTP). */
export function locatorFromUrl(url: string, where: string): JsonObject {
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
export function locatorToUrl(m: JsonObject): string | undefined {
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

export function scalarFromJson(fieldType: string, value: unknown, where: string): unknown {
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

export function scalarToJson(field: protobuf.Field, v: unknown): unknown {
  if (INT64.has(field.type)) return longString(v);
  if (field.type === 'bytes') return Buffer.from(v as Uint8Array).toString('base64');
  if ((field.type === 'double' || field.type === 'float') && typeof v === 'number' && !Number.isFinite(v)) return String(v);
  return v;
}

/** google.protobuf.Value as protobufjs bundles it (its field names are camelCase there). */
export function valueFromJson(v: unknown): JsonObject {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(valueFromJson) } };
  return { structValue: structFromJson(v as JsonObject) };
}

export function structFromJson(o: JsonObject): JsonObject {
  const fields: JsonObject = {};
  // Like JSON itself, a field that is undefined is left out.
  for (const [k, v] of Object.entries(o)) if (v !== undefined) fields[k] = valueFromJson(v);
  return { fields };
}

function own(o: JsonObject, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined && o[k] !== null;
}

/** A decoded google.protobuf.Value back to plain JSON (a Value with no kind set is null). */
export function valueToJson(v: JsonObject | undefined): unknown {
  if (!v) return null;
  if (own(v, 'structValue')) return structToJson('.google.protobuf.Struct', v.structValue as JsonObject);
  if (own(v, 'listValue')) return structToJson('.google.protobuf.ListValue', v.listValue as JsonObject);
  if (own(v, 'numberValue')) return v.numberValue;
  if (own(v, 'stringValue')) return v.stringValue;
  if (own(v, 'boolValue')) return v.boolValue;
  return null;
}

export function structToJson(fullName: string, m: JsonObject): unknown {
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
