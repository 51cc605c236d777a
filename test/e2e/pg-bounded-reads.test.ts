// Bounded database reads (SPEC §12): 200 000 history rows of one routine, written straight into
// the table, make no view read them all. The scheduler's memory stays where it was while
// /api/history is asked ten times, and the answer holds the routine's strip.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

const rssMb = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

suite('200 000 history rows (SPEC §12: bounded reads)', () => {
  it(
    '/api/history and routine history read at most retention.historyLines rows; the scheduler does not grow',
    { timeout: 120_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const env = { ROUTINELY_DATABASE_URL: url };
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        routines: [{ id: 'big', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
      });
      const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env, timeoutMs: 115_000 });
      const base = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
      await s.waitFor(/\[scheduler\] started/);
      await sql(
        url,
        `INSERT INTO routinely_history (project, routine, entry)
      SELECT 'app', 'big', json_build_object('scheduled_at', to_char(timestamptz '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'started_at', to_char(timestamptz '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'finished_at', to_char(timestamptz '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'result', 'success', 'reason', null, 'exit_code', 0, 'run_id', 'r-' || i)
      FROM generate_series(1, 200000) i`,
      );
      const before = rssMb(s.pid);
      for (let i = 0; i < 10; i++) {
        const h = await httpGet(`${base}api/history`);
        expect(h.status).toBe(200);
        const body = JSON.parse(h.body) as Record<string, { results: { run_id: string }[] }>;
        expect(body.big!.results).toHaveLength(30);
        expect(body.big!.results.at(-1)!.run_id).toBe('r-200000');
      }
      const after = rssMb(s.pid);
      expect(after - before, `RSS ${before.toFixed(0)} MB → ${after.toFixed(0)} MB`).toBeLessThan(60);
      const { runCli } = await import('../helpers/cli.js');
      const hist = await runCli(['routine', 'history', 'big', '--json'], { cwd: project, env });
      expect(hist.code, hist.stderr).toBe(0);
      expect((JSON.parse(hist.stdout) as unknown[]).length).toBeLessThanOrEqual(1000);
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
    },
  );
});
