/**
 * CSDS node matchers (src/downstream/node-match.ts): which nodes a request's
 * node_matchers select, and which matchers are refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNodeMatchers, MAX_REGEX_LENGTH, NodeMatcherError } from '../src/downstream/node-match';
import type { NodeMatcherMsg, ValueMatcherMsg } from '../src/proto/csds-messages';
import type { Node } from '../src/proto/messages';

/** A node as the relay holds it: decoded by protobufjs, Struct values in camelCase. */
function node(id: string, metadata?: Record<string, unknown>): Node {
  return metadata ? { id, metadata: { fields: metadata } } : { id };
}

const FLEET: Node[] = [
  node('edge-1', { region: { stringValue: 'eu-west' }, canary: { boolValue: true }, weight: { numberValue: 5 } }),
  node('edge-2', { region: { stringValue: 'us-east' }, canary: { boolValue: false }, weight: { numberValue: 10 } }),
  node('Core-1', {
    region: { stringValue: 'eu-west' },
    owner: { nullValue: 0 },
    labels: { structValue: { fields: { team: { stringValue: 'payments' } } } },
    zones: { listValue: { values: [{ stringValue: 'a' }, { stringValue: 'b' }] } },
  }),
  node('xedge-10'),
];

function selected(matchers: NodeMatcherMsg[] | undefined, nodes: Array<Node | undefined> = FLEET): string[] {
  const match = compileNodeMatchers(matchers);
  return nodes.filter((n) => match(n)).map((n) => n?.id ?? '(no node)');
}

test('no node matcher selects every client, including one that sent no node', () => {
  assert.deepEqual(selected(undefined, [...FLEET, undefined]), ['edge-1', 'edge-2', 'Core-1', 'xedge-10', '(no node)']);
  assert.deepEqual(selected([], FLEET), ['edge-1', 'edge-2', 'Core-1', 'xedge-10']);
});

test('an exact node id selects only that node, case-sensitively unless ignore_case', () => {
  assert.deepEqual(selected([{ node_id: { exact: 'core-1' } }]), []);
  assert.deepEqual(selected([{ node_id: { exact: 'Core-1' } }]), ['Core-1']);
  assert.deepEqual(selected([{ node_id: { exact: 'core-1', ignore_case: true } }]), ['Core-1']);
});

test('prefix, suffix and contains select by node id', () => {
  assert.deepEqual(selected([{ node_id: { prefix: 'edge-' } }]), ['edge-1', 'edge-2']);
  assert.deepEqual(selected([{ node_id: { suffix: '-1' } }]), ['edge-1', 'Core-1']);
  assert.deepEqual(selected([{ node_id: { contains: 'edge' } }]), ['edge-1', 'edge-2', 'xedge-10']);
  assert.deepEqual(selected([{ node_id: { prefix: 'CORE', ignore_case: true } }]), ['Core-1']);
});

test('safe_regex must match the whole node id', () => {
  assert.deepEqual(selected([{ node_id: { safe_regex: { regex: 'edge-[0-9]+' } } }]), ['edge-1', 'edge-2']);
  assert.deepEqual(selected([{ node_id: { safe_regex: { regex: '.*edge-1.*' } } }]), ['edge-1', 'xedge-10']);
});

test('several node matchers select the union of what each selects', () => {
  assert.deepEqual(selected([{ node_id: { exact: 'edge-2' } }, { node_id: { prefix: 'Core' } }]), ['edge-2', 'Core-1']);
});

test('within one node matcher the id and every metadata matcher must all match', () => {
  const euEdges: NodeMatcherMsg = {
    node_id: { prefix: 'edge-' },
    node_metadatas: [{ path: [{ key: 'region' }], value: { string_match: { prefix: 'eu-' } } }],
  };
  assert.deepEqual(selected([euEdges]), ['edge-1']);
  const euCanaries: NodeMatcherMsg = {
    node_metadatas: [
      { path: [{ key: 'region' }], value: { string_match: { exact: 'eu-west' } } },
      { path: [{ key: 'canary' }], value: { bool_match: true } },
    ],
  };
  assert.deepEqual(selected([euCanaries]), ['edge-1']);
});

