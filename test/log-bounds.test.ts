/**
 * Warnings bounded by time, not by input: a real relay with a pino logger
 * writing into memory, driven by clients that cause the same warning over and
 * over. The warn lines stay a handful; every occurrence is still at debug, in
 * the summaries' counts, and in the metrics.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { withRelay } from './support/relay-fixture';
import { LISTENER, xdstp } from './support/names';
import { metricValue, parsePrometheus, pollUntil } from './support/admin';
import { sleep } from './support/wait';
import { validateOptions } from '../src/config';
import { BUDGET_LINES_PER_INTERVAL } from '../src/log-limit';

const T = { timeout: 60_000 };
const WARN = 40;
const DEBUG = 20;
const INTERVAL_MS = 500;

interface Line {
  level: number;
  msg: string;
  suppressed?: number;
  key?: string;
  [k: string]: unknown;
}

/** A debug-level pino logger whose JSON lines land in `lines`. */
function memoryLogger(): { logger: pino.Logger; lines: Line[] } {
  const lines: Line[] = [];
  let partial = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      partial += chunk.toString();
      const parts = partial.split('\n');
      partial = parts.pop()!;
      for (const p of parts) if (p) lines.push(JSON.parse(p) as Line);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

const warnLines = (lines: Line[], msg: RegExp): Line[] => lines.filter((l) => l.level === WARN && msg.test(l.msg));
const debugLines = (lines: Line[], msg: RegExp): Line[] => lines.filter((l) => l.level === DEBUG && msg.test(l.msg));
/** Occurrences a set of warn lines stands for: each first line is one, each summary its count. */
const represented = (ls: Line[]): number => ls.reduce((n, l) => n + (l.suppressed ?? 1), 0);

async function scrape(env: { relay: { metrics: { registry: { metrics(): Promise<string> } } } }): Promise<ReturnType<typeof parsePrometheus>> {
  return parsePrometheus(await env.relay.metrics.registry.metrics());
}

test('10,000 refused names and 1,000 NACKs from one client make a handful of warn lines, and the metrics count every one', T, async (t) => {
  const { logger, lines } = memoryLogger();
  await withRelay({ logger, config: { logRepeatIntervalMs: INTERVAL_MS } }, async (env) => {
    const started = Date.now();
    const name = xdstp('a', LISTENER, 'bounded/ok');
    env.origin.setResource(LISTENER, name, 'x', 'v1');
    const c = env.client({ autoAck: false });
    c.subscribe(LISTENER, [name]);
    await c.waitForVersion(LISTENER, name, 'v1');
    const nonce = c.responses.at(-1)!.nonce!;
    // An authority the relay does not serve: every name is refused.
    for (let batch = 0; batch < 10; batch++) {
      c.subscribe(LISTENER, Array.from({ length: 1000 }, (_, i) => xdstp('nowhere', LISTENER, `refused/${batch}/${i}`)));
    }
    for (let i = 0; i < 1000; i++) c.nack(LISTENER, nonce, `bad listener #${i}`);
    await pollUntil(async () => {
      const m = await scrape(env);
      return metricValue(m, 'xdstp_relay_rejected_subscriptions_total') === 10_000 && metricValue(m, 'xdstp_relay_nacks_total') === 1000;
    }, 'the relay to count every refusal and NACK');
    // Let a summary interval pass, then close the stream (its pending counts are written then).
    await sleep(INTERVAL_MS * 1.5);
    c.close();
    await pollUntil(async () => lines.some((l) => l.msg === 'client stream closed'), 'the stream to close');
    const elapsedIntervals = Math.ceil((Date.now() - started) / INTERVAL_MS);

    const refused = warnLines(lines, /^subscription refused/);
    const nacks = warnLines(lines, /^client NACK/);
    // Per reason: the first line, at most one summary per interval, one more at close.
    const bound = 1 + elapsedIntervals + 1;
    assert.ok(refused.length >= 1 && refused.length <= bound, `${refused.length} refusal warn lines (bound ${bound})`);
    assert.ok(nacks.length >= 1 && nacks.length <= bound, `${nacks.length} NACK warn lines (bound ${bound})`);
    const allWarn = lines.filter((l) => l.level >= WARN);
    t.diagnostic(`warn lines: ${refused.length} for 10,000 refusals, ${nacks.length} for 1,000 NACKs, ${allWarn.length} in all (${elapsedIntervals} intervals of ${INTERVAL_MS} ms)`);
    assert.ok(allWarn.length <= 2 * bound, `${allWarn.length} warn lines in all:\n${allWarn.map((l) => l.msg).join('\n')}`);
    // Nothing lost: the warn lines account for every occurrence, and each is at debug.
    assert.equal(represented(refused), 10_000);
    assert.equal(represented(nacks), 1000);
    assert.equal(debugLines(lines, /^subscription refused/).length, 9_999);
    assert.equal(debugLines(lines, /^client NACK/).length, 999);
    const summary = refused.find((l) => l.suppressed !== undefined);
    assert.ok(summary, 'a summary line');
    assert.match(String((summary.sample as { name?: string }).name), /^xdstp:\/\/nowhere\//, 'the summary carries a sample');

    const m = await scrape(env);
    assert.equal(metricValue(m, 'xdstp_relay_rejected_subscriptions_total', { reason: 'unknown_authority' }), 10_000);
    assert.equal(metricValue(m, 'xdstp_relay_nacks_total'), 1000);
  });
});

test('a warning repeated on a stream is summarized at most once per interval while it goes on', T, async () => {
  const { logger, lines } = memoryLogger();
  await withRelay({ logger, config: { logRepeatIntervalMs: INTERVAL_MS } }, async (env) => {
    const name = xdstp('a', LISTENER, 'bounded/steady');
    env.origin.setResource(LISTENER, name, 'x', 'v1');
    const c = env.client({ autoAck: false });
    c.subscribe(LISTENER, [name]);
    await c.waitForVersion(LISTENER, name, 'v1');
    const nonce = c.responses.at(-1)!.nonce!;
    const started = Date.now();
    // A steady trickle of NACKs for about five intervals.
    let sent = 0;
    while (Date.now() - started < INTERVAL_MS * 5) {
      c.nack(LISTENER, nonce, `again #${sent++}`);
      await sleep(10);
    }
    await pollUntil(async () => metricValue(await scrape(env), 'xdstp_relay_nacks_total') === sent, 'every NACK counted');
    await sleep(INTERVAL_MS * 1.2);
    const summaries = warnLines(lines, /^client NACK/).filter((l) => l.suppressed !== undefined);
    assert.ok(summaries.length >= 3, `summaries keep coming while the NACKs do (${summaries.length})`);
    assert.ok(summaries.length <= 7, `at most one per interval (${summaries.length} in ~6 intervals)`);
    const times = summaries.map((l) => l.time as number);
    for (let i = 1; i < times.length; i++) assert.ok(times[i]! - times[i - 1]! >= INTERVAL_MS - 20, `summaries ${times[i]! - times[i - 1]!} ms apart`);
    assert.equal(represented(warnLines(lines, /^client NACK/)), sent, 'the open stream has no count left pending');
  });
});

test('200 streams ended for undecodable requests make a handful of "ending client stream" warn lines', T, async () => {
  const { logger, lines } = memoryLogger();
  await withRelay({ logger, config: { logRepeatIntervalMs: INTERVAL_MS } }, async (env) => {
    const clients = Array.from({ length: 200 }, () => env.client());
    for (const c of clients) c.sendRaw(Buffer.from([0x1a, 0xff, 0x01, 0x61]));
    await Promise.all(clients.map((c) => c.waitForEnd(20_000)));
    await sleep(INTERVAL_MS * 1.5);
    const ends = warnLines(lines, /^ending client stream/);
    assert.ok(ends.length >= 2 && ends.length <= 6, `${ends.length} warn lines for 200 stream endings`);
    assert.equal(represented(ends), 200);
    assert.equal(debugLines(lines, /^ending client stream/).length, 199);
    const m = await scrape(env);
    assert.equal(metricValue(m, 'xdstp_relay_bad_requests_total'), 200);
  });
});

test('150 streams each refused once make at most the relay-wide budget of warn lines, the rest summed in one', T, async () => {
  const { logger, lines } = memoryLogger();
  const STREAMS = 150;
  // One interval for the whole test: every stream's first warning falls in it.
  await withRelay({ logger, config: { logRepeatIntervalMs: 60_000 } }, async (env) => {
    const clients = Array.from({ length: STREAMS }, () => env.client());
    clients.forEach((c, i) => c.subscribe(LISTENER, [xdstp('nowhere', LISTENER, `stream/${i}`)]));
    await pollUntil(async () => metricValue(await scrape(env), 'xdstp_relay_rejected_subscriptions_total') === STREAMS, 'every refusal counted');
    // Each stream warns once in full (no summary of its own: nothing repeated on it).
    await Promise.all(clients.map((c) => c.waitFor(() => c.responses.length > 0, 'the refusal')));
  });
  // The relay stopped: what the budget held back is written now.
  const refused = warnLines(lines, /^subscription refused/);
  assert.equal(refused.filter((l) => l.suppressed === undefined).length, BUDGET_LINES_PER_INTERVAL, 'the first streams keep their own lines');
  const summaries = refused.filter((l) => l.suppressed !== undefined);
  assert.equal(summaries.length, 1, 'one summary for the rest');
  assert.match(summaries[0]!.msg, /many streams/);
  assert.equal(represented(refused), STREAMS, 'the lines account for every stream');
  assert.equal(debugLines(lines, /^subscription refused/).length, STREAMS - BUDGET_LINES_PER_INTERVAL, 'the rest are at debug');
});

test('--log-repeat-interval defaults to 10 s and refuses less than 100 ms', () => {
  const base = { authority: ['a=grpc://127.0.0.1:1'] };
  assert.equal(validateOptions(base, { nodeId: 'n' }).config?.logRepeatIntervalMs, 10_000);
  assert.equal(validateOptions({ ...base, logRepeatInterval: 250 }, { nodeId: 'n' }).config?.logRepeatIntervalMs, 250);
  const problems = validateOptions({ ...base, logRepeatInterval: 50 }, { nodeId: 'n' }).problems.map((p) => p.message);
  assert.deepEqual(problems, ['log-repeat-interval: expected at least 100 ms, got 50']);
});
