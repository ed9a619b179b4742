/** IPC between the coordinator (bench/run.ts) and load generator processes (bench/loadgen/worker.ts). */
import type { Plan } from './names';

export interface WindowSpec {
  /** SETTINGS_INITIAL_WINDOW_SIZE (per-stream receive window). */
  stream: number;
  /** Connection receive window. */
  conn: number;
}

/**
 * The ADS flavour a group of clients speaks: incremental (DeltaAggregatedResources,
 * as Envoy) or state of the world (StreamAggregatedResources, as gRPC's proxyless clients).
 */
export type AdsProtocol = 'delta' | 'sotw';

export interface OpenCommand {
  cmd: 'open';
  group: string;
  port: number;
  protocol: AdsProtocol;
  /** Client indices [first, first + count). */
  first: number;
  count: number;
  plan: Plan;
  /** Send each client's subscription as soon as its stream is open. */
  subscribe: boolean;
  streamsPerConn: number;
  /** Connects in flight at once (the accept backlog is finite). */
  concurrency: number;
  /** Clients with index % stallEvery === stallEvery - 1 can be stalled (0 = none; delta only). */
  stallEvery: number;
  ack: boolean;
  window: WindowSpec;
  stallWindow: WindowSpec;
  /** Each client's node lists an Envoy-like build (its version, this many extensions, its features), alike for all; 0: a plain node. */
  envoyExtensions: number;
}

export type GenCommand =
  | OpenCommand
  | { cmd: 'subscribe'; group: string }
  | { cmd: 'waitSynced'; group: string; timeoutMs: number }
  | { cmd: 'watch'; group: string; round: number; timeoutMs: number }
  | { cmd: 'record'; group: string; on: boolean; minT0Us: number }
  | { cmd: 'collect'; group: string }
  | { cmd: 'stall'; group: string; on: boolean }
  | { cmd: 'stallState'; group: string }
  | { cmd: 'close'; group: string }
  | { cmd: 'exit' };

export interface GenRequest {
  id: number;
  body: GenCommand;
}

export interface GenReply {
  id: number;
  ok: boolean;
  error?: string;
  result?: unknown;
}

export interface OpenResult {
  opened: number;
  failed: number;
  ms: number;
  firstError?: string;
}

export interface SyncResult {
  synced: number;
  total: number;
  /** Per synced client: ms from the open command to holding every expected resource. */
  times: number[];
  ended: number;
  endReasons: Record<string, number>;
}

export interface RoundResult {
  round: number;
  got: number;
  total: number;
  /** Per client that got it: ms from the change being decided to its arrival. */
  lat: number[];
}

export interface CollectResult {
  /** Latencies (ms) of stamped versions received while recording, healthy clients. */
  samples: number[];
  /** The same for stallable clients. */
  stalledSamples: number[];
  messages: number;
  resources: number;
  bytes: number;
  ended: number;
}

export interface StallStateResult {
  clients: Array<{
    index: number;
    /** name → version held, from every resource received. */
    versions: Array<[string, string]>;
    /** Most resources in one message since the last unstall. */
    maxBatchSinceResume: number;
    messagesSinceResume: number;
  }>;
}
