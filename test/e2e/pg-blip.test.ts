// A database away for about a second as a tick comes (a restart, a failover's blip): every
// scheduler sends its claim again until the routine's next tick, so the tick fires late, once
// (SPEC §9, issue 50). Two schedulers on a server of the test's own, stopped and started.

import { describe, expect, it, onTestFinished } from 'vitest';
import { sleep, type Spawned } from '../helpers/cli.js';
import { pgCluster, sql } from '../helpers/pg-test.js';
import { destroyCluster, startCluster, startServer, stopServer } from '../helpers/postgres.js';
import { schedulers, stopAll } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

const until = async (ms: number): Promise<void> => sleep(Math.max(0, ms - Date.now()));

suite('a database blip as a tick comes', () => {
  it(
    'stopped 0.5 s before a tick and started 0.7 s after it: the tick fires once on each routine, late; the ticks around it once',
    { timeout: 120_000 },
    async () => {
      const own = await startCluster();
      onTestFinished(() => destroyCluster(own));
      const url = own.url;
      const ids = ['a', 'b', 'c', 'd'];
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        routines: ids.map((id) => ({
          id,
          schedule: '*/5 * * * * *',
          action: 'command',
          run: 'true',
          exclusive: false,
        })),
      });
      const all: Spawned[] = await schedulers(['h1', 'h2'], project, { ROUTINELY_DATABASE_URL: url }, 110_000);
      // a tick at least 7 s away (the one before it after the start), on the routines' 5-second grid
      const tick = Math.ceil((Date.now() + 7000) / 5000) * 5000;
      await until(tick - 500);
      stopServer(own, 'fast');
      await until(tick + 700);
      startServer(own);
      await until(tick + 5000 + 3000);
      const rows = await sql<{ routine: string; at: string; started: string; result: string }>(
        url,
        `SELECT routine, entry->>'scheduled_at' AS at, entry->>'started_at' AS started, entry->>'result' AS result FROM routinely_history`,
      );
      await stopAll(all);
      const said = all
        .map((s) =>
          s
            .stdout()
            .split('\n')
            .filter((l) => /warning|skipped|claim/.test(l))
            .slice(-12)
            .join('\n'),
        )
        .join('\n--\n');
      for (const id of ids) {
        for (const t of [tick - 5000, tick, tick + 5000]) {
          const fires = rows.filter((r) => r.routine === id && Date.parse(r.at) === t);
          expect(
            fires.map((f) => f.result),
            `${id} @ ${new Date(t).toISOString()}\n${said}`,
          ).toEqual(['success']);
        }
        // the blip's tick ran once the server was back
        const [late] = rows.filter((r) => r.routine === id && Date.parse(r.at) === tick);
        expect(Date.parse(late!.started), `${id} started late`).toBeGreaterThan(tick + 500);
      }
      expect(said).toMatch(/claims fail \(/);
      expect(said).toMatch(/claims go through again/);
    },
  );
});
