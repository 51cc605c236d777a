// The HTTP server of `scheduler start --http` and `serve` (SPEC §11, §12): /metrics, /healthz,
// /api/{status,routines,history,lock,runs}, /api/routines/ID, the status page at / and a
// routine's page at /routines/ID; with `http.actions`, POST /api/routines/ID/run|pause|resume.
// Every request must name this server in its Host header and, when a token is set, carry it (a
// page asked for without it is served empty, for its script to fetch the data with the token);
// an action always needs the token and may not come from another origin; slow clients are cut
// off by header, request and idle timeouts.
// (Over 300 lines: the routes and the checks every request passes, together so no route misses one.)

import { jsonText } from '../printable.js';
import { isRunId } from '../run-id.js';
import { VERSION } from '../version.js';
import { machineZone } from '../zone-time.js';
import { isInterrupted } from '../state/routine-state.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { carriesBody, lingerAtClose } from './unread-body.js';
import { formatListen, type ListenAddress } from '../config/listen.js';
import { UsageError, errnoCode } from '../errors.js';
import { Metrics, type SharedState } from './metrics.js';
import { PAGE_CSP, renderPage, renderRoutinePage, renderShell } from './page.js';
import { HttpProblem, parseBody, readBody, takeAction } from './actions.js';
import { bearerMatches, hostAllowed, sameOrigin } from './security.js';
import { cachedSources, consecutiveSkips, type RoutineView, type StatusSources } from './sources.js';
import type { DetailData, PageData, StatusView } from './view.js';
import { own } from '../is-object.js';

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
 * is closed to make room. */
const PENDING_MAX = 64;
/** The same, per client address. */
const PENDING_PER_CLIENT = 16;
/** A connection counts as pending only once it has been open this long without a request head:
 * a probe's connection sends its request at once, so it is never counted, never closed, whatever
 * burst of connections comes in with it (closing the oldest of a burst would close the probe). */
const PENDING_GRACE_MS = 250;
/** At close, how long a request under way may still be answered. */
const CLOSE_GRACE_MS = 1_000;
/** Every connection, at most (keep-alive ones close after keepAliveTimeout). */
const CONNECTIONS_MAX = 256;
/** Requests of one connection not answered yet, at most: pipelined ones queue their answers in
 * memory until the client reads the first, so one that sends a thousand in a packet and reads
 * nothing (no token needed: a page shell is 32 KB) would grow the server by gigabytes. No
 * browser, curl or Prometheus pipelines; past this the connection is closed. */
const UNANSWERED_MAX = 4;

/** Half-open connections (a client that opens many and trickles its headers, or sends none) can
 * neither fill the server nor keep a probe out (SPEC §11, §12): the oldest connection still
 * without a request head is closed when a client, or everyone together, has too many. */
