// The PostgreSQL backend against a real server (a throwaway cluster started for the run; see
// test/global-setup.ts). Under CI these tests fail, never skip, when no server can be started.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn, spawnSync } from 'node:child_process';
import { systemProbe } from '../../src/process/identity.js';
import { MIGRATIONS } from '../../src/pg/schema.js';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  FIXTURES,
  eventually,
  heartbeatWritten,
  processRuns,
  runCli,
  start,
  startCli,
  type Spawned,
} from '../helpers/cli.js';
import { freshDatabase, pgCluster, psqlScript, sql } from '../helpers/pg-test.js';
import { destroyCluster, startCluster, startServer, stopServer } from '../helpers/postgres.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

async function pgProject(config: object = {}): Promise<{ dir: string; url: string; env: Record<string, string> }> {
  const url = await freshDatabase(cluster!);
  const dir = testProject({ project: 'app', backend: { type: 'postgres' }, ...config });
  return { dir, url, env: { ROUTINELY_DATABASE_URL: url } };
}

const outcome = async (p: Spawned): Promise<{ won: boolean; generation?: number; reason?: string }> =>
  JSON.parse((await p.waitFor(/^\{"won".*\}$/m))[0]);

suite('PostgreSQL backend', () => {
  it('lock run, status (epoch, expiry by the database clock), exit codes, as with files', async () => {
    const { dir, env } = await pgProject({ lock: { ttlSeconds: 30 } });
    expect(await runCli(['lock', 'run', '--', 'sh', '-c', 'exit 3'], { cwd: dir, env })).toMatchObject({ code: 3 });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 30'], { cwd: dir, env });
    await holder.waitFor(/started/);
    const busy = await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env });
    expect(busy.code).toBe(75);
    expect(busy.stderr).toMatch(
      new RegExp(`^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago`),
    );
    expect(await runCli(['lock', 'run', '--if-busy', 'skip', '--', 'true'], { cwd: dir, env })).toMatchObject({
      code: 0,
      stdout: 'skipped: exec busy\n',
    });
    const status = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: dir, env })).stdout);
    expect(status).toMatchObject({ state: 'held', generation: 2, record: { owner: { pid: holder.pid } } });
    expect(status.path).toMatch(/^database 127\.0\.0\.1:\d+\/t_[0-9a-f]+, project app$/);
    expect(status.expires_in_s).toBeGreaterThan(0);
    holder.child.kill('SIGTERM');
    expect((await holder.exited).code).toBe(143);
    expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: dir, env })).stdout)).toMatchObject({
      state: 'free',
      generation: 2,
    });
  });

  it('4 processes x 40 contended cycles: no overlap, epochs strictly increasing', async () => {
    const { dir, env } = await pgProject();
    const log = join(dir, 'log');
    const barrier = join(dir, 'go');
    writeFileSync(log, '');
    const workers = Array.from({ length: 4 }, () =>
      start(join(FIXTURES, 'backend-worker.mjs'), [dir, '40', log, barrier], { env }),
    );
    await Promise.all(workers.map((w) => w.waitFor(/ready/))); // all connected: they race from the same start
    writeFileSync(barrier, '');
    expect((await Promise.all(workers.map((w) => w.exited))).map((c) => c.code)).toEqual([0, 0, 0, 0]);
    let open: string | null = null;
    let last = 0;
    let sections = 0;
    for (const line of readFileSync(log, 'utf8').trim().split('\n')) {
      const [k, pid, gen] = line.split(' ');
      if (k === 'S') {
        expect(open).toBeNull();
        open = pid!;
        expect(Number(gen)).toBeGreaterThan(last);
        last = Number(gen);
      } else {
        expect(open).toBe(pid);
        open = null;
        sections++;
      }
    }
    expect(sections).toBe(160);
  });

  it('8 processes meeting one expired lease at once: exactly one winner', async () => {
    for (let round = 0; round < 3; round++) {
      const { dir, url, env } = await pgProject();
      // a lease of a dead holder on another host, expired by the database clock
      await runCli(['lock', 'status'], { cwd: dir, env }); // creates the schema
      await sql(
        url,
        `INSERT INTO routinely_leases (project, key, lock_id, epoch, owner, created_at, heartbeat_at, expires_at)
        VALUES ('app', 'exec-run', 'old', 7, '{"pid": 1, "host": "elsewhere", "boot_id": null, "start_time": null, "command": "exec run"}', now(), now(), now() - interval '1 second')`,
      );
      const barrier = join(dir, 'go');
      const racers = Array.from({ length: 8 }, () =>
        start(join(FIXTURES, 'backend-holder.mjs'), [dir, 'fail', '2000', barrier], { env }),
      );
      await Promise.all(racers.map((r) => r.waitFor(/"ready"/)));
      writeFileSync(barrier, '');
      const outcomes = await Promise.all(racers.map(outcome));
      expect(
        outcomes.filter((o) => o.won),
        JSON.stringify(outcomes),
      ).toEqual([{ won: true, generation: 8 }]);
      await Promise.all(racers.map((r) => r.exited));
    }
  });

  it('a killed holder: reclaimed at once on its own host, only after expiry from another host', async () => {
    // a TTL that outlasts a loaded machine's start of the next command (with 2 s, the remote
    // holder's lease expired once before the busy check below had started)
    const { dir, env } = await pgProject({ lock: { ttlSeconds: 8 } });
    const local = startCli(['lock', 'run', '--', 'sh', '-c', 'echo "child $$"; sleep 60'], { cwd: dir, env });
    const child = Number((await local.waitFor(/child (\d+)/))[1]);
    // the child is recorded in the lease row (what the reclaimer ends)
    await expect
      .poll(
        async () =>
          JSON.parse(
            (await runCli(['lock', 'status', '--json'], { cwd: dir, env })).stdout,
          ).record?.owner?.children?.map((c: { pid: number }) => c.pid),
        { timeout: 10_000 },
      )
      .toContain(child);
    local.child.kill('SIGKILL');
    await local.exited;
    expect(await runCli(['lock', 'run', '--', 'echo', 'at once'], { cwd: dir, env })).toMatchObject({
      code: 0,
      stdout: 'at once\n',
    });
    await eventually(() => !processRuns(child), 5000, 'orphan ended');

    const remote = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 60'], {
      cwd: dir,
      env: { ...env, ROUTINELY_HOST_ID: 'other-host' },
    });
    await remote.waitFor(/started/);
    remote.child.kill('SIGKILL');
    await remote.exited;
    // its pid is dead here, but it is another host's pid: only expiry counts
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env })).code).toBe(75);
    expect(
      await runCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '20', '--', 'echo', 'after expiry'], {
        cwd: dir,
        env,
      }),
    ).toMatchObject({ code: 0, stdout: 'after expiry\n' });
  });

  it("SIGSTOP past expiry: the old holder's writes are refused by epoch; its run ends ABORTED / LOCK_LOST", async () => {
    const { dir, url, env } = await pgProject({
      lock: { ttlSeconds: 2 },
      exec: { tasks: [{ id: 'long', run: 'echo "pid $$" > long.pid; sleep 60' }] },
    });
    const p = startCli(['exec', 'run'], { cwd: dir, env });
    await eventually(
      () => {
        try {
          return readFileSync(join(dir, 'long.pid'), 'utf8').includes('pid');
        } catch {
          return false;
        }
      },
      10_000,
      'task started',
    );
    process.kill(p.pid, 'SIGSTOP');
    const thief = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo took-over; sleep 2'], {
      cwd: dir,
      env,
    });
    await thief.waitFor(/took-over/);
    const epoch = (
      await sql<{ epoch: string }>(url, `SELECT epoch FROM routinely_leases WHERE project = 'app' AND key = 'exec-run'`)
    )[0]!.epoch;
    const before = await sql<{ snapshot: unknown; generation: string }>(
      url,
      'SELECT snapshot, generation FROM routinely_runs',
    );
    const eventsBefore = await sql<{ seq: string }>(url, 'SELECT seq FROM routinely_run_events');
    process.kill(p.pid, 'SIGCONT');
    expect((await p.exited).code, p.stdout() + p.stderr()).toBe(1);
    expect(p.stdout()).toMatch(/ABORTED/);
    // the old holder's fenced writes never landed: the snapshot is untouched, and its only new
    // event is the unfenced ABORTED record, under its old (lower) epoch
    expect(await sql(url, 'SELECT snapshot, generation FROM routinely_runs')).toEqual(before);
    const added = await sql<{ gen: string; event: { type: string; status: string; why_code: string } }>(
      url,
      'SELECT gen, event FROM routinely_run_events WHERE seq > $1 ORDER BY seq',
      [eventsBefore.at(-1)?.seq ?? 0],
    );
    expect(added.map((a) => a.event)).toEqual([
      expect.objectContaining({ type: 'run-finished', status: 'ABORTED', why_code: 'LOCK_LOST' }),
    ]);
    expect(Number(added[0]!.gen)).toBeLessThan(Number(epoch));
    expect((await thief.exited).code).toBe(0);
    // exec resume (the same as with files) finishes the run
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({ project: 'app', backend: { type: 'postgres' }, exec: { tasks: [{ id: 'long', run: 'true' }] } }),
    );
    const resumed = await runCli(['exec', 'resume', '--json'], { cwd: dir, env });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'SUCCEEDED', attempt: 2 });
  });

  it('two schedulers on two hosts: each per-second tick fires exactly once; killing one, the other goes on', async () => {
    const { dir, url, env } = await pgProject({
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'echo tick' }],
    });
    const h1 = startCli(['scheduler', 'start'], { cwd: dir, env: { ...env, ROUTINELY_HOST_ID: 'h1' } });
    const h2 = startCli(['scheduler', 'start'], { cwd: dir, env: { ...env, ROUTINELY_HOST_ID: 'h2' } });
    await Promise.all([h1.waitFor(/\[scheduler\] started/), h2.waitFor(/\[scheduler\] started/)]);
    const recorded = async (): Promise<number> =>
      Number(
        (await sql<{ n: string }>(url, `SELECT count(*) AS n FROM routinely_history WHERE routine = 'tick'`))[0]!.n,
      );
    // waits for what it needs, not for a time: some ticks with both up, then two with h2 alone
    await expect.poll(recorded, { timeout: 60_000, interval: 200 }).toBeGreaterThanOrEqual(4);
    h1.child.kill('SIGKILL');
    await h1.exited;
    const killedAt = Date.now();
    const lateTicks = async (): Promise<number> =>
      Number(
        (
          await sql<{ n: string }>(
            url,
            `SELECT count(*) AS n FROM routinely_ticks WHERE routine = 'tick' AND scheduled_at > to_timestamp($1)`,
            [(killedAt + 1000) / 1000],
          )
        )[0]!.n,
      );
    await expect.poll(lateTicks, { timeout: 60_000, interval: 200 }).toBeGreaterThanOrEqual(2);
    h2.child.kill('SIGTERM');
    expect((await h2.exited).code).toBe(0);
    const ticks = await sql<{ scheduled_at: Date; host: string }>(
      url,
      `SELECT scheduled_at, host FROM routinely_ticks WHERE routine = 'tick' ORDER BY scheduled_at`,
    );
    const history = await sql<{ entry: { scheduled_at: string; result: string } }>(
      url,
      `SELECT entry FROM routinely_history WHERE routine = 'tick'`,
    );
    const times = history.map((h) => h.entry.scheduled_at);
    expect(new Set(times).size, 'no tick recorded twice').toBe(times.length);
    // which scheduler wins a tick is a race (on a loaded machine one may win every one of them);
    // that both share the ticks is shown by the rolling restarts in pg-fleet.test.ts
    for (const t of ticks) expect(['h1', 'h2']).toContain(t.host);
    // after the kill, h2 alone fired
    const late = ticks.filter((t) => t.scheduled_at.getTime() > killedAt + 1000);
    expect(late.every((t) => t.host === 'h2')).toBe(true);
    // each scheduler logs only the ticks it claimed: a tick fired by the other is not a skip,
    // so every logged fire or skip across both logs is one distinct recorded tick
    const logged = `${h1.stdout()}${h2.stdout()}`.match(/\[routine\] (succeeded|failed|skipped) tick/g) ?? [];
    // (h1 may have been killed between logging a fire and recording it: at most one such)
    expect([0, 1]).toContain(logged.length - times.length);
    const state = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: dir, env })).stdout) as {
      counts: { success: number; failure: number; skipped: number };
    }[];
    const c = state[0]!.counts;
    expect(c.success + c.failure + c.skipped).toBe(times.length);
  });

  it('the database restarting mid-run: clear errors, no corrupt state, firing resumes when it is back', async () => {
    // its own server: restarting the shared one would disturb the other test files
    const own = await startCluster();
    onTestFinished(() => destroyCluster(own));
    const url = await freshDatabase(own);
    const env = { ROUTINELY_DATABASE_URL: url };
    const dir = testProject({
      project: 'app',
      backend: { type: 'postgres' },
      lock: { ttlSeconds: 3 },
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: dir, env });
    await s.waitFor(/succeeded tick/);
    stopServer(own, 'fast');
    try {
      // its claims fail, and are sent again until each tick's next (issue 50)
      await s.waitFor(
        /\[scheduler\] warning: (?:tick: |claims fail \()database 127\.0\.0\.1:\d+\/t_[0-9a-f]+: (connection refused|the server is shutting down)/,
        15_000,
      );
    } finally {
      startServer(own);
    }
    const n = (await sql<{ n: string }>(url, `SELECT count(*) AS n FROM routinely_history WHERE routine = 'tick'`))[0]!
      .n;
    await eventually(() => (s.stdout().match(/succeeded tick/g) ?? []).length > Number(n) + 1, 20_000, 'fires again');
    expect(s.child.exitCode, `the scheduler stayed up through the outage: ${s.stderr()}`).toBeNull();
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(s.stdout()).not.toMatch(/password/);
    const list = await runCli(['routine', 'list', '--json'], { cwd: dir, env });
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)[0].counts.success).toBeGreaterThan(Number(n));
  });

  it('a holder that cannot reach the database stops its command once its lease runs out', async () => {
    const own = await startCluster();
    onTestFinished(() => destroyCluster(own));
    const url = await freshDatabase(own);
    const dir = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: 2 } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo "child $$"; sleep 60'], {
      cwd: dir,
      env: { ROUTINELY_DATABASE_URL: url },
    });
    const child = Number((await holder.waitFor(/child (\d+)/))[1]);
    stopServer(own, 'fast');
    try {
      expect((await holder.exited).code).toBe(1);
      expect(holder.stderr()).toMatch(/lock lost: .*(TTL|database)/);
      await eventually(() => !processRuns(child), 5000, 'command stopped');
    } finally {
      startServer(own);
    }
  });

  it('a command that ignores SIGTERM is SIGKILLed before its lease expires, when the database is gone (SPEC §4.14)', async () => {
    const own = await startCluster();
    onTestFinished(() => destroyCluster(own));
    const url = await freshDatabase(own);
    const dir = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: 2 } });
    const marks = join(dir, 'marks');
    const holder = startCli(
      [
        'lock',
        'run',
        '--',
        'bash',
        '-c',
        `trap '' TERM; echo up; while :; do echo "$EPOCHREALTIME" >> '${marks}'; sleep 0.02; done`,
      ],
      {
        cwd: dir,
        env: { ROUTINELY_DATABASE_URL: url },
      },
    );
    await holder.waitFor(/up/);
    await heartbeatWritten(dir, { ROUTINELY_DATABASE_URL: url }); // at least one heartbeat of its timer
    stopServer(own, 'fast');
    try {
      expect((await holder.exited).code).toBe(1);
      expect(holder.stderr()).toMatch(/lock lost: no successful heartbeat/);
      // with what the heartbeats met: the database, named (a fault pass: the cause was not said)
      expect(holder.stderr()).toMatch(/; last error: database \S+: /);
    } finally {
      startServer(own);
    }
    const [row] = await sql<{ expires: number }>(
      url,
      `SELECT extract(epoch from expires_at)::float8 AS expires FROM routinely_leases WHERE key = 'exec-run'`,
    );
    const last = Math.max(...readFileSync(marks, 'utf8').trim().split('\n').map(Number));
    expect(last, `the command still ran ${(last - row!.expires).toFixed(3)}s after the lease expired`).toBeLessThan(
      row!.expires,
    );
  });

  it('rows are input (SPEC §12): a path-shaped lock_id deletes nothing, children named in a row are never signalled, a path-shaped run or task id writes nothing outside', async () => {
    const { dir, url, env } = await pgProject({ exec: { tasks: [{ id: 't', run: 'true' }] } });
    expect((await runCli(['lock', 'status'], { cwd: dir, env })).code).toBe(0); // migrates
    const victimDir = mkdtempSync(join(tmpdir(), 'routinely-victim-'));
    onTestFinished(() => rmSync(victimDir, { recursive: true, force: true }));
    writeFileSync(join(victimDir, 'victim'), 'keep');
    const sleeper = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => {
      try {
        process.kill(-sleeper.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    const info = systemProbe().inspect(sleeper.pid!);
    const probe = systemProbe();
    const deadOwner = {
      pid: Number(spawnSync('sh', ['-c', 'echo $$']).stdout.toString().trim()),
      host: probe.host,
      boot_id: probe.bootId,
      start_time: '1',
      command: 'exec run',
      children: [{ pid: sleeper.pid, start_time: info.state === 'alive' ? info.startTime : null }],
    };
    const lockId = `x/../../../../..${victimDir}/victim`;
    await sql(
      url,
      `INSERT INTO routinely_leases (project, key, lock_id, epoch, owner, created_at, heartbeat_at, expires_at)
      VALUES ('app', 'exec-run', $1, 7, $2::jsonb, now(), now(), now() + interval '60 seconds')`,
      [lockId, JSON.stringify(deadOwner)],
    );
    const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo gen $ROUTINELY_LOCK_GENERATION'], { cwd: dir, env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/gen 8/);
    expect(readFileSync(join(victimDir, 'victim'), 'utf8')).toBe('keep');
    expect(processRuns(sleeper.pid!)).toBe(true);
    // run rows whose ids are paths
    const snap = (runId: string, task: string) =>
      JSON.stringify({
        version: 1,
        run_id: runId,
        status: 'INTERRUPTED',
        command: 'exec run',
        routine: null,
        generation: 1,
        lock_id: 'a'.repeat(32),
        owner: { pid: 1, host: 'elsewhere', boot_id: null, start_time: null },
        attempt: 1,
        parallel: 1,
        created_at: 'c',
        updated_at: 'c',
        finished_at: null,
        tasks: {
          [task]: {
            status: 'interrupted',
            provider: 'default',
            attempts: 1,
            started_at: null,
            finished_at: null,
            duration_ms: null,
            exit_code: null,
            signal: null,
            log: 'x.log',
            hash: 'h',
          },
        },
      });
    const escape = `../../../../..${victimDir}/out`;
    await sql(
      url,
      `INSERT INTO routinely_runs (project, run_id, snapshot, generation) VALUES ('app', $1, $2::jsonb, 1)`,
      [escape, snap(escape, 't')],
    );
    await sql(
      url,
      `INSERT INTO routinely_runs (project, run_id, snapshot, generation) VALUES ('app', 'r-20990101T000000Z-0001', $1::jsonb, 1)`,
      [snap(escape, 't')],
    );
    await sql(
      url,
      `INSERT INTO routinely_runs (project, run_id, snapshot, generation) VALUES ('app', 'r-20990101T000000Z-0002', $1::jsonb, 1)`,
      [snap('r-20990101T000000Z-0002', escape)],
    );
    const resume = await runCli(['exec', 'resume'], { cwd: dir, env });
    expect(resume.stderr).not.toMatch(/unexpected error/);
    const runs = await runCli(['exec', 'runs', '--json'], { cwd: dir, env });
    const listed = JSON.parse(runs.stdout) as { run_id: string; status: string }[];
    expect(listed.filter((x) => x.run_id.startsWith('r-2099')).map((x) => x.status)).toEqual([
      'UNREADABLE',
      'UNREADABLE',
    ]);
    expect(listed.some((x) => x.run_id.includes('..'))).toBe(false);
    expect(existsSync(join(victimDir, 'out'))).toBe(false);
    const show = await runCli(['exec', 'resume', 'r-20990101T000000Z-0002'], { cwd: dir, env });
    expect(show.code).not.toBe(0);
    expect(show.stderr).toMatch(/unreadable/);
    expect(existsSync(join(victimDir, 'out'))).toBe(false);
  });

  it("a row's times never make a live holder on this host stale (SPEC §4.4): expires_at set into the past by a database writer takes nothing over, ends nothing", async () => {
    const { dir, url, env } = await pgProject({ lock: { ttlSeconds: 60 } });
    const marks = join(dir, 'marks');
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', `echo started; sleep 4; echo done > ${marks}`], {
      cwd: dir,
      env,
    });
    await holder.waitFor(/started/);
    psqlScript(
      url,
      `UPDATE routinely_leases SET expires_at = now() - interval '1 hour', heartbeat_at = now() - interval '2 hours' WHERE key = 'exec-run';`,
    );
    const next = await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env });
    expect(next.code, next.stderr).toBe(75);
    expect(next.stderr).toMatch(new RegExp(`exec busy: held by pid ${holder.pid} `));
    expect((await holder.exited).code, holder.stderr()).toBe(0);
    expect(holder.stderr()).not.toMatch(/lock lost/);
    expect(readFileSync(marks, 'utf8')).toBe('done\n');
  });

  it('history and state rows are input (SPEC §12): rows that are no fire record, or 30 MB ones, are skipped with a word; the others are shown', async () => {
    const routine = (id: string) => ({ id, schedule: '0 0 1 1 *', action: 'command', run: `echo ${id}` });
    const { dir, url, env } = await pgProject({ routines: [routine('r1'), routine('r2')] });
    for (const id of ['r1', 'r2']) expect((await runCli(['routine', 'run', id], { cwd: dir, env })).code).toBe(0);
    const fire = (reason: string) =>
      JSON.stringify({
        scheduled_at: '2026-01-01T00:00:00.000Z',
        started_at: '2026-01-01T00:00:00.000Z',
        finished_at: '2026-01-01T00:00:01.000Z',
        result: 'failure',
        reason,
        exit_code: 1,
        run_id: null,
      });
    const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;
    psqlScript(
      url,
      [
        ...[
          '[1,2,3]',
          '"just a string"',
          '{"scheduled_at": 5, "result": "success"}',
          fire('x').replace('"failure"', '"maybe"'),
          fire('x'.repeat(30 * 1024 * 1024)),
        ].map(
          (entry) => `INSERT INTO routinely_history (project, routine, entry) VALUES ('app', 'r1', ${quote(entry)});`,
        ),
        `UPDATE routinely_routine_state SET record = '[1,2,3]' WHERE project = 'app' AND routine = 'r2';`,
      ].join('\n'),
    );
    // bad rows take no place of good ones: the newest one is the real fire
    const newest = await runCli(['routine', 'history', 'r1', '--limit', '1', '--json'], { cwd: dir, env });
    expect(newest.code, newest.stderr).toBe(0);
    expect((JSON.parse(newest.stdout) as { result: string }[]).map((f) => f.result)).toEqual(['success']);
    const history = await runCli(['routine', 'history', 'r1', '--json'], { cwd: dir, env });
    expect(history.code, history.stderr).toBe(0);
    expect(history.stderr).toMatch(
      /5 history rows of routine r1 of project app are not a fire's record \(or over 64 KiB\) and were skipped/,
    );
    const shown = JSON.parse(history.stdout) as Record<string, unknown>[];
    expect(shown.map((f) => f.result)).toEqual(['success']);
    expect(history.stdout.length).toBeLessThan(10_000);
    const text = await runCli(['routine', 'history'], { cwd: dir, env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).not.toMatch(/unexpected error/);
    expect(text.stdout).toMatch(/r1 .*ok/);
    // one routine's unreadable state is that routine's alone: r1's last run is still shown
    const list = await runCli(['routine', 'list', '--json'], { cwd: dir, env });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stderr).toMatch(/the state of routine r2 of project app is not a routine's record/);
    const rows = JSON.parse(list.stdout) as { id: string; last_result: string | null }[];
    expect(rows.find((r) => r.id === 'r1')?.last_result).toBe('success');
    expect(rows.find((r) => r.id === 'r2')?.last_result).toBe(null);
    // the next record of r2 writes its row anew
    expect((await runCli(['routine', 'run', 'r2'], { cwd: dir, env })).code).toBe(0);
    const again = await runCli(['routine', 'list', '--json'], { cwd: dir, env });
    expect(again.stderr).not.toMatch(/not a routine's record/);
    expect(
      (JSON.parse(again.stdout) as { id: string; last_result: string | null }[]).find((r) => r.id === 'r2')
        ?.last_result,
    ).toBe('success');
  });

  it('lease rows out of range (SPEC §12): an epoch of 2^63−1 or past 10^15 is refused with the row named and the fix, never "bigint out of range"; a large one in range stays exact; an owner that is not one is judged by the database clock', async () => {
    const { dir, url, env } = await pgProject();
    const first = await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env });
    expect(first.code, first.stderr).toBe(0);
    for (const epoch of ['9223372036854775807', '9007199254740993', '1000000000000001']) {
      psqlScript(url, `UPDATE routinely_leases SET epoch = ${epoch} WHERE project = 'app' AND key = 'exec-run';`);
      for (const args of [
        ['lock', 'run', '--', 'true'],
        ['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '60', '--', 'true'],
        ['lock', 'break'],
      ]) {
        const r = await runCli(args, { cwd: dir, env });
        expect(r.code, `${epoch} ${args.join(' ')}: ${r.stderr}`).toBe(74);
        expect(r.stderr).toContain(`routinely_leases row (project app, key exec-run) in database`);
        expect(r.stderr).toContain(`has epoch ${epoch}, outside the generations routinely writes`);
        expect(r.stderr).toContain(`DELETE FROM routinely_leases WHERE project = 'app' AND key = 'exec-run'`);
        expect(r.stderr).not.toMatch(/out of range for type|bigint out of range|unexpected error/);
      }
      // shown as what it is (one bad key breaks no view)
      const status = await runCli(['lock', 'status'], { cwd: dir, env });
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain(`exec-run lock: stale (routinely_leases row (project app, key exec-run)`);
      expect(status.stdout).toMatch(/holder: +a database row routinely does not act on/);
    }
    // the last generation is handed out, and then the key says so
    psqlScript(url, `UPDATE routinely_leases SET epoch = 999999999999999 WHERE project = 'app' AND key = 'exec-run';`);
    const last = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo gen $ROUTINELY_LOCK_GENERATION'], {
      cwd: dir,
      env,
    });
    expect(last.code, last.stderr).toBe(0);
    expect(last.stdout).toContain('gen 1000000000000000');
    const after = await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env });
    expect(after.code, after.stderr).toBe(74);
    expect(after.stderr).toContain(
      'has epoch 1000000000000000, the last generation routinely hands out exactly; the key cannot be taken again',
    );
    expect((await runCli(['lock', 'status'], { cwd: dir, env })).stdout).toMatch(/generation: +1000000000000000/);
    psqlScript(url, `UPDATE routinely_leases SET epoch = 999999999999990 WHERE project = 'app' AND key = 'exec-run';`);
    const exact = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo gen $ROUTINELY_LOCK_GENERATION'], {
      cwd: dir,
      env,
    });
    expect(exact.code, exact.stderr).toBe(0);
    expect(exact.stdout).toContain('gen 999999999999991');
    expect(
      psqlScript(url, `SELECT epoch FROM routinely_leases WHERE project = 'app' AND key = 'exec-run';`).trim(),
    ).toBe('999999999999991');
    // an owner that is not one names no process: judged by the database clock alone, then taken
    for (const owner of ['null', '[1,2,3]', '{"pid": "a", "host": {"x": 1}}']) {
      psqlScript(
        url,
        `UPDATE routinely_leases SET owner = '${owner}', released_at = NULL, expires_at = now() + interval '1 hour' WHERE project = 'app' AND key = 'exec-run';`,
      );
      const held = await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env });
      expect(held.code, `${owner}: ${held.stderr}`).toBe(75);
      expect(held.stderr).toContain('exec busy: held by pid 0 on ? (an owner in the database row that is not one)');
      const status = await runCli(['lock', 'status'], { cwd: dir, env });
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).not.toMatch(/undefined|\[object/);
      psqlScript(
        url,
        `UPDATE routinely_leases SET expires_at = now() - interval '1 second' WHERE project = 'app' AND key = 'exec-run';`,
      );
      const taken = await runCli(['lock', 'run', '--', 'true'], { cwd: dir, env });
      expect(taken.code, `${owner}: ${taken.stderr}`).toBe(0);
    }
  });

  it('migrations: processes starting together on an empty database never race', async () => {
    const { dir, url, env } = await pgProject();
    const all = await Promise.all(Array.from({ length: 6 }, () => runCli(['lock', 'status'], { cwd: dir, env })));
    expect(all.map((r) => r.code)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(await sql(url, 'SELECT version FROM routinely_schema ORDER BY version')).toEqual(
      MIGRATIONS.map((m) => ({ version: m.version })),
    );
  });

  it('migrations: a database at version 1 (before the phases table) is brought to the latest by the next command, its records kept', async () => {
    const { dir, url, env } = await pgProject({
      routines: [{ id: 'once', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
    });
    expect((await runCli(['routine', 'run', 'once'], { cwd: dir, env })).code).toBe(0);
    // as a database left by a routinely of schema version 1 is
    psqlScript(
      url,
      'DROP TABLE routinely_phases; DROP TABLE routinely_line; DROP INDEX routinely_ticks_age; DELETE FROM routinely_schema WHERE version > 1;',
    );
    const list = await runCli(['routine', 'list', '--json'], { cwd: dir, env });
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([{ id: 'once', counts: { success: 1 }, phase: null }]);
    expect(await sql(url, 'SELECT version FROM routinely_schema ORDER BY version')).toEqual(
      MIGRATIONS.map((m) => ({ version: m.version })),
    );
    expect(await sql(url, `SELECT count(*)::int AS n FROM routinely_phases`)).toEqual([{ n: 0 }]);
    expect(await sql(url, `SELECT count(*)::int AS n FROM routinely_line`)).toEqual([{ n: 0 }]);
  });

  it('connection problems: exit 2 for a bad URL, 74 for an unreachable server (the command never ran), host named, password never shown', async () => {
    const dir = testProject({ project: 'app', backend: { type: 'postgres' } });
    const bad = await runCli(['lock', 'status'], { cwd: dir, env: { ROUTINELY_DATABASE_URL: 'http://u:hunter2@h/d' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/ROUTINELY_DATABASE_URL: "http:\/\/u:\*\*\*@h\/d": not a postgres:\/\/ URL/);
    // a libpq parameter routinely cannot honour: refused by name before anything runs (2)
    const unhonoured = await runCli(['lock', 'run', '--', 'true'], {
      cwd: dir,
      env: { ROUTINELY_DATABASE_URL: 'postgres://u:hunter2@h/d?tcp_user_timeout=1000' },
    });
    expect(unhonoured.code, unhonoured.stderr).toBe(2);
    expect(unhonoured.stderr).toMatch(
      /ROUTINELY_DATABASE_URL: "postgres:\/\/u:\*\*\*@h\/d\?tcp_user_timeout=1000": parameter tcp_user_timeout is not honoured by routinely/,
    );
    const down = await runCli(['exec', 'run'], {
      cwd: dir,
      env: { ROUTINELY_DATABASE_URL: 'postgres://u:hunter2@127.0.0.1:1/db' },
    });
    expect(down.code).toBe(74);
    expect(down.stderr).toMatch(/database 127\.0\.0\.1:1\/db: connection refused/);
    const marker = join(dir, 'ran');
    const locked = await runCli(['lock', 'run', '--', 'sh', '-c', `touch ${marker}`], {
      cwd: dir,
      env: { ROUTINELY_DATABASE_URL: 'postgres://u:hunter2@127.0.0.1:1/db' },
    });
    expect(locked.code, locked.stderr).toBe(74);
    expect(locked.stderr).toMatch(/database 127\.0\.0\.1:1\/db: connection refused/);
    expect(locked.stderr).not.toMatch(/unexpected error|hunter2/);
    expect(existsSync(marker)).toBe(false);
    expect(`${bad.stderr}${down.stderr}`).not.toContain('hunter2');
    const missing = await runCli(['lock', 'status'], { cwd: dir, env: { ROUTINELY_DATABASE_URL: undefined } });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/the postgres backend needs a database URL/);
    const noName = testProject({ backend: { type: 'postgres', url: 'postgres://x@127.0.0.1:1/d' } });
    const r = await runCli(['validate'], { cwd: noName });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/project: is required with the postgres backend/);
  });

  it.each([
    [
      'a space in the password, and a bad port',
      'postgres://rtn:S3cr tPIECE1x@127.0.0.1:99999/db',
      2,
      /": port 99999 is out of range/,
    ],
    [
      'an "@" in a ?password= parameter',
      'postgres://rtn@127.0.0.1:1/db?password=ab@cdPIECE2&sslmode=disable',
      74,
      /database 127\.0\.0\.1:1\/db: connection refused/,
    ],
    [
      'a quote and a "#" in the password',
      'postgres://rtn:a"b#cPIECE3z@127.0.0.1:1/db',
      74,
      /database 127\.0\.0\.1:1\/db: connection refused/,
    ],
    [
      'a password piece where a host would be',
      'postgres://u:pa@PIECE4host/x@127.0.0.1:1/db',
      74,
      /database 127\.0\.0\.1:1\/db: connection refused/,
    ],
  ])('%s: never shown, never looked up as a host (SPEC §12)', async (_name, url, code, said) => {
    const dir = testProject({ project: 'app', backend: { type: 'postgres' } });
    const r = await runCli(['lock', 'status'], { cwd: dir, env: { ROUTINELY_DATABASE_URL: url } });
    expect(r.code, r.stderr).toBe(code);
    expect(r.stderr).toMatch(said);
    expect(r.stderr).not.toMatch(/PIECE|ENOTFOUND|unknown host/);
  });
});