test('a metadata path walks into nested structs, and a missing key matches nothing', () => {
  const team = (t: string): NodeMatcherMsg => ({
    node_metadatas: [{ path: [{ key: 'labels' }, { key: 'team' }], value: { string_match: { exact: t } } }],
  });
  assert.deepEqual(selected([team('payments')]), ['Core-1']);
  assert.deepEqual(selected([team('search')]), []);
  assert.deepEqual(selected([{ node_metadatas: [{ path: [{ key: 'region' }, { key: 'deeper' }], value: { present_match: true } }] }]), []);
});

test('number, null, present, list and or value matchers select by metadata value', () => {
  const md = (key: string, value: ValueMatcherMsg): NodeMatcherMsg[] => [{ node_metadatas: [{ path: [{ key }], value }] }];
  assert.deepEqual(selected(md('weight', { double_match: { exact: 10 } })), ['edge-2']);
  assert.deepEqual(selected(md('weight', { double_match: { range: { start: 5, end: 10 } } })), ['edge-1']);
  assert.deepEqual(selected(md('owner', { null_match: {} })), ['Core-1']);
  assert.deepEqual(selected(md('canary', { present_match: true })), ['edge-1', 'edge-2']);
  assert.deepEqual(selected(md('canary', { present_match: false })), []);
  assert.deepEqual(selected(md('zones', { list_match: { one_of: { string_match: { exact: 'b' } } } })), ['Core-1']);
  assert.deepEqual(
    selected(md('region', { or_match: { value_matchers: [{ string_match: { exact: 'us-east' } }, { string_match: { suffix: 'west' } }] } })),
    ['edge-1', 'edge-2', 'Core-1'],
  );
  // A value of another kind never matches.
  assert.deepEqual(selected(md('region', { double_match: { exact: 1 } })), []);
});

test('a nested-quantifier regex answers at once on a hostile node id instead of backtracking', { timeout: 10_000 }, () => {
  // Exponential for a backtracking engine (2^60 paths); linear here.
  const match = compileNodeMatchers([{ node_id: { safe_regex: { regex: '(a+)+b' } } }]);
  assert.equal(match(node('a'.repeat(60) + 'c')), false);
  assert.equal(match(node('a'.repeat(60) + 'b')), true);
});

test('malformed matchers are refused with a message naming the field', () => {
  const refused = (m: NodeMatcherMsg, field: RegExp): void => {
    assert.throws(() => compileNodeMatchers([{ node_id: { exact: 'ok' } }, m]), (err: unknown) => {
      assert.ok(err instanceof NodeMatcherError, String(err));
      assert.match(err.message, field);
      return true;
    });
  };
  refused({ node_id: {} }, /^node_matchers\[1\]\.node_id: set one of/);
  refused({ node_id: { prefix: '' } }, /node_matchers\[1\]\.node_id\.prefix: must not be empty/);
  refused({ node_id: { safe_regex: { regex: '' } } }, /safe_regex\.regex: empty pattern/);
  refused({ node_id: { safe_regex: { regex: 'a'.repeat(MAX_REGEX_LENGTH + 1) } } }, /at most 1024/);
  refused({ node_id: { safe_regex: { regex: '(a)\\1' } } }, /linear time/);
  refused({ node_id: { safe_regex: { regex: '(?=a)a' } } }, /linear time/);
  refused({ node_id: { safe_regex: { regex: 'a[' } } }, /safe_regex\.regex "a\["/);
  refused({ node_metadatas: [{ path: [], value: { present_match: true } }] }, /node_metadatas\[0\]\.path: at least one key/);
  refused({ node_metadatas: [{ path: [{ key: 'x' }] }] }, /node_metadatas\[0\]\.value: required/);
  refused({ node_metadatas: [{ path: [{ key: 'x' }], value: {} }] }, /node_metadatas\[0\]\.value: set one of/);
});

test('an unbalanced regex cannot escape the full-match anchoring', () => {
  // Wrapped naively as ^(?:a)|(b)$ this would match any id starting with "a".
  assert.throws(() => compileNodeMatchers([{ node_id: { safe_regex: { regex: 'a)|(b' } } }]), NodeMatcherError);
});
