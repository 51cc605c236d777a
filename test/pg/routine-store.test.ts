// The database routine store's `routine history` query (recentFires) against what its history()
// holds, filtered and sorted here: the same fires for every query, from the same kept rows. And a
// record sent again (the spool) that another scheduler's interrupted record of its fire preceded.

import { describe, expect, it, onTestFinished } from 'vitest';
import { connect } from '../../src/pg/connect.js';
import { pgRoutineStore } from '../../src/pg/routine-store.js';
import { withKey, type FireQuery } from '../../src/state/store.js';
import type { HistoryEntry } from '../../src/state/history.js';
import type { Fire, OpenFire } from '../../src/state/routine-state.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { rng } from '../helpers/rng.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started
const RESULTS = ['success', 'failure', 'skipped'] as const;
const byTime = (x: HistoryEntry, y: HistoryEntry): number =>
  Date.parse(x.scheduled_at) - Date.parse(y.scheduled_at) || Date.parse(x.started_at) - Date.parse(y.started_at);

suite('the database store: recentFires', () => {
  it('selects what history() holds, for 60 random queries (fixed seed), the kept rows only', async () => {
    const db = await connect(await freshDatabase(cluster!));
    onTestFinished(() => db.close());
    const historyLines = 25;
    const store = pgRoutineStore(db, 'app', historyLines);
    const random = rng(1201);
    const t0 = Date.UTC(2026, 10, 1);
    const ids = ['a', 'b', 'c'];
    for (const id of ids) {
      for (let k = 0; k < 40; k++) {
        const at = t0 + Math.floor(random() * 3_600_000);
        const iso = (ms: number): string => new Date(ms).toISOString();
        const fire: Fire = {
          result: RESULTS[Math.floor(random() * 3)]!,
          reason: null,
          scheduled_at: iso(at),
          started_at: iso(at + 3),
          finished_at: iso(at + 900),
          duration_ms: 897,
          exit_code: 0,
          run_id: null,
          key: `${id}${k}`,
        };
        await store.recordFire(id, fire, () => {});
      }
    }
    // what the queries are compared with: the kept rows of every routine (none would make every
    // comparison below one of empty lists)
    for (const id of ids)
      expect(
        (await store.history(id)).map((e) => e.key),
        `history of ${id}`,
      ).toEqual(Array.from({ length: historyLines }, () => expect.stringMatching(new RegExp(`^${id}\\d+$`))));
    let compared = 0; // rounds whose expected answer has fires in it
    for (let round = 0; round < 60; round++) {
      const pick = (): number => t0 + Math.floor(random() * 3_600_000);
      const [a, b] = [pick(), pick()].sort((x, y) => x - y);
      const q: FireQuery = {
        limit: random() < 0.2 ? Infinity : 1 + Math.floor(random() * 30),
        since: random() < 0.5 ? -Infinity : a!,
        until: random() < 0.5 ? Infinity : b!,
        ...(random() < 0.3 ? { result: RESULTS[Math.floor(random() * 3)] } : {}),
      };
      const routines = ids.filter(() => random() < 0.7);
      const whole = (
        await Promise.all(
          routines.map(async (routine) => (await store.history(routine)).map((e) => ({ routine, ...e }))),
        )
      )
        .flat()
        .filter(
          (e) =>
            Date.parse(e.scheduled_at) >= q.since &&
            Date.parse(e.scheduled_at) < q.until &&
            (q.result === undefined || e.result === q.result),
        )
        .sort(byTime);
      const expected = Number.isFinite(q.limit) ? whole.slice(-q.limit) : whole;
      expect(
        await store.recentFires(routines, q, () => {}),
        `round ${round}: ${JSON.stringify(q)} of ${routines.join(',')}`,
      ).toEqual(expected);
      if (expected.length > 0) compared++;
    }
    expect(compared, 'rounds that compared a non-empty answer').toBeGreaterThanOrEqual(45);
  });
});

suite('the database store: a record sent again', () => {
  it('a spooled result whose fire another scheduler recorded interrupted meanwhile is said, not stored; the same record sent twice is stored once, silently', async () => {
    const db = await connect(await freshDatabase(cluster!));
    onTestFinished(() => db.close());
    const store = pgRoutineStore(db, 'app', 100);
    const iso = (ms: number): string => new Date(ms).toISOString();
    const t0 = Date.UTC(2026, 10, 1);
    const open = (id: string): OpenFire => ({
      id,
      scheduled_at: iso(t0),
      started_at: iso(t0 + 5),
      run_id: null,
      trigger: 'schedule',
      owner: { pid: 4242, host: 'h1', boot_id: null, start_time: null, claimer: 'gone' },
    });
    // as the recorder and the spool send it (withKey): a record that closes a fire has no key
    const result = (closes: string): Fire =>
      withKey({
        result: 'success',
        reason: null,
        scheduled_at: iso(t0),
        started_at: iso(t0 + 5),
        finished_at: iso(t0 + 900),
        duration_ms: 895,
        exit_code: 0,
        run_id: null,
        closes,
      });
    const warnings: string[] = [];
    const warn = (m: string): void => void warnings.push(m);
    // h1's fire, recorded interrupted by another scheduler (its lease ran out), then h1's spool
    await store.openFire('x', open('m1'), warn);
    expect(await store.reconcile((o) => o.claimer === 'gone', warn)).toBe(1);
    // the interrupted record sent again (two reconcilers at once): the same, silently
    expect(await store.reconcile(() => true, warn)).toBe(0);
    await store.recordFire('x', result('m1'), warn, { again: true });
    expect(warnings).toEqual([
      'x: not recorded (success): another scheduler recorded this fire already, as interrupted (this one was judged gone: its lease ran out)',
    ]);
    expect((await store.history('x')).map((e) => [e.result, e.reason?.startsWith('interrupted')])).toEqual([
      ['failure', true],
    ]);
    // a record whose answer was lost, sent again: stored once, nothing said
    await store.openFire('y', open('m2'), warn);
    await store.recordFire('y', result('m2'), warn);
    await store.recordFire('y', result('m2'), warn, { again: true });
    expect(warnings).toHaveLength(1);
    expect((await store.history('y')).map((e) => e.result)).toEqual(['success']);
  });
});
