import * as client from 'prom-client';

/** Why the connection guard cut a connection (the label values of its counter). */
export type CutReason = 'ping_flood' | 'settings_flood' | 'rapid_reset' | 'oversized_message' | 'handshake_timeout';
const CUT_REASONS: Record<CutReason, true> = { ping_flood: true, settings_flood: true, rapid_reset: true, oversized_message: true, handshake_timeout: true };

/**
 * Security and abuse metrics, on the relay's registry (RelayMetrics.security).
 * Labels are small fixed sets; `authority` is only ever a configured authority
 * name, `(default)` for legacy names, or `other` for a name no upstream serves.
 */
export class SecurityMetrics {
  /** Subscriptions the policy refused (the engine's join check). */
  readonly deniedSubscriptions: client.Counter<'authority'>;
  /** Per-stream limits hit: request_size (ConnectionGuard); subscriptions_per_stream, name_length, subscription_rate (the streams). */
  readonly limitExceeded: client.Counter<'limit'>;
  readonly connectionsRefused: client.Counter<'reason'>;
  readonly connectionsCut: client.Counter<'reason'>;
  readonly connections: client.Gauge;
  readonly tlsHandshakeFailures: client.Counter;
  readonly reloads: client.Counter<'file' | 'result'>;
  readonly adminRefused: client.Counter<'status'>;

  /** Starts the counters that depend on the configuration at 0: reloads per watched file, denials per authority under a policy. */
  zeroConfiguredSeries(known: { authorities: readonly string[]; reloadedFiles: readonly string[] }): void {
    for (const file of known.reloadedFiles) for (const result of ['ok', 'error']) this.reloads.inc({ file, result }, 0);
    if (known.reloadedFiles.includes('policy')) for (const authority of known.authorities) this.deniedSubscriptions.inc({ authority }, 0);
  }

  constructor(registry: client.Registry) {
    const registers = [registry];
    this.deniedSubscriptions = new client.Counter({
      name: 'xdstp_relay_denied_subscriptions_total',
      help: 'Subscriptions the authorization policy refused (answered as removed, never delivered), by authority.',
      labelNames: ['authority'],
      registers,
    });
    this.limitExceeded = new client.Counter({
      name: 'xdstp_relay_limit_exceeded_total',
      help: 'Streams ended with RESOURCE_EXHAUSTED because they exceeded a per-stream limit, by limit.',
      labelNames: ['limit'],
      registers,
    });
    this.connectionsRefused = new client.Counter({
      name: 'xdstp_relay_connections_refused_total',
      help: 'Downstream connections closed on arrival: over --max-connections (total) or --max-connections-per-peer (per_peer).',
      labelNames: ['reason'],
      registers,
    });
    this.connectionsCut = new client.Counter({
      name: 'xdstp_relay_connections_cut_total',
      help: 'Downstream connections closed for HTTP/2 abuse: ping_flood, settings_flood, rapid_reset, oversized_message, handshake_timeout.',
      labelNames: ['reason'],
      registers,
    });
    this.connections = new client.Gauge({
      name: 'xdstp_relay_downstream_connections',
      help: 'Open downstream TCP connections (with or without streams).',
      registers,
    });
    this.tlsHandshakeFailures = new client.Counter({
      name: 'xdstp_relay_tls_handshake_failures_total',
      help: 'Downstream TLS handshakes that failed (e.g. no or untrusted client certificate under mTLS).',
      registers,
    });
    this.reloads = new client.Counter({
      name: 'xdstp_relay_reloads_total',
      help: 'Reloads of watched files (tls, policy, admin_token) by result (ok, error: previous version kept).',
      labelNames: ['file', 'result'],
      registers,
    });
    this.adminRefused = new client.Counter({
      name: 'xdstp_relay_admin_refused_total',
      help: 'Admin requests refused: 401 (missing or wrong bearer token), 403 (not loopback and no token configured).',
      labelNames: ['status'],
      registers,
    });
    // Fixed label sets start at 0, so rate() and increase() see the first event.
    for (const limit of ['request_size', 'subscriptions_per_stream', 'name_length', 'subscription_rate']) this.limitExceeded.inc({ limit }, 0);
    for (const reason of ['total', 'per_peer']) this.connectionsRefused.inc({ reason }, 0);
    for (const reason of Object.keys(CUT_REASONS)) this.connectionsCut.inc({ reason }, 0);
    for (const status of ['401', '403']) this.adminRefused.inc({ status }, 0);
  }
}
