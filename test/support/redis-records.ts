/**
 * Reads what the relay stored in Redis, by hand from the documented layout
 * (src/cache/redis-keys.ts, src/cache/redis-record.ts), so tests check the
 * bytes in Redis without going through the store's own decoder.
 */
import type Redis from 'ioredis';
import { RedisKeyLayout } from '../../src/cache/redis-keys';
import { keyOf } from './names';

/** Version of the record stored for `name` under `prefix`, or undefined. */
export async function storedVersion(raw: Redis, prefix: string, name: string): Promise<string | undefined> {
  const record = await raw.getBuffer(new RedisKeyLayout(prefix).resource(keyOf(name)));
  if (!record || record.length < 5 || record[0] !== 1) return undefined;
  const len = record.readUInt32BE(1);
  return record.toString('utf8', 5, 5 + len);
}
