// A database outage while a fire runs (SPEC §6, docs/postgres.md "Outages"): the fire that ran is
// spooled on the host and recorded once, with its real result, when the database is back. Each
// test stops PostgreSQL, so each starts its own cluster (never the shared one).

import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import { destroyCluster, startCluster, startServer, stopServer, type TestCluster } from '../helpers/postgres.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

async function ownServer(): Promise<{ own: TestCluster; url: string }> {
  const own = await startCluster();
  onTestFinished(() => destroyCluster(own));
  return { own, url: await freshDatabase(own) };
}

const spoolFiles = (dir: string): string[] =>
  existsSync(join(dir, '.routinely', 'spool')) ? readdirSync(join(dir, '.routinely', 'spool')) : [];

/** `routine run` of a 2 s routine whose database stops while it runs (started again once the run
 * has ended): its record is spooled on this host. */
async function runThroughOutage() {
  const { own, url } = await ownServer();
  const env = { ROUTINELY_DATABASE_URL: url };
  const dir = testProject({
    project: 'app',
    backend: { type: 'postgres' },
    lock: { ttlSeconds: 30 },
    routines: [{ id: 'slow', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 2; echo ok' }],
  });
  const run = startCli(['routine', 'run', 'slow'], { cwd: dir, env });
  await run.waitFor(/started slow/);
  stopServer(own, 'fast');
  let done;
  try {
    done = await run.exited;
  } finally {
    startServer(own);
  }
  return { url, env, dir, run, done };
}

interface Entry {
  scheduled_at: string;
  started_at: string;
  result: string;
  reason: string | null;
  run_id: string | null;
}

suite('a database outage while a fire runs', () => {
  it('scheduler: the fire is recorded exactly once with its real result when the database is back; counts add up', async () => {
    const { own, url } = await ownServer();
    const env = { ROUTINELY_DATABASE_URL: url };
    const dir = testProject({
      project: 'app',
      backend: { type: 'postgres' },
      lock: { ttlSeconds: 30 },
      routines: [{ id: 'slow', schedule: '*/5 * * * * *', action: 'command', run: 'sleep 2; echo ok' }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: dir, env, timeoutMs: 90_000 });
    await s.waitFor(/\[routine\] started slow/, 20_000);
    stopServer(own, 'fast');
    try {
      await s.waitFor(
        /could not record slow now \(database .*\); spooled to \S+\/spool\/slow\.[0-9a-f]{16}\.json/,
        20_000,
      );
      expect(spoolFiles(dir)).toHaveLength(1);
    } finally {
      startServer(own);
    }
    await s.waitFor(/database back: recorded 1 spooled fire/, 45_000);
    expect(spoolFiles(dir)).toEqual([]);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    const history = (
      await sql<{ entry: Entry }>(
        url,
        `SELECT entry FROM routinely_history WHERE routine = 'slow' ORDER BY entry->>'started_at'`,
      )
    ).map((r) => r.entry);
    // the fire that ran through the outage: its real result, not "interrupted"
    expect(history[0]).toMatchObject({ result: 'success', reason: null, run_id: expect.stringMatching(/^r-/) });
    expect(history.filter((h) => /interrupted/.test(h.reason ?? ''))).toEqual([]);
    // exactly once: every fire the scheduler logged is one row, no scheduled time twice
    const logged = s.stdout().match(/\[routine\] (succeeded|failed|skipped) slow/g) ?? [];
    expect(history).toHaveLength(logged.length);
    expect(new Set(history.map((h) => h.scheduled_at)).size).toBe(history.length);
    const list = await runCli(['routine', 'list', '--json'], { cwd: dir, env });
    const row = JSON.parse(list.stdout)[0] as {
      counts: { success: number; failure: number; skipped: number };
      open_fires?: unknown;
    };
    expect(row.counts.success + row.counts.failure + row.counts.skipped).toBe(history.length);
    expect(row.counts.success).toBe(history.filter((h) => h.result === 'success').length);
    expect(row.open_fires).toBeUndefined();
    // no claim is left attributed to this host without a fire
    const ticks = await sql<{ scheduled_at: Date }>(
      url,
      `SELECT scheduled_at FROM routinely_ticks WHERE routine = 'slow'`,
    );
    expect(ticks.map((t) => t.scheduled_at.toISOString()).sort()).toEqual(history.map((h) => h.scheduled_at).sort());
  });

  it("routine run: exits with the command's result, spools the record, and the next routine command on the host records it once", async () => {
    const { env, dir, run, done } = await runThroughOutage();
    expect(done.code, run.stderr()).toBe(0);
    expect(run.stdout()).toMatch(/succeeded slow in \d/);
    expect(run.stderr()).toMatch(
      /could not record slow now \(database .*\); spooled to \S+\/spool\/slow\.[0-9a-f]{16}\.json: the next scheduler or routine command on this host records it/,
    );
    expect(spoolFiles(dir)).toHaveLength(1);
    const list = await runCli(['routine', 'list', '--json'], { cwd: dir, env });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stderr).toMatch(/recorded 1 fire spooled on this host while the database was away/);
    expect(JSON.parse(list.stdout)[0]).toMatchObject({
      last_result: 'success',
      counts: { success: 1, failure: 0, skipped: 0 },
    });
    expect(spoolFiles(dir)).toEqual([]);
    // a second command finds nothing more to record
    const again = await runCli(['routine', 'history', 'slow', '--json'], { cwd: dir, env });
    expect(again.stderr).toBe('');
    const history = JSON.parse(again.stdout) as Entry[];
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ result: 'success', trigger: 'manual', run_id: expect.stringMatching(/^r-/) });
  });

  it('serve: a host that only watches records what its commands spooled (at start, then every 30 s)', async () => {
    const { url, env, dir, run, done } = await runThroughOutage();
    expect(done.code, run.stderr()).toBe(0);
    expect(spoolFiles(dir)).toHaveLength(1);
    const serve = startCli(['serve', '--http', '127.0.0.1:0'], { cwd: dir, env, timeoutMs: 60_000 });
    await serve.waitFor(/database back: recorded 1 spooled fire/, 30_000);
    expect(spoolFiles(dir)).toEqual([]);
    serve.child.kill('SIGTERM');
    expect((await serve.exited).code).toBe(0);
    const history = await sql<{ entry: Entry }>(url, `SELECT entry FROM routinely_history WHERE routine = 'slow'`);
    expect(history.map((h) => h.entry)).toEqual([expect.objectContaining({ result: 'success', trigger: 'manual' })]);
  });

  it('scheduler: the exec lock its fire could not release during the outage is released once the database is back, not after the TTL', async () => {
    const { own, url } = await ownServer();
    const env = { ROUTINELY_DATABASE_URL: url };
    // a TTL far longer than the test: only a release can free the lock in time
    const dir = testProject({
      project: 'app',
      backend: { type: 'postgres' },
      lock: { ttlSeconds: 300 },
      routines: [{ id: 'slow', schedule: '*/5 * * * * *', action: 'command', run: 'sleep 2' }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: dir, env, timeoutMs: 120_000 });
    onTestFinished(() => void s.child.kill('SIGKILL'));
    await s.waitFor(/\[routine\] started slow/, 20_000);
    const [held] = await sql<{ epoch: string }>(
      url,
      `SELECT epoch FROM routinely_leases WHERE key = 'exec-run' AND released_at IS NULL`,
    );
    expect(held).toBeDefined();
    stopServer(own, 'fast');
    try {
      await s.waitFor(/spooled to/, 20_000);
    } finally {
      startServer(own);
    }
    // said with its cause and the database, not an error class
    const said = s.stdout() + s.stderr();
    expect(said).toMatch(/exec lock not released: could not release it \(database [^ ]+\/[^ ]+: [^)]/);
    expect(said).not.toMatch(/\(DATABASE\)/);
    // a TTL of 300 s: without a release the row stays ours for minutes; 60 s is ample for one
    const deadline = Date.now() + 60_000;
    for (;;) {
      const [row] = await sql<{ epoch: string; released: boolean }>(
        url,
        `SELECT epoch, released_at IS NOT NULL AS released FROM routinely_leases WHERE key = 'exec-run'`,
      ).catch(() => []);
      if (row && (row.released || Number(row.epoch) > Number(held!.epoch))) break;
      if (Date.now() > deadline) throw new Error(`the outage fire's lease was never released\n${s.stdout()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });
});
