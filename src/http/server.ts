// The read-only HTTP server of `scheduler start --http` and `serve` (SPEC §11, §12): /metrics,
// /healthz, /api/{status,routines,history,lock,runs} and the status page at /. Every request must
// name this server in its Host header and, when a token is set, carry it; only GET and HEAD
// exist; slow clients are cut off by header, request and idle timeouts.

import { jsonText } from '../printable.js';
import { VERSION } from '../version.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { formatListen, type ListenAddress } from '../config/listen.js';
import { UsageError, errnoCode } from '../errors.js';
import { Metrics, type SharedState } from './metrics.js';
import { PAGE_CSP, renderPage } from './page.js';
import { bearerMatches, hostAllowed } from './security.js';
import { cachedSources, consecutiveSkips, type RoutineView, type StatusSources } from './sources.js';
import type { PageData, StatusView } from './view.js';

export interface StatusServerOptions {
  listen: ListenAddress;
  /** Required of every request when set (Authorization: Bearer …). */
  token: string | null;
  sources: StatusSources;
  metrics: Metrics;
  /** Problems worth a log line (a state read that failed); never the request's own data. */
  warn(message: string): void;
}

export interface StatusServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const TIMEOUTS = { headersTimeout: 5_000, requestTimeout: 10_000, keepAliveTimeout: 5_000, idleMs: 30_000 };
/** Connections that have not sent a whole request head yet, at most: past it, the oldest of them
 * is closed to make room (never the newest: a probe's connection sends its request at once). */
const PENDING_MAX = 64;
/** The same, per client address. */
const PENDING_PER_CLIENT = 16;
/** Every connection, at most (keep-alive ones close after keepAliveTimeout). */
const CONNECTIONS_MAX = 256;

/** Half-open connections (a client that opens many and trickles its headers, or sends none) can
 * neither fill the server nor keep a probe out (SPEC §11, §12): the oldest connection still
 * without a request head is closed when a client, or everyone together, has too many. */
function guardConnections(server: Server): void {
  const pending = new Map<Socket, string>(); // in arrival order
  const perClient = new Map<string, number>();
  const forget = (socket: Socket): void => {
    const who = pending.get(socket);
    if (who === undefined) return;
    pending.delete(socket);
    const n = (perClient.get(who) ?? 1) - 1;
    if (n <= 0) perClient.delete(who);
    else perClient.set(who, n);
  };
  const evictOldest = (who?: string): void => {
    for (const [socket, w] of pending) {
      if (who !== undefined && w !== who) continue;
      forget(socket);
      socket.destroy();
      return;
    }
  };
  server.maxConnections = CONNECTIONS_MAX;
  server.on('connection', (socket: Socket) => {
    const who = socket.remoteAddress ?? '?';
    pending.set(socket, who);
    perClient.set(who, (perClient.get(who) ?? 0) + 1);
    socket.once('close', () => forget(socket));
    if ((perClient.get(who) ?? 0) > PENDING_PER_CLIENT) evictOldest(who);
    if (pending.size > PENDING_MAX) evictOldest();
  });
  server.on('request', (req: IncomingMessage) => forget(req.socket));
}

const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
};

const TEXT = 'text/plain; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';