function guardConnections(server: Server): void {
  const pending = new Map<Socket, string>(); // in the order they became pending
  const perClient = new Map<string, number>();
  const served = new WeakSet<Socket>();
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
  const graces = new WeakMap<Socket, NodeJS.Timeout>();
  /** Counted as pending once it has been open (or idle after an answer) a grace without a new
   * request head: a connection that sent one request, then trickles the next, is no different
   * from one that never sent any (else 256 of them, with no token, kept every probe out). */
  const watch = (socket: Socket, who: string): void => {
    clearTimeout(graces.get(socket));
    const grace = setTimeout(() => {
      if (socket.destroyed || served.has(socket) || pending.has(socket)) return;
      pending.set(socket, who);
      perClient.set(who, (perClient.get(who) ?? 0) + 1);
      if ((perClient.get(who) ?? 0) > PENDING_PER_CLIENT) evictOldest(who);
      if (pending.size > PENDING_MAX) evictOldest();
    }, PENDING_GRACE_MS);
    grace.unref();
    graces.set(socket, grace);
  };
  server.on('connection', (socket: Socket) => {
    watch(socket, socket.remoteAddress ?? '?');
    socket.once('close', () => {
      clearTimeout(graces.get(socket));
      forget(socket);
    });
  });
  // requests of a connection not answered yet (pipelined ones come before the first answer)
  const open = new WeakMap<Socket, number>();
  // (first of the listeners: the handler finds the connection closed and does nothing)
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    clearTimeout(graces.get(socket));
    served.add(socket);
    forget(socket);
    open.set(socket, (open.get(socket) ?? 0) + 1);
    if ((open.get(socket) ?? 0) > UNANSWERED_MAX) socket.destroy();
    // all answered: waiting for its next request head, it is watched again
    res.once('close', () => {
      const left = (open.get(socket) ?? 1) - 1;
      open.set(socket, left);
      if (left > 0 || socket.destroyed) return;
      served.delete(socket);
      watch(socket, socket.remoteAddress ?? '?');
    });
  });
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
/** A routine id in a path (config/schema.ts ID_PATTERN): checked before it is looked up. */
const ROUTINE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Fires on a routine's page, and the lines of a run's output shown there. */
const DETAIL_FIRES = 50;
const DETAIL_LINES = 200;
/** Bars in a routine's durations chart. */
const CHART_FIRES = 30;
export async function startStatusServer(o: StatusServerOptions): Promise<StatusServer> {
  const s = cachedSources(o.sources);
  let port = o.listen.port;

  const status = async (): Promise<StatusView> => {
    const [health, up] = await Promise.all([s.health(), s.schedulerUp()]);
    return { ...s.info, health, scheduler_up: up, now: new Date().toISOString() };
  };
  const history = async () => s.recent((await s.routines()).map((r) => r.id));
  /** A routine's last fire that ran, when its last fire was a skip (which did no work): found in
   * its history, then kept while the routine's count of fires that ran stays the same — a fire
   * that ran and was recorded after a later tick's skip (it outlasted its interval: the skip says
   * `previous run still running`) leaves the last result a skip, and is found then. */
  const ranBefore = new Map<string, { ran: number; ms: number | null }>();
  const lastRunDuration = async (r: RoutineView): Promise<number | null> => {
    if ((r.last_result === 'success' || r.last_result === 'failure') && r.last_duration_ms !== null)
      return r.last_duration_ms;
    // a skip, or a fire lost with its process (no known duration): the last fire that ran and
    // whose duration is known
    if (r.last_result !== 'skipped' && r.last_result !== 'failure') return null;
    const ran = r.counts.success + r.counts.failure;
    if (ranBefore.get(r.id)?.ran !== ran) {
      // (a history that cannot be read now is not kept as "none ran": read again next scrape)
      const fires = await s.fires(r.id, Infinity).catch(() => null);
      if (fires === null) return null;
      const last = fires.find((f) => f.result !== 'skipped' && !isInterrupted(f));
      ranBefore.set(r.id, {
        ran,
        ms: last ? Math.max(0, Date.parse(last.finished_at) - Date.parse(last.started_at)) : null,
      });
    }
    return ranBefore.get(r.id)?.ms ?? null;
  };
  /** What kept the exec lock from /metrics last, said once until it changes. */
  let lockProblem: string | null = null;
  const shared = async (): Promise<SharedState> => {
    // a lock that cannot be read (a folder at its path) costs its own sample, not the scrape: the
    // routines' series are what alerts on the fires it makes fail
    const [rows, lock, up] = await Promise.all([
      s.routines(),
      s.lock().then(
        (l) => ((lockProblem = null), l),
        (err: unknown) => {
          const why = (err as Error).message;
          if (why !== lockProblem) o.warn(`the exec lock could not be read for /metrics: ${why}`);
          lockProblem = why;
          return null;
        },
      ),
      s.schedulerUp(),
    ]);
    // history only for rows that do not count their consecutive skips themselves
    const counted = (r: RoutineView): boolean => typeof r.consecutive_skips === 'number';
    const recent = rows.every(counted) ? {} : await s.recent(rows.map((r) => r.id));
    const config = s.routineConfig?.() ?? {};
    const durations = await Promise.all(rows.map(lastRunDuration));
    return {
      routines: rows.map((r, i) => ({
        id: r.id,
        paused: r.paused,
        last_success_at: r.last_success_at,
        last_failure_at: r.last_failure_at,
        consecutive_skips: consecutiveSkips(r, own(recent, r.id)),
        consecutive_failures: r.consecutive_failures,
        next_run_at: r.enabled ? r.next_run_at : null,
        starved: r.starved === true,
        running: typeof r.running_since === 'string',
        last_scheduled_at: r.last_scheduled_at,
        last_run_duration_ms: durations[i] ?? null,
        // (none for a routine the config no longer has, listed while a fire of it runs on)
        config:
          own(config, r.id) && r.schedule !== null && r.action !== null
            ? { schedule: r.schedule, timezone: r.timezone ?? machineZone(), action: r.action, ...config[r.id]! }
            : null,
      })),
      execLockHeld: lock === null ? null : lock.state === 'held',
      schedulerUp: up,
      info: { version: VERSION, project: s.info.project, host: s.info.host },
      ...(s.clockOffsetMs ? { clockOffsetSeconds: ((o) => (o === null ? null : o / 1000))(s.clockOffsetMs()) } : {}),
    };
  };
  const page = async (): Promise<string> => {
    const [st, routines, recent, lock, runs] = await Promise.all([
      status(),
      s.routines(),
      history(),
      s.lock(),
      s.runs(),
    ]);
    const data: PageData = { status: st, routines, recent, lock, runs };
    return renderPage(data, Date.parse(st.now), { tokenRequired: o.token !== null });
  };
  const json = (read: () => Promise<unknown>) => async (): Promise<[number, string, string]> => [
    200,
    JSON_TYPE,
    jsonBody(await read()),
  ];
  const jsonBody = (v: unknown): string => `${jsonText(JSON.stringify(v))}\n`;

  /** A routine's page: null when the config has no such routine. */
  const detail = async (id: string, run: string | null, pageNumber: number): Promise<DetailData | null> => {
    const routine = (await s.routines()).find((r) => r.id === id);
    if (!routine) return null;
    // every fire kept (the store bounds it: retention.historyLines), newest first
    const [st, all, running, lost] = await Promise.all([
      status(),
      s.fires(id, Infinity),
      s.running ? s.running(id) : Promise.resolve(null),
      s.lost ? s.lost(id) : Promise.resolve([]),
    ]);
    const pages = Math.max(1, Math.ceil(all.length / DETAIL_FIRES));
    const number = Math.min(pageNumber, pages);
    const fires = all.slice((number - 1) * DETAIL_FIRES, number * DETAIL_FIRES);
    // (a fire lost with its process ran, for no known time: not in the durations chart; its
    // output up to the end is in the log, and is the newest that ran)
    const ran = all.filter((f) => f.result !== 'skipped' && !isInterrupted(f)).slice(0, CHART_FIRES);
    // the run asked for, else the one running now (its output grows), else the newest that ran
    const runId =
      run ?? running?.run_id ?? all.find((f) => f.result !== 'skipped' && f.run_id !== null)?.run_id ?? null;
    const output = runId === null ? null : await s.output(id, runId, DETAIL_LINES);
    return {
      status: st,
      routine,
      fires,
      output,
      actions: s.actions !== undefined,
      page: { number, pages, total: all.length, size: DETAIL_FIRES },
      ran,
      running,
      lost,
    };
  };
  const detailOf = async (id: string, query: URLSearchParams): Promise<DetailData> => {
    const run = query.get('run');
    if (run !== null && !isRunId(run))
      throw new HttpProblem(400, `run ${JSON.stringify(run.slice(0, 100))} is not a run id (r-…)`);
    const pageText = query.get('page') ?? '1';
    if (!/^[1-9]\d{0,5}$/.test(pageText))
      throw new HttpProblem(400, `page ${JSON.stringify(pageText.slice(0, 20))} is not a page number (1, 2, …)`);
    const d = await detail(id, run, Number(pageText));
    if (!d) throw new HttpProblem(404, `no routine ${JSON.stringify(id)} in the config`);
    return d;
  };

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
    // closed for sending more requests ahead than it reads answers (guardConnections)
    if (req.socket.destroyed) return;
    // A body is read only for an action whose caller passed every check. Any other request that
    // carries one is answered at once and its connection closed, its body unread (draining a
    // 100 MB body nobody asked for was work done for whoever sent it); a client that asked
    // "Expect: 100-continue" is never told to go on, so it never sends it.
    let bodyWanted = false;
    const send = (code: number, type: string, body: string, extra: Record<string, string> = {}): void => {
      const unread = carriesBody(req) && !bodyWanted;
      if (unread || extra.connection === 'close') lingerAtClose(req.socket);
      const close = unread ? { connection: 'close' } : {};
      res.writeHead(code, {
        ...COMMON_HEADERS,
        'content-type': type,
        'content-length': String(Buffer.byteLength(body)),
        ...(type.startsWith('text/html')
          ? { 'content-security-policy': PAGE_CSP }
          : { 'content-security-policy': "default-src 'none'; frame-ancestors 'none'" }),
        ...close,
        ...extra,
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const isPost = req.method === 'POST';
    // Checked first: an answer of any other kind to a rebound name would already be a leak.
    if (!hostAllowed(req.headers.host, o.listen, port))
      return send(421, TEXT, 'misdirected request: the Host header does not name this server\n');
    // a target no URL can be made of (`GET http://[ HTTP/1.1`): the client's error, not ours
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://x');
    } catch {
      return send(400, TEXT, 'bad request: the request target is not a URL path\n');
    }
    const path = url.pathname;
    const page =
      path === '/'
        ? { routine: null }
        : /^\/routines\/[^/]+$/.test(path) && ROUTINE_ID.test(path.slice(10))
          ? { routine: path.slice(10) }
          : null;
    const reading = req.method === 'GET' || req.method === 'HEAD';
    if (o.token !== null && !bearerMatches(req.headers.authorization, o.token)) {
      // a browser cannot send the header when it opens a page: it gets the page without data,
      // whose script asks for the token and sends it with every request (never a cookie)
      if (reading && page)
        return send(200, 'text/html; charset=utf-8', renderShell(page.routine, s.actions !== undefined));
      return send(
        401,
        TEXT,
        'unauthorized: send "Authorization: Bearer <token>" with the token of ROUTINELY_HTTP_TOKEN\n',
        { 'www-authenticate': 'Bearer realm="routinely"' },
      );
    }
    const action = /^\/api\/routines\/([^/]+)\/(run|pause|resume|stop)$/.exec(path);
    const allow = s.actions ? 'GET, HEAD, POST' : 'GET, HEAD';
    if (isPost && s.actions && action) {
      // Another site's page may not act (its fetch could not carry the token without a CORS
      // answer this server never gives, and a form cannot set the header; this says no first).
      if (!sameOrigin(req.headers.origin, req.headers['sec-fetch-site'], req.headers.host)) {
        return send(
          403,
          JSON_TYPE,
          jsonBody({
            error:
              "cross-origin request refused: actions are taken from this server's own page, or without an Origin header (curl)",
          }),
        );
      }
      const id = action[1]!;
      try {
        if (!ROUTINE_ID.test(id)) throw new HttpProblem(404, `${JSON.stringify(id.slice(0, 100))} is not a routine id`);
        bodyWanted = true;
        // Node's own test of the header (it chose checkContinue by it)
        if (/(?:^|\W)100-continue(?:$|\W)/i.test(req.headers.expect ?? '')) res.writeContinue();
        const [code, answer] = await takeAction(
          s,
          id,
          action[2]!,
          parseBody(await readBody(req)),
          req.socket.remoteAddress ?? '?',
        );
        s.forget();
        return send(code, JSON_TYPE, jsonBody(answer));
      } catch (err) {
        // a body too large is not read to its end: the connection is closed after the answer
        if (err instanceof HttpProblem)
          return send(
            err.status,
            JSON_TYPE,
            jsonBody({ error: err.message }),
            err.status === 413 ? { connection: 'close' } : {},
          );
        o.warn(`${path}: ${(err as Error).message}`);
        return send(500, JSON_TYPE, jsonBody({ error: 'the action failed; see the log of routinely' }));
      }
    }
    if (!reading) {
      const why = s.actions
        ? 'only the actions take POST (/api/routines/ID/run, /pause, /resume, /stop)'
        : 'this server is read-only (actions are off: http.actions)';
      return send(405, TEXT, `method not allowed: ${why}\n`, { allow });
    }
    const detailApi = /^\/api\/routines\/([^/]+)$/.exec(path);
    const route =
      routes[path] ??
      (page?.routine
        ? async (): Promise<[number, string, string]> => {
            const d = await detailOf(page.routine!, url.searchParams);
            return [
              200,
              'text/html; charset=utf-8',
              renderRoutinePage(d, Date.parse(d.status.now), { tokenRequired: o.token !== null }),
            ];
          }
        : detailApi && ROUTINE_ID.test(detailApi[1]!)
          ? async (): Promise<[number, string, string]> => {
              const { status: _s, ...d } = await detailOf(detailApi[1]!, url.searchParams);
              return [200, JSON_TYPE, jsonBody(d)];
            }
          : undefined);
    if (!route) return send(404, TEXT, 'not found\n');
    try {
      const [code, type, body] = await route();
      send(code, type, body);
    } catch (err) {
      if (err instanceof HttpProblem) return send(err.status, TEXT, `${err.message}\n`);
      o.warn(`${path}: ${(err as Error).message}`);
      // the details (paths, database errors) go to the log, not to whoever asked
      if (path === '/healthz') send(503, TEXT, 'cannot read the scheduler state\n');
      else send(500, TEXT, 'cannot read the state; see the log of routinely\n');
    }
  };

  const server = createServer(
    {
      headersTimeout: TIMEOUTS.headersTimeout,
      requestTimeout: TIMEOUTS.requestTimeout,
      keepAliveTimeout: TIMEOUTS.keepAliveTimeout,
      maxHeaderSize: 16 * 1024,
      // the timeouts above are enforced within a second, not at Node's default 30 s sweep
      connectionsCheckingInterval: 1_000,
    },
    (req, res) => {
      handle(req, res).catch((err: Error) => {
        o.warn(`request failed: ${err.message}`);
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
    },
  );
  // with a listener Node no longer answers "100 Continue" on its own: handle() does, for an
  // action it is about to read the body of, and for nothing else
  server.on('checkContinue', (req, res) => server.emit('request', req, res));
  server.setTimeout(TIMEOUTS.idleMs, (socket) => socket.destroy());
  guardConnections(server);

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => {
      const code = errnoCode(err);
      const where = formatListen(o.listen);
      if (code === 'EADDRINUSE') reject(new UsageError(`--http ${where}: the address is already in use`));
      else if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN')
        reject(new UsageError(`--http ${where}: no such address on this machine`));
      else if (code === 'EACCES')
        reject(new UsageError(`--http ${where}: not allowed to listen there (ports below 1024 need privileges)`));
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
        // an answer on its way (a stop whose record just came) goes out; then every connection
        // left (a client that never finishes its request) is closed
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS).unref();
      }),
  };
}
