/**
 * CSDS `node_matchers` (envoy.type.matcher.v3.NodeMatcher) compiled into a
 * predicate over a client's Node. Pure: no relay state.
 *
 * Semantics: the matchers of a request are ORed; within one NodeMatcher the
 * node id matcher and every metadata matcher are ANDed; no matcher selects
 * every node. A client that sent no Node has the id '' and no metadata.
 *
 * `safe_regex` is a full match (like RE2's FullMatch) run by V8's linear-time
 * regex engine, so no pattern can make a request backtrack for long; patterns
 * that engine cannot run in linear time (backreferences, lookaround, huge
 * counted repetitions) are refused, as are patterns over MAX_REGEX_LENGTH.
 */
import * as v8 from 'node:v8';
import type { NodeMatcherMsg, StringMatcherMsg, StructMatcherMsg, ValueMatcherMsg } from '../proto/csds-messages';
import type { Node } from '../proto/messages';

/** A request's matcher is malformed; the caller answers INVALID_ARGUMENT with the message. */
export class NodeMatcherError extends Error {}

export const MAX_REGEX_LENGTH = 1024;
export const MAX_NODE_MATCHERS = 1000;
/** Nesting of list / or value matchers. */
const MAX_VALUE_DEPTH = 16;

export type NodePredicate = (node: Node | undefined) => boolean;
type StringPredicate = (s: string) => boolean;

let linearEngine: boolean | undefined;

/**
 * Turns on the `l` (linear) RegExp flag once. The V8 flag only makes that
 * flag letter available: regular expressions without it are unaffected.
 */
function linearEngineAvailable(): boolean {
  if (linearEngine === undefined) {
    try {
      v8.setFlagsFromString('--enable-experimental-regexp-engine');
      linearEngine = new RegExp('^a$', 'l').test('a');
    } catch {
      linearEngine = false;
    }
  }
  return linearEngine;
}

function compileRegex(pattern: string, where: string): RegExp {
  if (pattern === '') throw new NodeMatcherError(`${where}.safe_regex.regex: empty pattern`);
  if (pattern.length > MAX_REGEX_LENGTH) {
    throw new NodeMatcherError(`${where}.safe_regex.regex: ${pattern.length} characters, at most ${MAX_REGEX_LENGTH} allowed`);
  }
  if (!linearEngineAvailable()) {
    throw new NodeMatcherError(`${where}.safe_regex: not supported by this Node.js (no linear-time regex engine)`);
  }
  try {
    // Compiled alone first: a well-formed pattern is balanced, so wrapping it cannot change what it means.
    new RegExp(pattern, 'l');
    return new RegExp(`^(?:${pattern})$`, 'l');
  } catch (err) {
    throw new NodeMatcherError(`${where}.safe_regex.regex ${JSON.stringify(pattern)}: ${(err as Error).message}`);
  }
}

function nonEmpty(value: string, where: string): string {
  if (value === '') throw new NodeMatcherError(`${where}: must not be empty`);
  return value;
}

export function compileStringMatcher(m: StringMatcherMsg, where: string): StringPredicate {
  const fold = m.ignore_case === true;
  const norm = (s: string): string => (fold ? s.toLowerCase() : s);
  if (m.exact !== undefined) {
    const want = norm(m.exact);
    return (s) => norm(s) === want;
  }
  if (m.prefix !== undefined) {
    const want = norm(nonEmpty(m.prefix, `${where}.prefix`));
    return (s) => norm(s).startsWith(want);
  }
  if (m.suffix !== undefined) {
    const want = norm(nonEmpty(m.suffix, `${where}.suffix`));
    return (s) => norm(s).endsWith(want);
  }
  if (m.contains !== undefined) {
    const want = norm(nonEmpty(m.contains, `${where}.contains`));
    return (s) => norm(s).includes(want);
  }
  if (m.safe_regex !== undefined) {
    // As in Envoy, ignore_case does not apply to safe_regex.
    const re = compileRegex(m.safe_regex.regex ?? '', where);
    return (s) => re.test(s);
  }
  throw new NodeMatcherError(`${where}: set one of exact, prefix, suffix, contains, safe_regex`);
}

// --------------------------------------------------------------- metadata

/** A google.protobuf.Value as protobufjs decodes it (camelCase oneof members). */
interface PbValue {
  nullValue?: unknown;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: PbStruct;
  listValue?: { values?: PbValue[] };
}
interface PbStruct {
  fields?: Record<string, PbValue>;
}

type ValuePredicate = (v: PbValue | undefined) => boolean;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

