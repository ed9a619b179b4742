/**
 * Fair turns for clients' request work (src/downstream/request-scheduler.ts),
 * alone: a fake clock, work that records when it ran.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestScheduler, type ScheduledWork } from '../src/downstream/request-scheduler';

/** Work of `slices` slices, each taking `cost` ms on the fake clock; records its name per slice. */
function work(name: string, slices: number, cost: number, clock: { t: number }, log: string[]): ScheduledWork {
  let left = slices;
  return {
    runSlice(): boolean {
      clock.t += cost;
      log.push(name);
      return --left > 0;
    },
  };
}

test('waiting streams get one slice each per turn, in order', () => {
  const clock = { t: 0 };
  const log: string[] = [];
  const s = new RequestScheduler(100, () => clock.t);
  s.enqueue(work('big', 3, 1, clock, log));
  s.enqueue(work('small', 1, 1, clock, log));
  s.turn();
  assert.deepEqual(log, ['big', 'small'], 'the small request does not wait for the big one to finish');
  s.turn();
  s.turn();
  assert.deepEqual(log, ['big', 'small', 'big', 'big']);
  assert.equal(s.waiting, 0);
});

test('a turn yields once its time budget is spent; the rest waits for the next turn', () => {
  const clock = { t: 0 };
  const log: string[] = [];
  const s = new RequestScheduler(5, () => clock.t);
  for (const n of ['a', 'b', 'c', 'd']) s.enqueue(work(n, 1, 3, clock, log));
  s.turn();
  assert.deepEqual(log, ['a', 'b'], 'two slices of 3 ms spend a 5 ms budget');
  assert.equal(s.waiting, 2);
  s.turn();
  assert.deepEqual(log, ['a', 'b', 'c', 'd']);
});

test('queued work runs by itself on a later turn of the event loop', async () => {
  const log: string[] = [];
  const s = new RequestScheduler();
  s.enqueue(work('x', 2, 0, { t: 0 }, log));
  assert.deepEqual(log, [], 'nothing runs inside enqueue');
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(log, ['x', 'x']);
});
