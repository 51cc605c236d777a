// The connection to the database backend: a small pool with TCP keepalives and statement
// timeouts, so a dead host or a stuck server is noticed in seconds and a lease is judged by its
// expiry, never by a TCP timeout of hours (Linux's default tcp_keepalive_time is 2 h). Errors
// name the host and never the password.
// (Over 300 lines: the pool, its keepalives and time-outs, error naming and the migration runner
// share each connection's set-up.)

import pg from 'pg';
import { PriorityGate } from './priority-gate.js';
import { DatabaseError, DatabaseStatementError } from '../errors.js';
import { MIGRATIONS, schemaSql } from './schema.js';
import { sessionSql, type Statement } from './statements.js';
import { describePgUrl, parsePgUrl, redactPgUrl, singleHostUrl } from '../config/database-url.js';
import { seconds } from '../duration.js';

/** A row as the driver gives it. The types below are ours, not the driver's: the published
 * declarations reference nothing that is not installed with the package (pg is bundled). */
export type Row = Record<string, any>;

/** What a statement answers: the subset of pg's QueryResult that this code reads. */
export interface QueryAnswer<R extends Row = Row> {
  rows: R[];
  rowCount: number | null;
}

/** One connection inside a transaction (pg's PoolClient, as far as this code uses it). */
export interface TxClient {
  query<R extends Row = Row>(statement: Statement): Promise<QueryAnswer<R>>;
}

export interface Db {
  /** host:port/database (every host, with several), for messages. */
  where: string;
  /** A statement of statements.ts. With a `name` (a statement run often: a lease's acquire,
   * heartbeat, release) it is prepared once per connection under that name, so the server plans it once, not at every run (measured: half
   * of an acquire's time). Behind a pooler in transaction mode a prepared statement may not be
   * there on the next server connection: the first such answer makes this process run every
   * statement unnamed from then on (the statement is sent again unnamed: it never ran). */
  query<R extends Row = Row>(statement: Statement): Promise<QueryAnswer<R>>;
  /** Runs `fn` in a transaction on one connection (with its statement timeout set for the
   * transaction only: nothing of it outlives the transaction in a pooler's server connection).
   * `urgent`: on a fire's way to its start (see Statement.urgent). */
  transaction<T>(fn: (client: TxClient) => Promise<T>, opts?: { urgent?: boolean }): Promise<T>;
  /** A held lease's own statements (heartbeat, release): on connections of their own, so a
   * heartbeat never waits behind this process's other statements on a slow link. */
  leaseQuery<R extends Row = Row>(statement: Statement): Promise<QueryAnswer<R>>;
  close(): Promise<void>;
}

/** The server's answer when a prepared statement is not on the connection a pooler chose
 * (26000 invalid_sql_statement_name) or another client's of that name is (42P05). */
const lostPrepared = (err: unknown): boolean => ['26000', '42P05'].includes((err as { code?: string }).code ?? '');

const ignore = (): void => {};

/** Connections a process keeps by default (SPEC §9: `backend.poolSize`): one for statements and
 * one for the heartbeats of held leases, so that ten schedulers fit a stock PgBouncer pool
 * (default_pool_size 20) in session mode. */
export const DEFAULT_POOL_SIZE = 2;
const STATEMENT_TIMEOUT_MS = 15_000;
/** How long a transaction of ours may sit idle on the server (its process stopped between two of
 * its statements) before the server ends it, so that its row locks hold the fleet up no longer:
 * half the lease TTL (a stall shorter than that is one the lease outlives anyway), at least 5 s
 * (a slow link's round trip, up to 3 s, is idle time too) and at most the statement time-out. */
export const idleInTransactionMs = (ttlMs: number): number =>
  Math.min(STATEMENT_TIMEOUT_MS, Math.max(5_000, Math.round(ttlMs / 2)));
/** Client side: a statement with no answer by then is given up (its connection is dropped). */
const QUERY_TIMEOUT_MS = STATEMENT_TIMEOUT_MS + 2_000;

/** The connect time-out when the URL has no `connect_timeout`: half the lease TTL, at least 5 s
 * and at most 60 s. A connection that takes longer than that could not keep a lease either; a
 * shorter one fails password authentication on a slow link (SCRAM takes three round trips
 * after the TCP handshake: with round trips of 3 s, 12 s; TTL 30 gives 15 s). */
export function defaultConnectTimeoutMs(ttlMs: number): number {
  return Math.min(60_000, Math.max(5_000, Math.round(ttlMs / 2)));
}

export interface ConnectOptions {
  /** `backend.poolSize`: connections this process keeps at most (default 2); with 1, the
   * heartbeats share the one connection with every other statement. */
  poolSize?: number;
  /** The lease TTL, for the default connect time-out. */
  ttlMs?: number;
}

