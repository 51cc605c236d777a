// The connection to the database backend: a small pool with TCP keepalives and statement
// timeouts, so a dead host or a stuck server is noticed in seconds and a lease is judged by its
// expiry, never by a TCP timeout of hours (FACTS: default tcp_keepalives_idle is 2 h). Errors
// name the host and never the password.

import pg from 'pg';
import { redactUrl } from '../config/load.js';
import { DatabaseError } from '../errors.js';
import { MIGRATIONS } from './schema.js';

export interface Db {
  pool: pg.Pool;
  /** host:port/database, for messages. */
  where: string;
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Runs `fn` in a transaction on one connection. */
  transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const ignore = (): void => {};

const CONNECT_TIMEOUT_MS = 5_000;
const POOL_SIZE = 4;
const STATEMENT_TIMEOUT_MS = 15_000;

function describe(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || 5432}${u.pathname}`;
  } catch {
    return redactUrl(url);
  }
}

/** The server refused a connection at its limit (53300): say what to do, not only that. */
function tooManyConnections(message: string): string {
  const fix = /for (role|database)/.test(message)
    ? `raise its CONNECTION LIMIT (ALTER ${message.includes('for role') ? 'ROLE' : 'DATABASE'} … CONNECTION LIMIT n)`
    : 'raise max_connections on the server, or put a pooler in session mode in front of it (e.g. PgBouncer with pool_mode = session)';
  return `${message} (53300): ${fix}; each routinely process opens up to ${POOL_SIZE} connections`;
}

/** A connection problem as a person reads it; never the password. */
export function dbError(where: string, err: unknown): DatabaseError {
  const e = err as { code?: string; message?: string };
  const reason =
    e.code === 'ECONNREFUSED' ? 'connection refused' :
    e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN' ? 'unknown host' :
    e.code === 'ETIMEDOUT' || /timeout/i.test(e.message ?? '') ? 'timed out' :
    e.code === '28P01' || e.code === '28000' ? 'authentication failed' :
    e.code === '3D000' ? 'database does not exist' :
    e.code === '57P01' || e.code === '57P03' ? 'the server is shutting down or starting up' :
    e.code === '53300' ? tooManyConnections(e.message ?? 'too many clients') :
    (e.message ?? String(err)).replace(/\/\/[^@\s]*@/g, '//***@');
  return new DatabaseError(`database ${where}: ${reason}${e.code && !reason.includes(e.code) ? ` (${e.code})` : ''}`);
}

export async function connect(url: string): Promise<Db> {
  const where = describe(url);
  const pool = new pg.Pool({
    connectionString: url,
    max: POOL_SIZE,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 10_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 5_000,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    query_timeout: STATEMENT_TIMEOUT_MS + 2_000,
    application_name: 'routinely',
  });
  // An idle connection dropped by a restarting server must not crash the process; the next
  // query reports the problem.
  pool.on('error', ignore);
  const wrap = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof DatabaseError) throw err;
      const code = (err as { code?: string }).code;
      // SQL errors of our own statements are bugs, connection errors are the environment's
      if (code && /^[0-9A-Z]{5}$/.test(code) && !/^(08|57|53|28|3D)/.test(code)) throw err;
      throw dbError(where, err);
    }
  };
  const db: Db = {
    pool,
    where,
    query: (text, values) => wrap(() => pool.query(text, values)),
    transaction: (fn) =>
      wrap(async () => {
        const client = await pool.connect();
        // A server going away while we hold the connection makes it emit 'error'; unhandled,
        // that would crash the process. The failing query reports the problem instead.
        client.on('error', ignore);
        try {
          await client.query('BEGIN');
          const result = await fn(client);
          await client.query('COMMIT');
          return result;
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw err;
        } finally {
          client.off('error', ignore);
          client.release();
        }
      }),
    close: () => pool.end().catch(() => {}),
  };
  await migrate(db);
  return db;
}

const MIGRATION_LOCK = 727_001_133; // pg_advisory_lock key: two processes never migrate at once

/** Creates or upgrades the schema: versioned migrations, each in its own transaction, under a
 * session advisory lock so processes starting together never race. */
export async function migrate(db: Db): Promise<number> {
  const latest = MIGRATIONS.at(-1)?.version ?? 0;
  // Up to date (the usual case): no lock, no DDL, so a role that may only read and write data
  // works once the schema exists.
  const { rows: table } = await db.query<{ ok: boolean }>(`SELECT to_regclass('routinely_schema') IS NOT NULL AS ok`);
  if (table[0]?.ok) {
    const { rows: have } = await db.query<{ v: number | null }>('SELECT max(version) AS v FROM routinely_schema');
    if ((have[0]?.v ?? 0) >= latest) return latest;
  }
  const client = await db.pool.connect().catch((err: unknown) => {
    throw dbError(db.where, err);
  });
  client.on('error', ignore);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS routinely_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM routinely_schema');
    const current = rows[0]?.v ?? 0;
    for (const m of MIGRATIONS.filter((x) => x.version > current)) {
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO routinely_schema (version) VALUES ($1)', [m.version]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    }
    return MIGRATIONS.at(-1)?.version ?? 0;
  } catch (err) {
    if (err instanceof DatabaseError) throw err;
    throw dbError(db.where, err);
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    client.off('error', ignore);
    client.release();
  }
}
