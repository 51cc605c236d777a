// The database lease's own clock around its acquire: a process stopped (SIGSTOP) between timing
// its acquire and sending it gets a grant its own clock counts as past its give-up point. It is
// taken again at once under a new lock id and generation, not handed out lost (red once in a
// fresh-clone run of e2e/lock-line: the stopped waiter, continued, took the lock and lost it at
// once), and not kept under the pair a waiter may have judged stale (a second read: a reclaim
// decided on it would have landed beside this holder).

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemClock, type Clock } from '../../src/clock.js';
import { connect, type Db, type QueryAnswer, type Row } from '../../src/pg/connect.js';
import { pgLockBackend } from '../../src/pg/lease.js';
import { leaseSql, type Statement } from '../../src/pg/statements.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';

const cluster = pgCluster();
const grant = { project: '', key: '', lockId: '', owner: '', ttlSecs: 1, maxGeneration: 1 };
const acquireText = leaseSql.acquire(grant).text;
const reclaimText = leaseSql.reclaim({
  ...grant,
  stale: { lockId: '', epoch: 1 },
  dead: true,
  timeline: 1,
  floor: 0,
}).text;
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

/** The system clock, set `jumpMs` ahead when the statement of text `which` is sent: the
 * process was stopped between reading its clock and sending it. */
function stoppedBeforeSending(
  db: Db,
  which: string,
  jumpMs: number,
): { db: Db; clock: Clock; granted: () => { lock_id: string; epoch: string } | null } {
  let ahead = 0;
  let done = false;
  let granted: { lock_id: string; epoch: string } | null = null;
  const clock: Clock = { ...systemClock, monotonic: () => systemClock.monotonic() + ahead };
  const sending = (s: Statement): Statement => {
    if (!done && s.text === which) {
      done = true;
      ahead += jumpMs;
    }
    return s;
  };
  // the row that statement granted (the pair a waiter could have judged stale)
  const query = async <R extends Row = Row>(s: Statement): Promise<QueryAnswer<R>> => {
    const first = !done && s.text === which;
    const answer = await db.query<R>(sending(s));
    if (first && answer.rows[0]?.lock_id) granted = answer.rows[0] as unknown as { lock_id: string; epoch: string };
    return answer;
  };
  return {
    db: { ...db, query, leaseQuery: (s) => db.leaseQuery(sending(s)) },
    clock,
    granted: () => granted,
  };
}

suite('the database lease, stopped between timing its acquire and sending it', () => {
  it.each([
    ['free', false],
    ['stale (its holder dead)', true],
  ])(
    'a key %s: the grant is taken again under a new lock id and generation, the old pair no longer reclaimable; the lease holds',
    async (_what, stale) => {
      const url = await freshDatabase(cluster!);
      const db = await connect(url);
      onTestFinished(() => db.close());
      const o = { project: 'app', lockDir: mkdtempSync(join(tmpdir(), 'rl-pglease-')), ttlMs: 4000, refreshMs: 1000 };
      if (stale) {
        const first = await pgLockBackend({ ...o, db }).acquire('db', { command: 'lock run' });
        expect(first.ok).toBe(true);
        // its holder is gone: a pid above Linux's pid_max (2^22) on this host never existed
        await sql(url, `UPDATE routinely_leases SET owner = (owner::jsonb || '{"pid": 4194305}')::json`);
      }
      const s = stoppedBeforeSending(db, stale ? reclaimText : acquireText, 6000);
      const backend = pgLockBackend({ ...o, db: s.db, clock: s.clock });
      const r = await backend.acquire('db', { command: 'lock run' });
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      onTestFinished(async () => void (await r.lease.release()));
      expect(r.lease.tookOver).toBe(stale);
      expect(r.lease.verify()).toEqual({ ok: true });
      expect(r.lease.lost).toBeNull();
      // a reclaim decided on the pair first granted (by a waiter that judged it stale) takes nothing
      const first = s.granted()!;
      expect(first).not.toBeNull();
      expect(r.lease.lockId).not.toBe(first.lock_id);
      expect(r.lease.generation).toBeGreaterThan(Number(first.epoch));
      const late = await db.query(
        leaseSql.reclaim({
          project: 'app',
          key: 'db',
          lockId: 'f'.repeat(32),
          owner: JSON.stringify({ pid: 4194306 }),
          ttlSecs: 4,
          maxGeneration: Number.MAX_SAFE_INTEGER,
          stale: { lockId: first.lock_id, epoch: first.epoch },
          dead: true,
          timeline: 1,
          floor: 0,
        }),
      );
      expect(late.rows).toEqual([]);
      expect(r.lease.verify()).toEqual({ ok: true });
    },
  );
});
