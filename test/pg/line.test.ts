// The waiting line on PostgreSQL (src/pg/line.ts): a waiter that gave up while the database was
// away a moment leaves no row behind that others would wait a TTL for (a fault pass: after a
// 1.5 s blip, ticks were skipped as "a waiter that came first takes it next" for a minute).

import { describe, expect, it, onTestFinished } from 'vitest';
import { DatabaseError } from '../../src/errors.js';
import { connect, type Db, type QueryAnswer, type Row } from '../../src/pg/connect.js';
import { pgWaitLine } from '../../src/pg/line.js';
import { lineSql, type Statement } from '../../src/pg/statements.js';
import { eventually } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started
const leaveText = lineSql.leave('app', 'db', 'x').text;

/** `db`, whose removals of a waiter fail while `away` says so (the database away a moment). */
function blinking(db: Db, away: () => boolean): Db {
  const query = async <R extends Row = Row>(s: Statement): Promise<QueryAnswer<R>> => {
    if (s.text === leaveText && away()) throw new DatabaseError('database: connection refused (ECONNREFUSED)');
    return db.query<R>(s);
  };
  return { ...db, query };
}

const rows = async (url: string): Promise<number> =>
  Number((await sql<{ n: string }>(url, 'SELECT count(*) AS n FROM routinely_line'))[0]!.n);

suite('the waiting line on PostgreSQL', () => {
  it('a waiter whose removal failed is removed once the database takes it again, not a TTL later; a look of its own process skips and removes it at once', async () => {
    const url = await freshDatabase(cluster!);
    const db = await connect(url);
    onTestFinished(() => db.close());
    let away = true;
    const line = pgWaitLine({ db: blinking(db, () => away), project: 'app', ttlMs: 60_000, refreshMs: 100 });
    const gone = await line.join('db', { command: 'lock run' });
    await gone.leave(); // the database away: the row stays for now
    expect(await rows(url)).toBe(1);
    // this process's own look: not one of its waiters any more
    const mine = await line.join('db', { command: 'lock run' });
    expect((await line.waiters('db')).map((w) => w.ticket)).toEqual([mine.ticket]);
    await mine.leave();
    // another line (as another process reads the table): the left row goes once the database is back
    away = false;
    await eventually(async () => (await rows(url)) === 0, 10_000, 'the left row removed');
    const other = pgWaitLine({ db, project: 'app', ttlMs: 60_000, refreshMs: 100 });
    expect(await other.waiters('db')).toEqual([]);
  });

  it("two line objects of one process (the library makes one a call) never take each other's waiters for left ones", async () => {
    const url = await freshDatabase(cluster!);
    const db = await connect(url);
    onTestFinished(() => db.close());
    const [a, b] = [1, 2].map(() => pgWaitLine({ db, project: 'app', ttlMs: 60_000, refreshMs: 100 }));
    const first = await a!.join('db', { command: 'lock run' });
    const second = await b!.join('db', { command: 'lock run' });
    expect((await b!.waiters('db')).map((w) => w.ticket)).toEqual([first.ticket, second.ticket]);
    expect((await a!.waiters('db')).map((w) => w.ticket)).toEqual([first.ticket, second.ticket]);
    await first.leave();
    await second.leave();
    expect(await rows(url)).toBe(0);
  });
});
