/**
 * Who may call the admin endpoints that change state (POST /drain, POST
 * /log-level) or show the relay's insides (/debug/*, /server_info, the home
 * page).
 *
 * With `--admin-token FILE`: every such request must carry
 * `Authorization: Bearer <token>` (401 otherwise), wherever it comes from.
 * Without a token: only loopback callers (the pod itself: a preStop hook, a
 * `kubectl exec`) get through (403 otherwise). /healthz, /readyz, /metrics
 * and the other GETs stay open for probes and scrapers.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type * as http from 'node:http';
import type { Logger } from '../log';
import { readAdminToken } from '../security/admin-token';
import { FilePoller } from '../security/file-poller';
import type { SecurityMetrics } from '../security/metrics';
import { wantsHomePage } from './home-page';
import type { AdminReply } from './server';

/** POSTs, /debug/*, /server_info and the home page (GET / as HTML; the JSON index stays open). */
export function isProtectedRoute(method: string, pathname: string, homePage = false): boolean {
  if (method !== 'GET' && method !== 'HEAD') return true;
  // /server_info dumps the configuration (redacted, but it maps the deployment): as private as /debug/*.
  // The home page shows what /debug/* shows (clients, NACK messages, upstream errors).
  return pathname === '/debug' || pathname.startsWith('/debug/') || pathname === '/server_info' || (pathname === '/' && homePage);
}

export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** The token from `Authorization: Bearer <token>`, or undefined. */
function bearerToken(req: http.IncomingMessage): string | undefined {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

export class AdminAccess {
  private tokenDigest: Buffer | null;
  private readonly poller: FilePoller | undefined;

  constructor(
    tokenFile: string | null,
    private readonly deps: { logger: Logger; metrics: SecurityMetrics; reloadIntervalMs?: number },
  ) {
    if (tokenFile === null) {
      this.tokenDigest = null;
      return;
    }
    const token = readAdminToken(tokenFile);
    this.tokenDigest = digest(token);
    const log = deps.logger.child({ component: 'admin', file: tokenFile });
    this.poller = new FilePoller(
      [tokenFile],
      [Buffer.from(token)],
      () => {
        try {
          this.tokenDigest = digest(readAdminToken(tokenFile));
          log.info('admin token reloaded');
          deps.metrics.reloads.inc({ file: 'admin_token', result: 'ok' });
        } catch (err) {
          log.error({ err: (err as Error).message }, 'admin token not reloaded: keeping the previous one');
          deps.metrics.reloads.inc({ file: 'admin_token', result: 'error' });
        }
      },
      (err) => {
        log.error({ err: err.message }, 'admin token file unreadable: keeping the previous token');
        deps.metrics.reloads.inc({ file: 'admin_token', result: 'error' });
      },
      deps.reloadIntervalMs ?? 2000,
    );
  }

  /** Undefined when the request may proceed, else the refusal to send. */
  check(req: http.IncomingMessage, url: URL): AdminReply | undefined {
    const { pathname } = url;
    const homePage = pathname === '/' && wantsHomePage(req.headers.accept, url.searchParams);
    if (!isProtectedRoute(req.method ?? 'GET', pathname, homePage)) return undefined;
    if (this.tokenDigest === null) {
      if (isLoopback(req.socket.remoteAddress)) return undefined;
      this.deps.metrics.adminRefused.inc({ status: '403' });
      return { status: 403, body: { error: 'forbidden: without --admin-token this endpoint answers loopback callers only' } };
    }
    const given = bearerToken(req);
    // Compare digests: constant time, and no length leak.
    if (given !== undefined && timingSafeEqual(digest(given), this.tokenDigest)) return undefined;
    this.deps.metrics.adminRefused.inc({ status: '401' });
    return {
      status: 401,
      body: { error: 'unauthorized: send Authorization: Bearer <the token in the --admin-token file>' },
      headers: { 'www-authenticate': 'Bearer realm="xdstp-relay admin"' },
    };
  }

  close(): void {
    this.poller?.close();
  }
}
