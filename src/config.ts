/** One upstream authority: its name and the ordered list of servers that speak for it. */
export interface AuthoritySpec {
  /** The xdstp authority, e.g. `some-authority`. */
  name: string;
  /** Server URIs in failover order: `grpc://host:port` or `file://DIR`. */
  uris: string[];
}

export interface RelayConfig {
  /** Downstream delta-ADS listen address, `HOST:PORT` (port 0 picks a free one). */
  listen: string;
  /** Admin HTTP address `HOST:PORT`, or null to disable the admin server. */
  admin: string | null;
  authorities: AuthoritySpec[];
  /** Servers for non-xdstp (legacy) names, or null when legacy names are refused. */
  defaultUpstream: string[] | null;
  /** How long an upstream subscription outlives its last client, in ms (0 = immediate). */
  unsubscribeGraceMs: number;
  /** The node id the relay presents upstream. */
  nodeId: string;
  logLevel: string;
}
