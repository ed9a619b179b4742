import assert from 'node:assert/strict';
import type { DeltaClient } from './delta-client';

/** Every response each client got was something Envoy would accept (XDSTP.md rules). */
export function assertWellFormed(...clients: DeltaClient[]): void {
  for (const c of clients) assert.deepEqual(c.violations, [], c.describe());
}

/** Names of resources (with payload or heartbeat) a client ever received of a type. */
export function receivedNames(c: DeltaClient, typeUrl: string): string[] {
  return [...new Set(c.received(typeUrl).map((r) => r.name ?? ''))].sort();
}

export function sorted(xs: Iterable<string>): string[] {
  return [...xs].sort();
}
