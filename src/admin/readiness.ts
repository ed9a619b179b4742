/** What GET /readyz answers (and the home page shows). */
export interface Readiness {
  ready: boolean;
  listening: boolean;
  draining: boolean;
  /** At least one upstream has a ready stream (or there are none). */
  upstreamConnected: boolean;
  /** The cache can answer without upstream: resources held in memory, or a healthy shared tier. */
  cacheCanServe: boolean;
  upstreams: Record<string, { connected: boolean; state: string }>;
  cachedResources: number;
  sharedTier: 'none' | 'healthy' | 'unavailable';
  /** Redis (the shared tier): reachable, not reachable (serving from memory and upstream), or not configured. */
  redis: 'up' | 'down' | 'off';
}
