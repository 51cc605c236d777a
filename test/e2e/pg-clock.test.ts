// Hosts whose clocks disagree (issue 15), against a real PostgreSQL server: schedulers and exec
// commands run with their host clock shifted by libfaketime (Debian package `faketime`), and
// everything other hosts see — ticks, history times, run ids, which run is the latest — must
// follow the database clock. Under CI these tests fail, never skip, when a tool is missing.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const FAKETIME_LIB = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
].find((p) => existsSync(p));
if (!FAKETIME_LIB && process.env.CI === 'true')
  throw new Error('CI=true but libfaketime is missing (Debian package "faketime")');
const suite = cluster && FAKETIME_LIB ? describe : describe.skip; // skipped only outside CI

/** The environment of a process whose host clock is `skewS` seconds off. Node reads its wall
 * clock through clock_gettime(CLOCK_REALTIME), which libfaketime shifts; the monotonic clock is
 * left alone (durations, timers). */
const skewed = (skewS: number): Record<string, string> => ({
  LD_PRELOAD: FAKETIME_LIB!,
  FAKETIME: `${skewS >= 0 ? '+' : ''}${skewS}s`,
  FAKETIME_DONT_FAKE_MONOTONIC: '1',
});

/** A shell command run with the real clock (the routine inherits the scheduler's LD_PRELOAD). */
const unfaked = (script: string): string => `env -u LD_PRELOAD -u FAKETIME sh -c '${script}'`;

/** r-20261129T190000Z-7f3a → its epoch ms. */
const runIdTime = (id: string): number => {
  const m = /^r-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z-/.exec(id)!;
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
};

