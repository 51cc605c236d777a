// The database routine store's `routine history` query (recentFires) against what its history()
// holds, filtered and sorted here: the same fires for every query, from the same kept rows.

import { describe, expect, it, onTestFinished } from 'vitest';
import { connect } from '../../src/pg/connect.js';
import { pgRoutineStore } from '../../src/pg/routine-store.js';
import type { FireQuery } from '../../src/state/store.js';
import type { HistoryEntry } from '../../src/state/history.js';
import type { Fire } from '../../src/state/routine-state.js';
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
