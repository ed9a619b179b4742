/**
 * The log's bounds without a relay: a stream's WarnLimiter (the first line per
 * reason, then summaries) writing through the relay-wide WarnBudget (at most
 * so many lines per reason and interval, the rest summed into one).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Writable } from 'node:stream';
import { WarnBudget, WarnLimiter } from '../src/log-limit';

interface Line {
  level: number;
  msg: string;
  suppressed?: number;
  key?: string;
  sample?: Record<string, unknown>;
}

function memoryLogger(): { logger: pino.Logger; lines: Line[] } {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));
const warns = (lines: Line[]): Line[] => lines.filter((l) => l.level === 40);

test('the budget lets the first lines of an interval through and sums the rest into one line that counts what they stood for', async () => {
  const { logger, lines } = memoryLogger();
  const budget = new WarnBudget(logger, 60_000, 3);
  for (let i = 0; i < 5; i++) budget.write('nack', { client: i }, 'client NACK', 1, true);
  // A stream's summary standing for 7 occurrences (already at debug on the stream's side).
  budget.write('nack', { client: 9, suppressed: 7 }, 'client NACK (repeated; the rest at debug)', 7, false, 'client NACK');
  budget.close();
  await settle();
  const w = warns(lines);
  assert.deepEqual(w.slice(0, 3).map((l) => l.msg), ['client NACK', 'client NACK', 'client NACK']);
  assert.equal(w.length, 4);
  assert.equal(w[3]!.msg, 'client NACK (many streams; the rest at debug)');
  assert.equal(w[3]!.suppressed, 2 + 7, 'two first lines held back and a summary of seven');
  assert.equal(w[3]!.sample?.client, 3, 'the first line held back is the sample');
  assert.equal(lines.filter((l) => l.level === 20).length, 2, 'the held-back first lines at debug; the summary was at debug already');
});

test('a new interval lets lines through again', async () => {
  const { logger, lines } = memoryLogger();
  const budget = new WarnBudget(logger, 50, 1);
  budget.write('r', {}, 'm', 1, true);
  budget.write('r', {}, 'm', 1, true);
  await new Promise((r) => setTimeout(r, 120));
  budget.write('r', {}, 'm', 1, true);
  budget.close();
  await settle();
  assert.deepEqual(warns(lines).map((l) => `${l.msg}${l.suppressed ? ` ×${l.suppressed}` : ''}`), ['m', 'm (many streams; the rest at debug) ×1', 'm']);
});

test('streams writing through one budget: every occurrence is accounted for in the warn lines', async () => {
  const { logger, lines } = memoryLogger();
  const budget = new WarnBudget(logger, 60_000, 4);
  const streams = Array.from({ length: 10 }, (_, i) => new WarnLimiter(logger, 60_000, { client: i }, budget));
  for (const s of streams) for (let k = 0; k < 3; k++) s.warn('refused: malformed', { name: `n${k}` }, 'subscription refused');
  for (const s of streams) s.close();
  budget.close();
  await settle();
  const w = warns(lines);
  assert.ok(w.length <= 4 + 1, `${w.length} warn lines for 10 streams`);
  assert.equal(w.reduce((n, l) => n + (l.suppressed ?? 1), 0), 30, 'the lines stand for all 30 occurrences');
});