function compileValueMatcher(m: ValueMatcherMsg, where: string, depth: number): ValuePredicate {
  if (depth > MAX_VALUE_DEPTH) throw new NodeMatcherError(`${where}: value matchers nested deeper than ${MAX_VALUE_DEPTH}`);
  if (m.null_match !== undefined) return (v) => v !== undefined && v.nullValue !== undefined;
  if (m.double_match !== undefined) {
    const d = m.double_match;
    if (d.exact !== undefined) {
      const exact = d.exact;
      return (v) => typeof v?.numberValue === 'number' && v.numberValue === exact;
    }
    if (d.range !== undefined) {
      const start = d.range.start ?? 0;
      const end = d.range.end ?? 0;
      return (v) => typeof v?.numberValue === 'number' && v.numberValue >= start && v.numberValue < end;
    }
    throw new NodeMatcherError(`${where}.double_match: set exact or range`);
  }
  if (m.string_match !== undefined) {
    const match = compileStringMatcher(m.string_match, `${where}.string_match`);
    return (v) => typeof v?.stringValue === 'string' && match(v.stringValue);
  }
  if (m.bool_match !== undefined) {
    const want = m.bool_match;
    return (v) => typeof v?.boolValue === 'boolean' && v.boolValue === want;
  }
  if (m.present_match !== undefined) {
    // Envoy's rule: `true` matches any value at the path, `false` matches nothing.
    const want = m.present_match;
    return (v) => want && v !== undefined && Object.keys(v).length > 0;
  }
  if (m.list_match !== undefined) {
    if (m.list_match.one_of === undefined) throw new NodeMatcherError(`${where}.list_match: set one_of`);
    const item = compileValueMatcher(m.list_match.one_of, `${where}.list_match.one_of`, depth + 1);
    return (v) => Array.isArray(v?.listValue?.values) && v.listValue.values.some((x) => item(x));
  }
  if (m.or_match !== undefined) {
    const list = m.or_match.value_matchers ?? [];
    if (list.length === 0) throw new NodeMatcherError(`${where}.or_match: no value_matchers`);
    const alternatives = list.map((x, i) => compileValueMatcher(x, `${where}.or_match.value_matchers[${i}]`, depth + 1));
    return (v) => alternatives.some((p) => p(v));
  }
  throw new NodeMatcherError(`${where}: set one of null_match, double_match, string_match, bool_match, present_match, list_match, or_match`);
}

function compileStructMatcher(m: StructMatcherMsg, where: string): (metadata: PbStruct | undefined) => boolean {
  const path = (m.path ?? []).map((seg, i) => nonEmpty(seg.key ?? '', `${where}.path[${i}].key`));
  if (path.length === 0) throw new NodeMatcherError(`${where}.path: at least one key is required`);
  if (m.value === undefined) throw new NodeMatcherError(`${where}.value: required`);
  const value = compileValueMatcher(m.value, `${where}.value`, 0);
  return (metadata) => {
    let struct: PbStruct | undefined = metadata;
    let found: PbValue | undefined;
    for (let i = 0; i < path.length; i++) {
      const fields = struct?.fields;
      found = isObject(fields) && Object.hasOwn(fields, path[i]) ? fields[path[i]] : undefined;
      if (found === undefined) return value(undefined);
      if (i < path.length - 1) struct = found.structValue;
    }
    return value(found);
  };
}

// ------------------------------------------------------------------- node

function compileNodeMatcher(m: NodeMatcherMsg, where: string): NodePredicate {
  const id = m.node_id !== undefined ? compileStringMatcher(m.node_id, `${where}.node_id`) : undefined;
  const metadata = (m.node_metadatas ?? []).map((s, i) => compileStructMatcher(s, `${where}.node_metadatas[${i}]`));
  return (node) => {
    if (id && !id(node?.id ?? '')) return false;
    const md = node?.metadata as PbStruct | undefined;
    return metadata.every((p) => p(md));
  };
}

/** Compiles a request's matchers once; throws NodeMatcherError on a malformed one. */
export function compileNodeMatchers(matchers: readonly NodeMatcherMsg[] | undefined): NodePredicate {
  const list = matchers ?? [];
  if (list.length === 0) return () => true;
  if (list.length > MAX_NODE_MATCHERS) throw new NodeMatcherError(`node_matchers: ${list.length} given, at most ${MAX_NODE_MATCHERS} allowed`);
  const compiled = list.map((m, i) => compileNodeMatcher(m, `node_matchers[${i}]`));
  return (node) => compiled.some((p) => p(node));
}
