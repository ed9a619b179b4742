/**
 * What one client may cost the relay: the limit flags, their defaults, and
 * their validation. Connection-level limits are enforced by grpc-js options
 * and the ConnectionGuard; per-stream limits by the downstream stream code.
 */
import type { ConnectionLimits } from './connection-guard';

export interface StreamLimits {
  /** Names and globs one stream may hold subscribed across its type URLs. */
  maxSubscriptionsPerStream: number;
  /** Longest resource name (in UTF-8 bytes) a client may subscribe to. */
  maxNameLength: number;
  /** Subscription changes (each subscribed or unsubscribed name) per second per stream, refilled continuously ... */
  subscriptionRate: number;
  /** ... up to this many at once (the size of a client's first subscription). */
  subscriptionBurst: number;
}

export interface Limits extends ConnectionLimits, StreamLimits {
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS per connection. */
  maxConcurrentStreams: number;
  /** A connection without any stream for this long is closed (GOAWAY); 0 = never. */
  maxConnectionIdleMs: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = {
  maxConcurrentStreams: 100,
  maxConnections: 20_000,
  maxConnectionsPerPeer: 500,
  minPingIntervalMs: 10_000,
  maxConnectionIdleMs: 120_000,
  maxSubscriptionsPerStream: 100_000,
  maxNameLength: 4096,
  subscriptionRate: 1000,
  subscriptionBurst: 100_000,
};

/** Flag name, the Limits field it sets, whether 0 is allowed (meaning "off"). */
export const LIMIT_FLAGS: ReadonlyArray<{ flag: string; key: keyof Limits; zeroMeansOff: boolean; describe: string }> = [
  { flag: 'max-concurrent-streams', key: 'maxConcurrentStreams', zeroMeansOff: false, describe: 'HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS per client connection' },
  { flag: 'max-connections', key: 'maxConnections', zeroMeansOff: true, describe: 'open client connections at most; new ones are refused, open ones kept (0 = no limit)' },
  { flag: 'max-connections-per-peer', key: 'maxConnectionsPerPeer', zeroMeansOff: true, describe: 'open client connections per peer IP address at most (0 = no limit; use 0 behind a proxy that hides client addresses)' },
  { flag: 'min-ping-interval', key: 'minPingIntervalMs', zeroMeansOff: true, describe: 'ms a client must leave between HTTP/2 PINGs; a third too-early PING closes the connection (0 = not enforced)' },
  { flag: 'max-connection-idle', key: 'maxConnectionIdleMs', zeroMeansOff: true, describe: 'ms a client connection may stay open without any stream (0 = forever)' },
  { flag: 'max-subscriptions-per-stream', key: 'maxSubscriptionsPerStream', zeroMeansOff: false, describe: 'names and globs one stream may hold subscribed' },
  { flag: 'max-name-length', key: 'maxNameLength', zeroMeansOff: false, describe: 'longest resource name a client may subscribe to, in bytes' },
  { flag: 'subscription-rate', key: 'subscriptionRate', zeroMeansOff: false, describe: 'subscription changes per second per stream (token bucket refill)' },
  { flag: 'subscription-burst', key: 'subscriptionBurst', zeroMeansOff: false, describe: 'subscription changes one stream may make at once (token bucket size)' },
];

/** setTimeout's limit: the ms limits are handed to timers. */
const MAX_MS = 2_147_483_647;

/** Validates limit values (undefined = the default); returns the limits and a message per bad value. */
export function checkLimits(raw: Partial<Record<keyof Limits, unknown>>): { limits: Limits; problems: { path: string; message: string }[] } {
  const limits: Limits = { ...DEFAULT_LIMITS };
  const problems: { path: string; message: string }[] = [];
  for (const { flag, key, zeroMeansOff } of LIMIT_FLAGS) {
    const v = raw[key];
    if (v === undefined || v === null || v === '') continue;
    const n = Number(v);
    const min = zeroMeansOff ? 0 : 1;
    const max = key.endsWith('Ms') ? MAX_MS : Number.MAX_SAFE_INTEGER;
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push({ path: flag, message: `expected an integer from ${min}${zeroMeansOff ? ' (off)' : ''} to ${max}, got ${typeof v === 'number' ? String(v) : JSON.stringify(v)}` });
      continue;
    }
    limits[key] = n;
  }
  if (limits.maxConcurrentStreams > 2 ** 31 - 1) problems.push({ path: 'max-concurrent-streams', message: 'at most 2147483647' });
  return { limits, problems };
}
