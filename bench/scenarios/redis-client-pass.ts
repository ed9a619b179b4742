/**
 * The Redis client's own pass, run in a process of its own so that it leaves
 * the coordinator's memory as it found it (a read of 100,000 records makes the
 * next ones in the same process cheaper, and the warm loads are timed there):
 * ioredis, the client the store is built on, MGETs the records of every glob
 * stored under a prefix in pages and with pages in flight as the warm load
 * does, in the order the warm load asks for them, and drops each reply. The
 * keys are listed first (not timed).
 *
 *   node redis-client-pass.js <redis url> <key prefix> <passes>
 *
 * Prints one JSON line: per pass, wall seconds, this process's CPU µs per
 * record, its minor page faults, and redis-server's CPU µs per record.
 */
import Redis from 'ioredis';
import { RedisKeyLayout, parseEntry } from '../../src/cache/redis-keys';
import { WARM_FETCHES_IN_FLIGHT, WarmPageSize } from '../../src/cache/redis-warm-load';
import { costOf } from '../lib/proc';
import { usedCpuSecs } from '../lib/redis-info';

export interface ClientPassRun {
  secs: number;
  cpuUs: number;
  faults: number;
  serverUs: number;
}

async function serverCpuSecs(client: Redis): Promise<number> {
  return usedCpuSecs(await client.info('cpu'));
}

/**
 * The record keys of every glob stored under `prefix`, in the order the warm
 * load asks for them: each glob's member set as Redis lists it (SMEMBERS), its
 * members' records under the set's hash tag. The order matters beside many
 * other keys: listed by SCAN, the keys would come in the order of Redis's own
 * hash table, whose lookups in that order cost Redis less than the warm
 * load's do.
 */
async function listKeys(client: Redis, prefix: string): Promise<string[]> {
  const layout = new RedisKeyLayout(prefix);
  const sets: string[] = [];
  let cursor = '0';
  do {
    const [next, page] = await client.scan(cursor, 'MATCH', `${prefix}m:*`, 'COUNT', 1000);
    cursor = next;
    sets.push(...page);
  } while (cursor !== '0');
  const keys: string[] = [];
  for (const set of sets) {
    // A member set's key is its index entry under the prefix (redis-keys.ts), which names its hash tag.
    const entry = parseEntry(set.slice(prefix.length));
    if (entry?.kind !== 'm') continue;
    for (const member of await client.smembers(set)) keys.push(layout.resource(member, entry.tag));
  }
  return keys;
}

/** One pass, its pages sized as the warm load sizes them (by the records read so far): resolves how many of `keys` had a value. */
async function pass(client: Redis, keys: string[]): Promise<number> {
  let read = 0;
  const size = new WarmPageSize(undefined);
  const inFlight: Array<Promise<Array<Buffer | null>>> = [];
  const take = (values: Array<Buffer | null>): void => {
    let pageRead = 0;
    let bytes = 0;
    for (const v of values) {
      if (v === null) continue;
      pageRead++;
      bytes += v.length;
    }
    read += pageRead;
    size.observe(pageRead, bytes);
  };
  for (let i = 0; i < keys.length; ) {
    const records = size.records;
    inFlight.push(client.mgetBuffer(keys.slice(i, i + records)));
    i += records;
    if (inFlight.length >= WARM_FETCHES_IN_FLIGHT) take(await inFlight.shift()!);
  }
  while (inFlight.length > 0) take(await inFlight.shift()!);
  return read;
}

async function main(): Promise<void> {
  const [url, prefix, passes] = process.argv.slice(2);
  if (!url || !prefix || !passes) throw new Error('usage: redis-client-pass <redis url> <key prefix> <passes>');
  const client = new Redis(url);
  try {
    const keys = await listKeys(client, prefix);
    const runs: ClientPassRun[] = [];
    for (let k = 0; k < Number(passes); k++) {
      const server0 = await serverCpuSecs(client);
      const cost = await costOf(() => pass(client, keys));
      const serverUs = ((await serverCpuSecs(client)) - server0) * 1e6;
      const read = cost.result;
      if (read !== keys.length) throw new Error(`read ${read} of ${keys.length}`);
      runs.push({ secs: cost.secs, cpuUs: cost.cpuUs / read, faults: cost.faults, serverUs: serverUs / read });
    }
    process.stdout.write(`${JSON.stringify({ records: keys.length, runs })}\n`);
  } finally {
    client.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