export async function startStatusServer(o: StatusServerOptions): Promise<StatusServer> {
  const s = cachedSources(o.sources);
  let port = o.listen.port;

  const status = async (): Promise<StatusView> => {
    const [health, up] = await Promise.all([s.health(), s.schedulerUp()]);
    return { ...s.info, health, scheduler_up: up, now: new Date().toISOString() };
  };
  const history = async () => s.recent((await s.routines()).map((r) => r.id));
  const shared = async (): Promise<SharedState> => {
    const [rows, lock, up] = await Promise.all([s.routines(), s.lock(), s.schedulerUp()]);
    // history only for rows that do not count their consecutive skips themselves
    const counted = (r: RoutineView): boolean => typeof r.consecutive_skips === 'number';
    const recent = rows.every(counted) ? {} : await s.recent(rows.map((r) => r.id));
    return {
      routines: rows.map((r) => ({
        id: r.id, paused: r.paused, last_success_at: r.last_success_at, last_failure_at: r.last_failure_at, consecutive_skips: consecutiveSkips(r, recent[r.id]),
        consecutive_failures: r.consecutive_failures, next_run_at: r.enabled ? r.next_run_at : null, starved: r.starved === true,
      })),
      execLockHeld: lock.state === 'held',
      schedulerUp: up,
      info: { version: VERSION, project: s.info.project, host: s.info.host },
      ...(s.clockOffsetMs ? { clockOffsetSeconds: ((o) => (o === null ? null : o / 1000))(s.clockOffsetMs()) } : {}),
    };
  };
  const page = async (): Promise<string> => {
    const [st, routines, recent, lock, runs] = await Promise.all([status(), s.routines(), history(), s.lock(), s.runs()]);
    const data: PageData = { status: st, routines, recent, lock, runs };
    return renderPage(data, Date.parse(st.now));
  };
  const json = (read: () => Promise<unknown>) => async (): Promise<[number, string, string]> => [200, JSON_TYPE, `${jsonText(JSON.stringify(await read()))}\n`];

  const routes: Record<string, () => Promise<[number, string, string]>> = {
    '/': async () => [200, 'text/html; charset=utf-8', await page()],
    '/metrics': async () => [200, o.metrics.contentType, await o.metrics.render(await shared())],
    '/healthz': async () => {
      const h = await s.health();
      return h.ok ? [200, TEXT, 'ok\n'] : [503, TEXT, `${h.reason}\n`];
    },
    '/api/status': json(status),
    '/api/routines': json(() => s.routines()),
    '/api/history': json(history),
    '/api/lock': json(() => s.lock()),
    '/api/runs': json(() => s.runs()),
    // browsers ask for it on their own; an empty answer keeps their consoles quiet
    '/favicon.ico': async () => [204, TEXT, ''],
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    req.resume(); // a body is never read; drain it so the connection stays usable
    const send = (code: number, type: string, body: string, extra: Record<string, string> = {}): void => {
      res.writeHead(code, { ...COMMON_HEADERS, 'content-type': type, 'content-length': String(Buffer.byteLength(body)), ...(type.startsWith('text/html') ? { 'content-security-policy': PAGE_CSP } : { 'content-security-policy': "default-src 'none'; frame-ancestors 'none'" }), ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    // Checked first: an answer of any other kind to a rebound name would already be a leak.
    if (!hostAllowed(req.headers.host, o.listen, port)) return send(421, TEXT, 'misdirected request: the Host header does not name this server\n');
    if (o.token !== null && !bearerMatches(req.headers.authorization, o.token)) {
      return send(401, TEXT, 'unauthorized: send "Authorization: Bearer <token>" with the token of ROUTINELY_HTTP_TOKEN\n', { 'www-authenticate': 'Bearer realm="routinely"' });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, TEXT, 'method not allowed: this server is read-only\n', { allow: 'GET, HEAD' });
    const path = (req.url ?? '/').split('?')[0]!;
    const route = routes[path];
    if (!route) return send(404, TEXT, 'not found\n');
    try {
      const [code, type, body] = await route();
      send(code, type, body);
    } catch (err) {
      o.warn(`${path}: ${(err as Error).message}`);
      // the details (paths, database errors) go to the log, not to whoever asked
      if (path === '/healthz') send(503, TEXT, 'cannot read the scheduler state\n');
      else send(500, TEXT, 'cannot read the state; see the log of routinely\n');
    }
  };

  const server = createServer({
    headersTimeout: TIMEOUTS.headersTimeout, requestTimeout: TIMEOUTS.requestTimeout, keepAliveTimeout: TIMEOUTS.keepAliveTimeout, maxHeaderSize: 16 * 1024,
    // the timeouts above are enforced within a second, not at Node's default 30 s sweep
    connectionsCheckingInterval: 1_000,
  }, (req, res) => {
    handle(req, res).catch((err: Error) => {
      o.warn(`request failed: ${err.message}`);
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  server.setTimeout(TIMEOUTS.idleMs, (socket) => socket.destroy());
  guardConnections(server);

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => {
      const code = errnoCode(err);
      const where = formatListen(o.listen);
      if (code === 'EADDRINUSE') reject(new UsageError(`--http ${where}: the address is already in use`));
      else if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') reject(new UsageError(`--http ${where}: no such address on this machine`));
      else if (code === 'EACCES') reject(new UsageError(`--http ${where}: not allowed to listen there (ports below 1024 need privileges)`));
      else reject(new UsageError(`--http ${where}: cannot listen (${err.message})`));
    };
    server.once('error', onError);
    server.listen({ host: o.listen.host, port: o.listen.port, exclusive: true }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (err) => o.warn(`server error: ${err.message}`));
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://${formatListen({ host: o.listen.host, port })}/`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
