// Forgetting old claims (issue 50, item 4): with a day of claims in the table, a prune finds the
// old ones through routinely_ticks_age (never a scan of every claim of the project), removes at
// most a batch, and keeps every claim younger than a day.

import { describe, expect, it } from 'vitest';
import { routineSql, PRUNE_BATCH } from '../../src/pg/statements.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

suite('forgetting claims older than a day', () => {
  it(
    'a day and a half of 20 per-second routines (2.6 M claims): the prune reads through its index, takes one batch, keeps the young',
    { timeout: 240_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const project = testProject({ project: 'app', backend: { type: 'postgres' } });
      expect(
        (await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: { ROUTINELY_DATABASE_URL: url } })).code,
      ).toBe(0);
      // 20 routines x one claim a second, for 36 hours back from now; another project's too
      await sql(
        url,
        `INSERT INTO routinely_ticks (project, routine, scheduled_at, host)
      SELECT p, 'r' || r, date_trunc('second', now()) - s * interval '1 second', 'h1'
      FROM generate_series(0, 129599) s, generate_series(1, 20) r, (VALUES ('app'), ('other')) v(p)
      WHERE p = 'app' OR s % 100 = 0`,
      );
      await sql(url, 'ANALYZE routinely_ticks');
      const prune = routineSql.forgetOldTicks('app');
      const plan = JSON.stringify(await sql(url, `EXPLAIN (FORMAT JSON) ${prune.text}`, prune.values as unknown[]));
      expect(plan).toContain('routinely_ticks_age');
      const count = async (where: string): Promise<number> =>
        (await sql<{ n: number }>(url, `SELECT count(*)::int AS n FROM routinely_ticks WHERE ${where}`))[0]!.n;
      // fixed times (now() moves on while the test runs): well past a day, and well within it
      const [{ old, fresh }] = (await sql<{ old: string; fresh: string }>(
        url,
        `SELECT (now() - interval '25 hours')::text AS old, (now() - interval '23 hours')::text AS fresh`,
      )) as [{ old: string; fresh: string }];
      const oldBefore = await count(`project = 'app' AND scheduled_at < '${old}'`);
      const young = await count(`project = 'app' AND scheduled_at >= '${fresh}'`);
      const others = await count(`project = 'other'`);
      const removed = (await sql(
        url,
        `WITH d AS (${prune.text} RETURNING 1) SELECT count(*)::int AS n FROM d`,
        prune.values as unknown[],
      )) as { n: number }[];
      expect(removed[0]!.n).toBe(PRUNE_BATCH);
      // the oldest went first
      expect(await count(`project = 'app' AND scheduled_at < '${old}'`)).toBe(oldBefore - PRUNE_BATCH);
      expect(await count(`project = 'app' AND scheduled_at >= '${fresh}'`)).toBe(young);
      expect(await count(`project = 'other'`)).toBe(others);
    },
  );
});