suite('PostgreSQL backend with skewed host clocks', () => {
  it("libfaketime shifts Node's Date.now() (the premise of these tests)", () => {
    const p = spawnSync(process.execPath, ['-e', 'console.log(Date.now())'], {
      env: { ...process.env, ...skewed(-3600) },
      encoding: 'utf8',
    });
    expect(Date.now() - Number(p.stdout)).toBeGreaterThan(3_500_000);
  });

  it('two schedulers at +10 s and -10 s: at most one fire per real second, no silence after the fast one is killed', async () => {
    const url = await freshDatabase(cluster!);
    const dir = testProject();
    const stamps = join(dir, 'stamps');
    // The command appends its run id and the real time it ran (the scheduler's faked clock
    // stripped).
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({
        project: 'app',
        backend: { type: 'postgres' },
        // a SIGKILL that lands while the fast host holds the exec lock (a fire under way, a few
        // ms of each second) leaves its lease to expire: a TTL of 10 s keeps that wait inside the
        // poll below (the default 60 s made this test fail now and then)
        lock: { ttlSeconds: 10 },
        routines: [
          {
            id: 'tick',
            schedule: '* * * * * *',
            action: 'command',
            run: unfaked(`echo "$ROUTINELY_RUN_ID $(date +%s.%N)" >> ${stamps}`),
          },
        ],
      }),
    );
    const env = { ROUTINELY_DATABASE_URL: url };
    const fast = startCli(['scheduler', 'start'], {
      cwd: dir,
      env: { ...env, ...skewed(10), ROUTINELY_HOST_ID: 'fast' },
    });
    const slow = startCli(['scheduler', 'start'], {
      cwd: dir,
      env: { ...env, ...skewed(-10), ROUTINELY_HOST_ID: 'slow' },
    });
    // each measured its offset to the database clock, logged it, and warned (past 1 s)
    await Promise.all([fast.waitFor(/\[scheduler\] started/), slow.waitFor(/\[scheduler\] started/)]);
    expect(fast.stdout()).toMatch(
      /\[scheduler\] database clock offset: -(9\.9|10\.0)\d*s \(this host's clock is 10\.0s ahead of the database's/,
    );
    expect(slow.stdout()).toMatch(
      /\[scheduler\] database clock offset: \+(9\.9|10\.0)\d*s \(this host's clock is 10\.0s behind the database's/,
    );
    expect(fast.stdout()).toMatch(
      /\[scheduler\] warning: this host's clock is 10\.0s ahead of the database's; .*fix this host's time sync/,
    );
    const startedAt = Date.now() / 1000;
    await sleep(8000);
    fast.child.kill('SIGKILL');
    await fast.exited;
    const killedAt = Date.now() / 1000;
    // the slow host goes on by itself: wait for its first fire after the kill to be recorded (no
    // time limit but the test's; how soon is shown below by what the fast host had claimed, not
    // by a timer). A recorded fire, not a claim: a SIGTERM just after a claim is that tick's
    // `scheduler stopping` skip, rightly.
    const slowAfterKill = async (): Promise<number> =>
      Number(
        (
          await sql<{ n: string }>(
            url,
            `SELECT count(*) AS n FROM routinely_history WHERE routine = 'tick' AND entry->>'result' = 'success'
        AND (entry->>'scheduled_at')::timestamptz > to_timestamp($1)`,
            [killedAt],
          )
        )[0]!.n,
      );
    await expect.poll(slowAfterKill, { timeout: 60_000, interval: 200 }).toBeGreaterThan(0);
    slow.child.kill('SIGTERM');
    expect((await slow.exited).code).toBe(0);

    const stamped = new Map(
      readFileSync(stamps, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '))
        .map(([run, at]) => [run!, Number(at) * 1000]),
    );
    const fires = [...stamped.values()].map((ms) => ms / 1000).sort((a, b) => a - b);
    const both = fires.filter((t) => t >= startedAt && t < killedAt);
    // Both running: at most one fire per real second (before the fix every real second had two
    // fires, t+10 and t-10, one of them a busy skip). Counted, not timed: a late fire on a loaded
    // machine only lowers the count.
    expect(both.length).toBeGreaterThan(0);
    expect(both.length, `fires at ${both.join(', ')}`).toBeLessThanOrEqual(Math.ceil(killedAt - startedAt) + 1);
    // After the kill the slow host goes on at once: the fast host (10 s ahead) never claimed a tick
    // ahead of the database clock, which the slow one would have had to wait out (before the fix
    // it had claimed up to 10 s of them, and the slow host fell silent that long).
    const claimedAhead = await sql<{ scheduled_at: Date }>(
      url,
      `SELECT scheduled_at FROM routinely_ticks WHERE routine = 'tick' AND host = 'fast' AND scheduled_at > to_timestamp($1)`,
      [killedAt + 1],
    );
    expect(claimedAhead.map((t) => t.scheduled_at.toISOString())).toEqual([]);

    // Recorded once each, no busy skips, and the history times are the database's: each fire's
    // start beside the real time its command wrote (a loaded machine delays both alike; a host's
    // clock would put it 10 s off).
    const history = await sql<{
      entry: {
        scheduled_at: string;
        started_at: string;
        finished_at: string;
        result: string;
        reason: string | null;
        run_id: string;
      };
    }>(url, `SELECT entry FROM routinely_history WHERE routine = 'tick'`);
    const times = history.map((h) => h.entry.scheduled_at);
    expect(new Set(times).size).toBe(times.length);
    // (a tick claimed just before the SIGTERM above is rightly `scheduler stopping`: not a busy
    // skip; and a SIGKILL that landed while the fast host held the exec lock leaves its lease to
    // run out, 10 s, on another host, whose pids cannot be judged here: the slow host's ticks
    // meanwhile are busy skips by design, and only those — `exec busy`, or `previous run still
    // running` when the dead host's fire of this routine was already open; under load that
    // landing is likely)
    const leaseLeft = (h: { entry: { scheduled_at: string; reason: string | null } }): boolean =>
      (h.entry.reason === 'exec busy' || h.entry.reason === 'previous run still running') &&
      Date.parse(h.entry.scheduled_at) >= (killedAt - 1) * 1000 &&
      Date.parse(h.entry.scheduled_at) <= (killedAt + 10 + 2) * 1000;
    expect(
      history.filter((h) => h.entry.result === 'skipped' && h.entry.reason !== 'scheduler stopping' && !leaseLeft(h)),
      `the fast host killed at ${new Date(killedAt * 1000).toISOString()}`,
    ).toEqual([]);
    expect(history.length).toBeGreaterThan(0);
    for (const { entry } of history.filter((h) => h.entry.run_id !== null)) {
      const ran = stamped.get(entry.run_id);
      expect(ran, `${JSON.stringify(entry)}: its command's stamp`).toBeDefined();
      expect(Math.abs(Date.parse(entry.started_at) - ran!), JSON.stringify(entry)).toBeLessThan(5000);
      expect(Date.parse(entry.finished_at)).toBeGreaterThanOrEqual(Date.parse(entry.started_at));
    }
    // routine list on a host 10 s slow reckons the next run of a per-second routine by the
    // database clock too: a second after some moment while it ran, never 10 s before
    const before = Date.now();
    const list = await runCli(['routine', 'list', '--json'], { cwd: dir, env: { ...env, ...skewed(-10) } });
    const after = Date.now();
    const [row] = JSON.parse(list.stdout) as { next_run_at: string }[];
    expect(Date.parse(row!.next_run_at), list.stdout).toBeGreaterThan(before - 1000);
    expect(Date.parse(row!.next_run_at), list.stdout).toBeLessThanOrEqual(after + 1000);
  });

  it("exec resume without a run id picks the latest run by database order, whatever the hosts' clocks say", async () => {
    const url = await freshDatabase(cluster!);
    const dir = testProject({ project: 'app', backend: { type: 'postgres' } });
    const task = (id: string) => ({ id, run: unfaked(`touch ${id}.started; [ -e done ] || sleep 60`) });
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({ project: 'app', backend: { type: 'postgres' }, exec: { tasks: [task('a'), task('b')] } }),
    );
    const env = { ROUTINELY_DATABASE_URL: url };
    // One host 60 s fast starts a run and dies; later a host 60 s slow starts another and dies.
    // By the host clocks the first run is the "newer" one.
    const interrupted = async (taskId: string, skewS: number): Promise<void> => {
      const p = startCli(['exec', 'run', taskId], { cwd: dir, env: { ...env, ...skewed(skewS) } });
      await eventually(
        () => existsSync(join(dir, `${taskId}.started`)),
        30_000,
        `task ${taskId} started`,
        () => p.stdout() + p.stderr(),
      );
      p.child.kill('SIGKILL');
      await p.exited;
    };
    const dbTime = async (): Promise<number> =>
      (await sql<{ ms: number }>(url, 'SELECT extract(epoch from now())::float8 * 1000 AS ms'))[0]!.ms;
    const dbBefore = await dbTime();
    await interrupted('a', 60);
    await interrupted('b', -60);
    const dbAfter = await dbTime();
    const runs = await sql<{ run_id: string; created_seq: string }>(
      url,
      'SELECT run_id, created_seq FROM routinely_runs ORDER BY created_seq',
    );
    expect(runs).toHaveLength(2);
    const [first, second] = runs.map((r) => r.run_id) as [string, string];
    // run ids carry the database's time (whole seconds), not the hosts' ±60 s
    for (const id of [first, second]) {
      expect(runIdTime(id), id).toBeGreaterThanOrEqual(Math.floor(dbBefore / 1000) * 1000);
      expect(runIdTime(id), id).toBeLessThanOrEqual(dbAfter);
    }

    writeFileSync(join(dir, 'done'), '');
    const resume = await runCli(['exec', 'resume'], { cwd: dir, env: { ...env, ...skewed(60) } });
    expect(resume.code, resume.stdout + resume.stderr).toBe(0);
    expect(resume.stdout).toContain(`run ${second} SUCCEEDED`);
    // a one-shot command warns on stderr about its host's clock
    expect(resume.stderr).toMatch(/warning: this host's clock is 60\.0s ahead of the database's/);
    const listed = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: dir, env })).stdout) as {
      run_id: string;
      status: string;
    }[];
    expect(listed.map((r) => r.run_id)).toEqual([second, first]);
    expect(listed.map((r) => r.status)).toEqual(['SUCCEEDED', 'INTERRUPTED']);
  });
});
