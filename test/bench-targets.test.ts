import { test } from 'node:test';
import assert from 'node:assert/strict';
import { atLeast, atMost } from '../bench/lib/targets';

test('a speed just under its target is shown with the digits that tell it apart', () => {
  const check = atLeast('fan-out speed', 0.9499, 0.95);
  assert.equal(check.verdict, 'missed');
  assert.equal(check.value, '0.9499');
});

test('a cost just over its target is shown with the digits that tell it apart', () => {
  const check = atMost('idle RSS per client', 1.1004, 1.1, 2, '×');
  assert.equal(check.verdict, 'missed');
  assert.equal(check.value, '1.1004×');
});

test('a figure clear of its target keeps the usual digits', () => {
  assert.equal(atLeast('fan-out speed', 1.0123, 0.95).value, '1.01');
  assert.equal(atMost('GET /metrics', 11.44, 15, 1, ' ms').value, '11.4 ms');
  assert.equal(atLeast('fan-out speed', 0.95, 0.95).verdict, 'met');
});
