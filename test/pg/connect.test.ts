import { describe, expect, it, onTestFinished } from 'vitest';
import { DatabaseError } from '../../src/errors.js';
import { connect, dbError } from '../../src/pg/connect.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';

const msg = (err: object): string => dbError('db:5432/app', err).message;

describe('database errors name their real cause', () => {
  it('a parameter a pooler refuses is not a timeout', () => {
    expect(msg({ code: '08P01', message: 'unsupported startup parameter: statement_timeout' })).toBe(
      'database db:5432/app: unsupported startup parameter: statement_timeout (08P01)',
    );
  });

  it('a wait for our own pool is not the database timing out; each timeout says which', () => {
    const limits = { main: 3, lease: 1, connectTimeoutMs: 15_000 };
    expect(dbError('db:5432/app', new Error('timeout exceeded when trying to connect'), limits).message).toBe(
      "database db:5432/app: this process's connection pool is exhausted: its 3 connections stayed busy for 15s (a wait inside this process, not for the database; raise backend.poolSize)",
    );
    expect(
      dbError('db:5432/app', new Error('Connection terminated due to connection timeout'), limits).message,
    ).toMatch(/timed out connecting \(no answer within 15s; set connect_timeout=N in the URL for a slower link\)/);
    expect(msg(new Error('Query read timeout'))).toMatch(
      /no answer within 17s \(timed out; behind PgBouncer in session mode this is a wait in its queue for a server connection: its pool is exhausted/,
    );
    expect(msg({ code: '57014', message: 'canceling statement due to statement timeout' })).toMatch(
      /ran past 15s and was canceled \(57014\)/,
    );
  });

  it('PgBouncer at its limits says which limit, and what one process takes of it', () => {
    const limits = { main: 1, lease: 1, connectTimeoutMs: 30_000 };
    expect(
      dbError('db:6432/app', { code: '08P01', message: 'no more connections allowed (max_client_conn)' }, limits)
        .message,
    ).toBe(
      'database db:6432/app: PgBouncer refused the connection: its max_client_conn is reached (raise it, or lower backend.poolSize: each routinely process opens up to 2 connections (backend.poolSize)) (08P01)',
    );
    expect(dbError('db:6432/app', { code: '08P01', message: 'query_wait_timeout' }, limits).message).toMatch(
      /^database db:6432\/app: PgBouncer's pool is exhausted: the statement waited query_wait_timeout for a server connection/,
    );
    expect(
      dbError('db:5432/app', { code: '53300', message: 'sorry, too many clients already' }, limits).message,
    ).toMatch(/raise max_connections .*; each routinely process opens up to 2 connections \(backend.poolSize\)/);
  });

  it('a read-only server says how to reach the primary', () => {
    expect(msg({ code: '25006', message: 'cannot execute INSERT in a read-only transaction' })).toMatch(
      /the server is read-only \(a standby\?\) \(25006\): point the URL at the primary, or list every host with target_session_attrs=read-write/,
    );
  });

  it('never the password', () => {
    expect(msg(new Error('could not connect to postgres://app:hunter2@db/app'))).not.toContain('hunter2');
  });
});

const cluster = pgCluster();
const withServer = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

withServer('with a server', () => {
  it("a transaction whose process stopped inside it (idle on the server) is ended by the server: its locks hold no other process up past the idle time-out, and its own next statement fails as the database's", async () => {
    const url = await freshDatabase(cluster!);
    // TTL 6 s: the server ends a transaction idle for 5 s (half the TTL, at least 5 s)
    const [stalled, other] = [await connect(url, { ttlMs: 6_000 }), await connect(url, { ttlMs: 6_000 })];
    onTestFinished(() => Promise.all([stalled.close(), other.close()]).then(() => {}));
    let locked!: () => void;
    const held = new Promise<void>((r) => (locked = r));
    const stall = stalled.transaction(async (tx) => {
      await tx.query({ text: 'LOCK TABLE routinely_line IN ACCESS EXCLUSIVE MODE' });
      locked();
      // as a process stopped here: nothing more is sent (longer than the statement time-out)
      await new Promise((r) => setTimeout(r, 20_000));
      await tx.query({ text: 'SELECT 1' });
    });
    const stallFailed = stall.then(
      () => null,
      (err: unknown) => err,
    );
    await held;
    // behind the lock until the server ends the idle transaction, not past the 15 s statement
    // time-out (57014) that would fail it
    const { rows } = await other.query<{ n: string }>({ text: 'SELECT count(*) AS n FROM routinely_line' });
    expect(rows[0]!.n).toBe('0');
    const err = await stallFailed;
    expect(err).toBeInstanceOf(DatabaseError);
    expect((err as Error).message).toMatch(/^database \S+: /);
  }, 60_000);

  it('a statement the server refuses (a role without a grant on a table) is a database error naming it, not an unexpected one', async () => {
    const url = await freshDatabase(cluster!);
    await (await connect(url)).close(); // the schema made by its owner
    const role = `ro_${Math.random().toString(16).slice(2, 10)}`;
    await sql(url, `CREATE ROLE ${role} LOGIN PASSWORD 'pw-${role}'`);
    const as = new URL(url);
    as.username = role;
    as.password = `pw-${role}`;
    const err = await connect(as.toString()).then(
      (db) => db.close().then(() => null),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DatabaseError);
    expect((err as Error).message).toMatch(/^database \S+: permission denied for table routinely_schema \(42501\)$/);
    expect((err as Error).message).not.toContain(`pw-${role}`);
  });
});
