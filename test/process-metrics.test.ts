/**
 * The process metrics whose cost grows with open connections (open
 * descriptors, active handles and resources) read what prom-client's stock
 * collectors read, under the same names, and a scrape asks the runtime for
 * each list once — the list of handle objects only to learn a kind of
 * handle it has not seen.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import * as client from 'prom-client';
import { collectProcessMetrics } from '../src/process-metrics';

const SERIES = /^(process_open_fds|nodejs_active_(handles|resources)(_total)?)(\{[^}]*\})? /;

/** The lines of the five series, sorted, with resources of the event loop's own bookkeeping left out. */
function series(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => SERIES.test(l))
    // Timers, immediates and promise hooks come and go between two scrapes; sockets and servers do not.
    .filter((l) => !/type="(Timeout|Immediate|FSReqCallback|PromiseHook)"|nodejs_active_resources_total/.test(l))
    .sort();
}

async function withSockets(n: number, body: () => Promise<void>): Promise<void> {
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => accepted.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const sockets = await Promise.all(
    Array.from({ length: n }, () => new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    })),
  );
  while (accepted.length < n) await new Promise((r) => setTimeout(r, 5));
  try {
    await body();
  } finally {
    for (const s of [...sockets, ...accepted]) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** prom-client's stock collectors, and ours, each in a registry of its own. */
function registries(): { stock: client.Registry; ours: client.Registry } {
  const stock = new client.Registry();
  client.collectDefaultMetrics({ register: stock });
  const ours = new client.Registry();
  collectProcessMetrics(ours);
  return { stock, ours };
}

test('open descriptors, active handles and active resources read the same as prom-client\'s own collectors', async () => {
  const { stock, ours } = registries();
  await withSockets(200, async () => {
    const expected = series(await stock.metrics());
    const got = series(await ours.metrics());
    assert.ok(expected.some((l) => /^nodejs_active_handles\{type="Socket"\} \d+/.test(l)), `stock series: ${expected.join('\n')}`);
    assert.ok(got.some((l) => l.startsWith('process_open_fds ')), 'process_open_fds present');
    assert.deepEqual(got, expected);
  });
});

/** Counts the runtime's list reads while `body` runs. */
async function countingReads(body: (calls: { handles: number; resources: number }) => Promise<void>): Promise<void> {
  const calls = { handles: 0, resources: 0 };
  const proc = process as unknown as { _getActiveHandles: () => unknown[]; getActiveResourcesInfo: () => string[] };
  const handles = proc._getActiveHandles;
  const resources = proc.getActiveResourcesInfo;
  proc._getActiveHandles = () => (calls.handles++, handles.call(process));
  proc.getActiveResourcesInfo = () => (calls.resources++, resources.call(process));
  try {
    await body(calls);
  } finally {
    proc._getActiveHandles = handles;
    proc.getActiveResourcesInfo = resources;
  }
}

test('after the first scrape, active handles are counted from the resource list alone, and still read as prom-client\'s', async () => {
  const { stock, ours } = registries();
  await withSockets(50, async () => {
    await countingReads(async (calls) => {
      await ours.metrics();
      assert.deepEqual(calls, { handles: 1, resources: 1 }, 'the first scrape learns what each handle class stands for');
      const got = series(await ours.metrics());
      assert.deepEqual(calls, { handles: 1, resources: 2 }, 'a later scrape reads the resource list only');
      const expected = series(await stock.metrics());
      assert.deepEqual(got, expected);
    });
  });
});

test('a kind of handle first opened after a scrape is read from the handle objects once, then counted like the others', async () => {
  const { stock, ours } = registries();
  await ours.metrics();
  const udp = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
  try {
    await countingReads(async (calls) => {
      const got = series(await ours.metrics());
      assert.equal(calls.handles, 1, 'a class not seen before is learned from the handle objects');
      assert.deepEqual(got, series(await stock.metrics()));
      calls.handles = 0;
      await ours.metrics();
      assert.equal(calls.handles, 0, 'then it is known');
    });
  } finally {
    await new Promise<void>((resolve) => udp.close(() => resolve()));
  }
});

test('servers of two kinds on one kind of handle keep the split read last until their number changes', async () => {
  const { stock, ours } = registries();
  const listen = async <S extends net.Server>(server: S): Promise<S> => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return server;
  };
  const servers: net.Server[] = [await listen(http2.createServer()), await listen(net.createServer())];
  try {
    await countingReads(async (calls) => {
      await ours.metrics();
      calls.handles = 0;
      const got = series(await ours.metrics());
      assert.equal(calls.handles, 0, 'the split of the servers is known');
      assert.deepEqual(got, series(await stock.metrics()));
      assert.ok(got.some((l) => l.startsWith('nodejs_active_handles{type="Http2Server"}')), got.join('\n'));
      servers.push(await listen(http2.createServer()));
      calls.handles = 0;
      const after = series(await ours.metrics());
      assert.equal(calls.handles, 1, 'one more server: the split is read again');
      assert.deepEqual(after, series(await stock.metrics()));
    });
  } finally {
    for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

test('one scrape lists the active handles and resources once each, not once per gauge', async () => {
  const ours = new client.Registry();
  collectProcessMetrics(ours);
  await countingReads(async (calls) => {
    const text = await ours.metrics();
    assert.match(text, /^nodejs_active_handles_total \d+$/m);
    assert.match(text, /^nodejs_active_resources_total \d+$/m);
    assert.ok(calls.handles <= 1 && calls.resources === 1, JSON.stringify(calls));
    await ours.metrics();
    assert.equal(calls.resources, 2, 'a second scrape reads afresh');
  });
});