/** The sizes of the two pools, and the time-outs, for messages. */
interface Limits {
  main: number;
  lease: number;
  connectTimeoutMs: number;
}

const secs = (ms: number): string => (ms === 0 ? 'ever' : seconds(ms));

/** The server refused a connection at its limit (53300): say what to do, not only that. */
function tooManyConnections(message: string, l: Limits): string {
  const fix = /for (role|database)/.test(message)
    ? `raise its CONNECTION LIMIT (ALTER ${message.includes('for role') ? 'ROLE' : 'DATABASE'} … CONNECTION LIMIT n)`
    : 'raise max_connections on the server, or put a pooler in front of it (e.g. PgBouncer; session and transaction pooling both work)';
  return `${message} (53300): ${fix}; ${perProcess(l)}`;
}

const perProcess = (l: Limits): string =>
  `each routinely process opens up to ${l.main + l.lease} connection${l.main + l.lease === 1 ? '' : 's'} (backend.poolSize)`;

const STANDBY_FIX =
  'point the URL at the primary, or list every host with target_session_attrs=read-write (postgres://h1:5432,h2:5432/db?target_session_attrs=read-write)';

/** A connection problem as a person reads it; never the password. Each cause is told by its
 * code or by the driver's exact words, never by a word that may be part of another message
 * (PgBouncer's `unsupported startup parameter: statement_timeout` is not a timeout). */
export function dbError(
  where: string,
  err: unknown,
  l: Limits = { main: DEFAULT_POOL_SIZE - 1, lease: 1, connectTimeoutMs: defaultConnectTimeoutMs(60_000) },
): DatabaseError {
  const e = err as { code?: string; message?: string };
  const msg = e.message ?? String(err);
  const reason = reasonOf(e.code, msg, l);
  const neverConnected = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', '28P01', '28000', '3D000'].includes(e.code ?? '');
  return new DatabaseError(`database ${where}: ${reason}${e.code && !reason.includes(e.code) ? ` (${e.code})` : ''}`, {
    neverConnected,
  });
}

/** Why a connection or statement failed, in words (dbError): by its code or the driver's exact
 * words, in this order; else the message itself, without a password. */
function reasonOf(code: string | undefined, msg: string, l: Limits): string {
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET') return 'connection reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'unknown host';
  if (code === 'ETIMEDOUT') return 'timed out connecting';
  if (msg === 'timeout exceeded when trying to connect')
    return `this process's connection pool is exhausted: its ${l.main} connection${l.main === 1 ? '' : 's'} stayed busy for ${secs(l.connectTimeoutMs)} (a wait inside this process, not for the database; raise backend.poolSize)`;
  if (msg.startsWith('Connection terminated due to connection timeout'))
    return `timed out connecting (no answer within ${secs(l.connectTimeoutMs)}; set connect_timeout=N in the URL for a slower link)`;
  if (msg === 'Query read timeout')
    return `no answer within ${QUERY_TIMEOUT_MS / 1000}s (timed out; behind PgBouncer in session mode this is a wait in its queue for a server connection: its pool is exhausted, raise default_pool_size or lower backend.poolSize)`;
  if (/no more connections allowed \(max_client_conn\)/.test(msg))
    return `PgBouncer refused the connection: its max_client_conn is reached (raise it, or lower backend.poolSize: ${perProcess(l)})`;
  if (/query_wait_timeout/.test(msg))
    return `PgBouncer's pool is exhausted: the statement waited query_wait_timeout for a server connection (raise default_pool_size, or lower backend.poolSize: ${perProcess(l)})`;
  if (code === '57014') return `a statement ran past ${STATEMENT_TIMEOUT_MS / 1000}s and was canceled (57014)`;
  if (code === '28P01' || code === '28000') return 'authentication failed';
  if (code === '3D000') return 'database does not exist';
  if (code === '57P01' || code === '57P03') return 'the server is shutting down or starting up';
  if (code === '25006') return `the server is read-only (a standby?) (25006): ${STANDBY_FIX}`;
  if (code === '53300') return tooManyConnections(msg, l);
  return msg.replace(/\/\/[^@\s]*@/g, '//***@');
}

/** Errors of the environment (the server, the network, the pooler), as opposed to errors of our
 * own statements (bugs, thrown as they are). */
/** Whether `err` is the server's answer to a statement (it carries a SQLSTATE). */
const sqlState = (err: unknown): boolean => /^[0-9A-Z]{5}$/.test((err as { code?: string } | null)?.code ?? '');

function environmental(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  if (!code || !/^[0-9A-Z]{5}$/.test(code)) return true; // a socket error, a driver timeout
  // (25P03: the server ended a session left idle in a transaction, a process stopped in it)
  return /^(08|57|53|28|3D)/.test(code) || code === '25006' || code === '25P03';
}

interface Target {
  url: string;
  where: string;
}

