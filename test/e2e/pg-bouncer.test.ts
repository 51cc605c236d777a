// PostgreSQL behind PgBouncer with a stock ini (docs/postgres.md "Production topologies"):
// session and transaction pooling, prepared statements wherever the pooler sends them, the
// migration under concurrent first commands, and ten schedulers on the pool's 20 connections.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS } from '../../src/pg/schema.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import {
  dbUrl,
  haveBouncer,
  nextSecond,
  perSecond,
  schedulers,
  secondsAgo,
  startBouncer,
  stopAll,
  tickAccount,
} from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';
import { loadProject, openBackend } from '../../src/index.js';

const cluster = pgCluster();
const bouncerSuite = cluster && (haveBouncer || process.env.CI === 'true') ? describe : describe.skip;

bouncerSuite('PgBouncer with a stock ini', () => {
  it.each(['session', 'transaction'] as const)(
    "%s pooling: a lease's prepared statements, wherever the pooler sends them (in transaction mode the process goes on unnamed)",
    async (mode) => {
      expect(haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
      const direct = await freshDatabase(cluster!);
      const bouncer = await startBouncer(cluster!, mode);
      onTestFinished(() => bouncer.stop());
      const dir = testProject({
        project: 'app',
        backend: { type: 'postgres', url: dbUrl(bouncer.port, new URL(direct).pathname.slice(1)) },
      });
      const backend = await openBackend(loadProject({ cwd: dir }));
      onTestFinished(() => backend.close());
      // four keys at once from one process: its connections' statements reach many server connections
      const generations = await Promise.all(
        ['a', 'b', 'c', 'd'].map(async (key) => {
          const seen: number[] = [];
          for (let i = 0; i < 40; i++) {
            const r = await backend.lock.acquire(`k-${key}`, { command: 'test' }, { ifBusy: 'fail' });
            if (!r.ok) throw new Error(`k-${key}: ${r.reason} ${r.why}`);
            seen.push(r.lease.generation);
            expect((await r.lease.release()).released).toBe(true);
          }
          return seen;
        }),
      );
      for (const g of generations) expect(g).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    },
  );

  it.each(['session', 'transaction'] as const)(
    '%s pooling: 6 first commands at once migrate once; routine run, list and 3 schedulers fire each tick once',
    async (mode) => {
      expect(haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
      const direct = await freshDatabase(cluster!);
      const db = new URL(direct).pathname.slice(1);
      const bouncer = await startBouncer(cluster!, mode);
      onTestFinished(() => bouncer.stop());
      const url = dbUrl(bouncer.port, db);
      const ev = 'events';
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        routines: [
          {
            id: 'tick',
            schedule: '* * * * * *',
            action: 'command',
            run: `echo "S $(date +%s%N)" >> ${ev}; sleep 0.1; echo "E $(date +%s%N)" >> ${ev}`,
          },
          { id: 'once', schedule: '0 0 1 1 *', action: 'command', run: 'echo once' },
        ],
      });
      const env = { ROUTINELY_DATABASE_URL: url };
      const first = await Promise.all(
        Array.from({ length: 6 }, () =>
          runCli(['lock', 'run', '--if-busy', 'wait', '--', 'true'], { cwd: project, env }),
        ),
      );
      for (const r of first) expect(r.code, r.stderr).toBe(0);
      const versions = await sql<{ version: number }>(direct, 'SELECT version FROM routinely_schema ORDER BY version');
      expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((m) => m.version));
      // no advisory lock left behind in a pooled server connection
      expect(await sql(direct, `SELECT 1 FROM pg_locks WHERE locktype = 'advisory'`)).toHaveLength(0);
      expect((await runCli(['routine', 'run', 'once'], { cwd: project, env })).code).toBe(0);
      const list = await runCli(['routine', 'list'], { cwd: project, env });
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toMatch(/once .* ok /);

      const schedulers = ['h1', 'h2', 'h3'].map((h) =>
        startCli(['scheduler', 'start'], { cwd: project, env: { ...env, ROUTINELY_HOST_ID: h }, timeoutMs: 120_000 }),
      );
      for (const s of schedulers) await s.waitFor(/\[scheduler\] started/);
      await sleep(5000);
      for (const s of schedulers) s.child.kill('SIGTERM');
      for (const s of schedulers) expect((await s.exited).code, s.stderr()).toBe(0);
      const history = await sql<{ entry: { scheduled_at: string; result: string } }>(
        direct,
        `SELECT entry FROM routinely_history WHERE routine = 'tick'`,
      );
      const times = history.map((h) => h.entry.scheduled_at);
      expect(times.length).toBeGreaterThanOrEqual(3);
      expect(new Set(times).size, 'no tick recorded twice').toBe(times.length);
      // the commands never overlapped
      const lines = readFileSync(join(project, ev), 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '));
      let depth = 0;
      for (const [k] of lines) {
        depth += k === 'S' ? 1 : -1;
        expect(depth).toBeLessThanOrEqual(1);
      }
      for (const s of schedulers)
        expect(s.stderr()).not.toMatch(/unexpected error|unsupported startup parameter|timed out/);
    },
  );
});

bouncerSuite('PgBouncer in session mode, as deployed', () => {
  it(
    'stock ini: 10 schedulers x 20 per-second routines (backend.poolSize 2: 20 connections, its default_pool_size) record every tick exactly once; an 11th process is told the pool is exhausted',
    { timeout: 240_000 },
    async () => {
      expect(haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
      const direct = await freshDatabase(cluster!);
      const bouncer = await startBouncer(cluster!, 'session');
      onTestFinished(() => bouncer.stop());
      const { ids, routines } = perSecond(20);
      const project = testProject({ project: 'app', backend: { type: 'postgres' }, routines });
      const env = { ROUTINELY_DATABASE_URL: dbUrl(bouncer.port, new URL(direct).pathname.slice(1)) };
      expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project, env })).code).toBe(0); // the schema
      const all = await schedulers(
        Array.from({ length: 10 }, (_, i) => `h${i + 1}`),
        project,
        env,
        230_000,
      );
      const from = nextSecond();
      // every server connection of the pool is a scheduler's (PgBouncer opens them as the
      // schedulers' clients need them)
      const db = new URL(direct).pathname.slice(1);
      const serverConnections = async (): Promise<number> =>
        Number(
          (
            await sql<{ n: string }>(
              direct,
              `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
              [db],
            )
          )[0]!.n,
        );
      await eventually(
        async () => (await serverConnections()) >= 20,
        60_000,
        "the pool's 20 server connections in use",
      );
      await sleep(5000); // the fleet at work on a full pool
      // one more client waits in PgBouncer's queue, and is told that, not "timed out"
      const extra = await runCli(['lock', 'status'], { cwd: project, env, timeoutMs: 60_000 });
      expect(extra.code, extra.stderr).toBe(74);
      expect(extra.stderr).toMatch(
        /behind PgBouncer in session mode this is a wait in its queue for a server connection: its pool is exhausted/,
      );
      await sleep(2000);
      const to = secondsAgo(2);
      await stopAll(all);
      const a = await tickAccount(direct, ids, from, to);
      console.log(
        `session mode, 10 schedulers: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`,
      );
      expect(a, a.gaps.slice(0, 40).join(' ')).toMatchObject({ recorded: a.expected, twice: 0, claimedLost: 0 });
      for (const s of all) {
        expect(s.stdout()).not.toMatch(/lock lost|not started/);
        expect(s.stderr()).not.toMatch(/max_client_conn|timed out|exhausted|unexpected error/);
      }
    },
  );
});
