import * as http from 'node:http';
import type { Logger } from '../log';

export type AdminRoute = (req: http.IncomingMessage, url: URL) => Promise<AdminReply> | AdminReply;

export interface AdminReply {
  status: number;
  body: string | object;
  contentType?: string;
  headers?: Record<string, string>;
}

/** Decides before routing whether a request may proceed: undefined = yes, else the refusal (admin/auth.ts). */
export type AdminGate = (req: http.IncomingMessage, url: URL) => AdminReply | undefined;

/** A tiny HTTP server for probes, metrics and debug views; GETs never change state. */
export class AdminServer {
  private readonly server: http.Server;
  private readonly routes = new Map<string, AdminRoute>();

  constructor(
    private readonly logger: Logger,
    private readonly gate?: AdminGate,
  ) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 5000;
  }

  /** `key` is `METHOD /path`. */
  route(key: string, handler: AdminRoute): this {
    this.routes.set(key, handler);
    return this;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://admin');
    const handler = this.routes.get(`${req.method} ${url.pathname}`);
    try {
      const refused = this.gate?.(req, url);
      const reply: AdminReply = refused
        ? refused
        : handler
        ? await handler(req, url)
        : { status: this.routes.has(`GET ${url.pathname}`) || this.routes.has(`POST ${url.pathname}`) ? 405 : 404, body: { error: 'not found' } };
      const isText = typeof reply.body === 'string';
      res.writeHead(reply.status, { ...reply.headers, 'content-type': reply.contentType ?? (isText ? 'text/plain; charset=utf-8' : 'application/json') });
      res.end(isText ? reply.body : JSON.stringify(reply.body, null, 2));
    } catch (err) {
      this.logger.error({ err, path: url.pathname }, 'admin request failed');
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'internal error' }));
    }
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        const addr = this.server.address();
        resolve(typeof addr === 'object' && addr ? addr.port : port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