function makePool(t: Target, max: number, connectTimeoutMs: number, keepIdle = false): pg.Pool {
  const pool = new pg.Pool({
    connectionString: t.url,
    max,
    connectionTimeoutMillis: connectTimeoutMs,
    // the heartbeats' connection stays open while idle (a heartbeat every refresh interval must
    // not pay for a new connection); it never keeps the process alive on its own
    idleTimeoutMillis: keepIdle ? 0 : 10_000,
    allowExitOnIdle: keepIdle,
    keepAlive: true,
    keepAliveInitialDelayMillis: 5_000,
    // no statement_timeout startup parameter: PgBouncer refuses any it does not know
    query_timeout: QUERY_TIMEOUT_MS,
    application_name: 'routinely',
  });
  // An idle connection dropped by a restarting server must not crash the process; the next
  // query reports the problem.
  pool.on('error', ignore);
  return pool;
}

/** Whether a host is one to use: reachable, and (for read-write) not a standby. */
async function probeHost(t: Target, wantPrimary: boolean, l: Limits): Promise<true | DatabaseError> {
  const client = new pg.Client({
    connectionString: t.url,
    connectionTimeoutMillis: l.connectTimeoutMs,
    query_timeout: QUERY_TIMEOUT_MS,
    application_name: 'routinely',
  });
  client.on('error', ignore);
  try {
    await client.connect();
    if (!wantPrimary) return true;
    const { rows } = await client.query<{ standby: boolean }>(sessionSql.standby.text);
    return rows[0]?.standby ? new DatabaseError(`database ${t.where}: a read-only standby (pg_is_in_recovery)`) : true;
  } catch (err) {
    return dbError(t.where, err, l);
  } finally {
    await client.end().catch(ignore);
  }
}

export async function connect(url: string, opts: ConnectOptions = {}): Promise<Db> {
  const parsed = parsePgUrl(url);
  if (typeof parsed === 'string') throw new DatabaseError(`database URL ${redactPgUrl(url)}: ${parsed}`);
  const size = Math.max(1, opts.poolSize ?? DEFAULT_POOL_SIZE);
  // with one connection the heartbeats share it (one pool); else one is theirs
  const limits: Limits = {
    main: size === 1 ? 1 : size - 1,
    lease: size === 1 ? 0 : 1,
    connectTimeoutMs: parsed.connectTimeoutMs ?? defaultConnectTimeoutMs(opts.ttlMs ?? 60_000),
  };
  const idleMs = idleInTransactionMs(opts.ttlMs ?? 60_000);
  const newPools = (t: Target): [pg.Pool, pg.Pool] => {
    const main = makePool(t, limits.main, limits.connectTimeoutMs);
    return [main, limits.lease === 0 ? main : makePool(t, limits.lease, limits.connectTimeoutMs, true)];
  };
  const targets: Target[] = parsed.hosts.map((h) => ({
    url: singleHostUrl(parsed, h),
    where: describePgUrl({ ...parsed, hosts: [h] }),
  }));
  const where = describePgUrl(parsed);
  const wantPrimary = parsed.targetSessionAttrs === 'read-write' || parsed.targetSessionAttrs === 'primary';
  const several = targets.length > 1;

  /** libpq's rule: the hosts in order, the first that qualifies. */
  const choose = async (): Promise<Target> => {
    if (!several) return targets[0]!;
    const why: string[] = [];
    for (const t of targets) {
      const ok = await probeHost(t, wantPrimary, limits);
      if (ok === true) return t;
      why.push(ok.message.replace(/^database /, ''));
    }
    throw new DatabaseError(
      `database ${where}: no host ${wantPrimary ? 'is a reachable primary' : 'is reachable'} (${why.join('; ')})`,
      { neverConnected: true },
    );
  };

  let target = await choose();
  let [pool, leasePool] = newPools(target);
  let switching: Promise<void> | null = null;
  /** After a connection-class error with several hosts: choose again (a failover moves the
   * primary), for the next statement; the failed one is reported, never silently repeated. */
  const reselect = (): void => {
    if (!several || switching) return;
    switching = (async () => {
      try {
        const next = await choose();
        if (next.url !== target.url) {
          const old = new Set([pool, leasePool]);
          target = next;
          [pool, leasePool] = newPools(next);
          if (leasePool !== pool) warm(leasePool);
          for (const p of old) void p.end().catch(ignore);
        }
      } catch {
        // none qualifies now: the next statement fails and reports it, and chooses again
      } finally {
        switching = null;
      }
    })();
  };
  let prepare = true;
  const run = async (p: pg.Pool, { text, values, name }: Statement): Promise<pg.QueryResult> => {
    if (name === undefined || !prepare) return p.query(text, values);
    try {
      return await p.query({ name, text, values });
    } catch (err) {
      if (!lostPrepared(err)) throw err;
      prepare = false;
      return p.query(text, values);
    }
  };
  // The statement connections are taken in turn through a gate that lets a fire's way to its
  // start (claims, the pause flag, open markers) go before records: a burst of 1 000 routines
  // starts them all before recording the first ones, instead of one start per record.
  const gate = new PriorityGate(limits.main);
  const wrap = async <T>(
    fn: (p: pg.Pool) => Promise<T>,
    which: 'main' | 'lease' = 'main',
    urgent = false,
  ): Promise<T> => {
    if (switching) await switching;
    const gated = which === 'main' && leasePool !== pool;
    if (gated && !(await gate.enter(urgent, limits.connectTimeoutMs)))
      throw dbError(several ? target.where : where, new Error('timeout exceeded when trying to connect'), limits);
    try {
      return await fn(which === 'lease' ? leasePool : pool);
    } catch (err) {
      if (err instanceof DatabaseError) throw err;
      if (environmental(err)) {
        reselect();
        throw dbError(several ? target.where : where, err, limits);
      }
      // the server refused the statement (a role without a grant, a table gone): said with the
      // database and the server's words, exit 74, never an "unexpected error"
      if (sqlState(err)) throw new DatabaseStatementError(dbError(several ? target.where : where, err, limits).message);
      throw err;
    } finally {
      if (gated) gate.leave();
    }
  };
  const db: Db = {
    get where() {
      return several ? `${target.where} (of ${where})` : where;
    },
    query: (s) => wrap((p) => run(p, s), 'main', s.urgent === true),
    leaseQuery: (s) => wrap((p) => run(p, s), 'lease'),
    transaction: (fn, opts) =>
      wrap(
        async (p) => {
          const client = await p.connect();
          // A server going away while we hold the connection makes it emit 'error'; unhandled,
          // that would crash the process. The failing query reports the problem instead.
          client.on('error', ignore);
          let broken: unknown = undefined;
          const tx: TxClient = { query: (s) => client.query(s.text, s.values) };
          try {
            await tx.query(sessionSql.beginWithTimeout(STATEMENT_TIMEOUT_MS, idleMs));
            const result = await fn(tx);
            await tx.query(sessionSql.commit);
            return result;
          } catch (err) {
            broken = environmental(err) ? err : undefined;
            await tx.query(sessionSql.rollback).catch(() => {});
            throw err;
          } finally {
            client.off('error', ignore);
            // a connection that failed is not given back to the pool
            client.release(broken instanceof Error ? broken : undefined);
          }
        },
        'main',
        opts?.urgent === true,
      ),
    close: async () => {
      await Promise.all([...new Set([pool, leasePool])].map((p) => p.end().catch(ignore)));
    },
  };
  // the heartbeats' connection is opened now, beside the first statements: on a slow link a new
  // connection costs several round trips, which a lease's first heartbeat cannot wait for
  if (leasePool !== pool) warm(leasePool);
  await migrate(db);
  return db;
}

function warm(pool: pg.Pool): void {
  pool.connect().then((c) => c.release(), ignore);
}

const MIGRATION_LOCK = 727_001_133; // advisory lock key: two processes never migrate at once

/** Creates or upgrades the schema: every pending migration in one transaction, under a
 * transaction-scoped advisory lock (`pg_advisory_xact_lock`), so processes starting together
 * never race and nothing stays locked in a pooler's server connection after the transaction
 * (a session lock would, with transaction pooling). A standby is refused here, before anything
 * is asked of it: a lease cannot be kept on a server that cannot write. */
export async function migrate(db: Db): Promise<number> {
  const latest = MIGRATIONS.at(-1)?.version ?? 0;
  // Up to date (the usual case): no lock, no DDL, so a role that may only read and write data
  // works once the schema exists.
  const { rows: table } = await db.query<{ ok: boolean; standby: boolean }>(schemaSql.present);
  if (table[0]?.standby)
    throw new DatabaseError(
      `database ${db.where}: the server is a read-only standby (pg_is_in_recovery): ${STANDBY_FIX}`,
    );
  if (table[0]?.ok) {
    const { rows: have } = await db.query<{ v: number | null }>(schemaSql.version);
    if ((have[0]?.v ?? 0) >= latest) return latest;
  }
  try {
    return await db.transaction(async (client) => {
      await client.query(schemaSql.lock(MIGRATION_LOCK));
      await client.query(schemaSql.versions);
      const { rows } = await client.query<{ v: number | null }>(schemaSql.version);
      const current = rows[0]?.v ?? 0;
      for (const m of MIGRATIONS.filter((x) => x.version > current)) {
        await client.query(schemaSql.migration(m));
        await client.query(schemaSql.applied(m.version));
      }
      return latest;
    });
  } catch (err) {
    if (err instanceof DatabaseError) throw err;
    throw dbError(db.where, err);
  }
}
