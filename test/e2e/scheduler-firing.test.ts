// Firing in the scheduler's own process (SPEC §6): every fire that started is recorded exactly
// once across SIGKILLs of the scheduler, a killed scheduler's command never outlives it beside the
// next holder, and a closed stdout never stops the scheduler.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CLI, childEnv, eventually, lineIn, processRuns, runCli, sleep, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

interface Entry {
  result: string;
  reason: string | null;
  run_id: string | null;
}

describe('the scheduler fires in its own process', () => {
  it('SIGKILL at random moments while a per-second routine runs: every run id the command saw is recorded exactly once', async () => {
    const project = testProject({
      routines: [
        {
          id: 'tick',
          schedule: '* * * * * *',
          action: 'command',
          run: 'echo "$ROUTINELY_RUN_ID" >> seen; sleep 0.3; echo "$ROUTINELY_RUN_ID" >> done',
        },
      ],
    });
    let seed = 7;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let round = 0; round < 8; round++) {
      const s = startCli(['scheduler', 'start'], { cwd: project });
      await s.waitFor(/\[scheduler\] started/);
      await sleep(1200 + Math.floor(random() * 1500));
      s.child.kill('SIGKILL');
      await s.exited;
    }
    const last = startCli(['scheduler', 'start'], { cwd: project });
    await last.waitFor(/\[routine\] (succeeded|failed) tick/, 15_000);
    last.child.kill('SIGTERM');
    expect((await last.exited).code).toBe(0);

    const seen = readFileSync(join(project, 'seen'), 'utf8').trim().split('\n');
    const history = JSON.parse(
      (await runCli(['routine', 'history', 'tick', '--json', '--limit', '1000'], { cwd: project })).stdout,
    ) as Entry[];
    const recorded = history.filter((h) => h.run_id !== null).map((h) => h.run_id!);
    expect(new Set(recorded).size, 'no run recorded twice').toBe(recorded.length);
    for (const id of seen)
      expect(
        recorded.filter((r) => r === id),
        `run ${id}`,
      ).toHaveLength(1);
    // a run that finished got its real result; one cut off by the kill is a failure, "interrupted"
    const finished = new Set(
      existsSync(join(project, 'done')) ? readFileSync(join(project, 'done'), 'utf8').trim().split('\n') : [],
    );
    for (const h of history.filter((x) => x.run_id !== null)) {
      if (h.result === 'failure') expect(h.reason, h.run_id!).toMatch(/^interrupted|killed by|lock lost/);
      else if (!finished.has(h.run_id!)) expect.fail(`run ${h.run_id} recorded ${h.result} but never finished`);
    }
    const list = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      counts: { success: number; failure: number };
    }[];
    expect(list[0]!.counts.success + list[0]!.counts.failure).toBe(recorded.length);
  }, 120_000);

  it("a scheduler SIGKILLed mid-fire: the next lock run gets the lock at once and the command's group is gone", async () => {
    const project = testProject({
      routines: [{ id: 'long', schedule: '* * * * * *', action: 'command', run: 'echo "pid $$" >> pids; sleep 60' }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    const pid = Number((await lineIn(join(project, 'pids'), /pid (\d+)/, 15_000, 'command started'))[1]);
    expect(processRuns(pid)).toBe(true);
    s.child.kill('SIGKILL');
    await s.exited;
    // before anything records it, every view shows the fire as the interrupted failure it is
    // (it showed never having run: LAST never, 0/0/0, until the next scheduler)
    const listed = async () =>
      (
        JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
          last_result: string;
          last_reason: string;
          failing: boolean;
          running_since: string | null;
          last_started_at: string;
          last_finished_at: string;
          last_failure_at: string;
          last_duration_ms: number | null;
        }[]
      )[0]!;
    const row = await listed();
    expect(row).toMatchObject({ last_result: 'failure', failing: true, running_since: null });
    // when it died is not known: dated at its start, no duration — the same at every look (each
    // look dated it at its own moment, and its duration grew with it)
    expect(row).toMatchObject({
      last_finished_at: row.last_started_at,
      last_failure_at: row.last_started_at,
      last_duration_ms: null,
    });
    await sleep(1100);
    expect({ ...(await listed()), next_run_at: null }).toEqual({ ...row, next_run_at: null });
    expect(row.last_reason).toMatch(/^interrupted: pid \d+ on \S+ ended before the outcome was recorded/);
    expect((await runCli(['routine', 'list', '--check'], { cwd: project })).stderr).toMatch(/failing routine: long/);
    expect((await runCli(['routine', 'history', 'long'], { cwd: project })).stdout).toMatch(
      /\(a fire of \S+ is not recorded yet: pid \d+ on \S+, which ran it, is gone; the next scheduler or routine run records it as interrupted\)\n$/,
    );
    // and the routine's page says the same above its fires
    const w = startCli(['serve', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 60_000 });
    const url = (await w.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const page = await httpGet(`${url}routines/long`);
    w.child.kill('SIGTERM');
    await w.exited;
    expect(page.body).toMatch(
      /A fire of \S+ is not recorded yet: pid \d+ on \S+, which ran it, is gone; the next scheduler or routine run records it as interrupted\./,
    );
    const fires = /<tbody id="fires"[^>]*>([\s\S]*?)<\/tbody>/.exec(page.body)![1]!;
    expect(fires).toMatch(/A fire of \S+ is not recorded yet/);
    expect(fires).not.toMatch(/No fires recorded yet/);
    const next = await runCli(['lock', 'run', '--if-busy', 'fail', '--', 'echo', 'next'], { cwd: project });
    expect(next).toMatchObject({ code: 0, stdout: 'next\n' });
    await eventually(() => !processRuns(pid), 5000, "the killed scheduler's command ended");
    // recorded later (by a routine run, as by the next scheduler): the very same times
    await sleep(1100);
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [{ id: 'long', schedule: '* * * * * *', action: 'command', run: 'true' }] }),
    );
    expect((await runCli(['routine', 'run', 'long'], { cwd: project })).code).toBe(0);
    const recorded = (
      JSON.parse((await runCli(['routine', 'history', 'long', '--json'], { cwd: project })).stdout) as {
        reason: string;
        started_at: string;
        finished_at: string;
      }[]
    ).find((f) => f.reason?.startsWith('interrupted:'))!;
    expect(recorded).toMatchObject({ started_at: row.last_started_at, finished_at: row.last_started_at });
  });

  it('scheduler start | head -1: the scheduler goes on firing and recording', async () => {
    const project = testProject({
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
    });
    const sh = spawn('sh', ['-c', `'${process.execPath}' '${CLI}' scheduler start | head -1`], {
      cwd: project,
      env: childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onTestFinished(() => {
      // only this test's scheduler (a child of that shell): a pattern would also kill the
      // schedulers of tests running beside this one
      spawnSync('pkill', ['-KILL', '-P', String(sh.pid)]);
      sh.kill('SIGKILL');
    });
    let out = '';
    let errText = '';
    sh.stdout.on('data', (d: Buffer) => (out += d.toString()));
    sh.stderr.on('data', (d: Buffer) => (errText += d.toString()));
    await eventually(() => out.includes('[scheduler] started'), 15_000, 'first line');
    // head has exited; the scheduler writes into a closed pipe from now on
    const count = async (): Promise<number> => {
      const r = await runCli(['routine', 'list', '--json'], { cwd: project });
      return (JSON.parse(r.stdout) as { counts: { success: number } }[])[0]!.counts.success;
    };
    const before = await count();
    const deadline = Date.now() + 15_000;
    while ((await count()) < before + 3) {
      if (Date.now() > deadline) throw new Error('no fires recorded after the pipe closed');
      await sleep(200);
    }
    const status = await runCli(['lock', 'status', '--key', 'scheduler', '--json'], { cwd: project });
    expect(JSON.parse(status.stdout)).toMatchObject({ state: 'held' });
    expect(errText).not.toMatch(/EPIPE|Unhandled/);
  });
});

describe("a command routine's environment (SPEC §6)", () => {
  it('runs in the project root with ROUTINELY_ROUTINE_ID and ROUTINELY_RUN_ID, its own env on top, and in its cwd when it has one', async () => {
    const show = 'printf "%s|%s|%s|%s\\n" "$ROUTINELY_ROUTINE_ID" "$ROUTINELY_RUN_ID" "$(pwd -P)" "$GREETING" > "$OUT"';
    const project = testProject({
      routines: [
        {
          id: 'root',
          schedule: '0 0 1 1 *',
          action: 'command',
          run: show,
          env: { GREETING: 'hello', OUT: 'root.txt' },
        },
        {
          id: 'inside',
          schedule: '0 0 1 1 *',
          action: 'command',
          run: show,
          cwd: 'sub',
          env: { GREETING: 'there', OUT: '../inside.txt' },
        },
      ],
    });
    mkdirSync(join(project, 'sub'));
    const real = realpathSync(project);
    // from a folder below the root: the command still runs in the root (or its own cwd)
    for (const id of ['root', 'inside'])
      expect(
        (await runCli(['routine', 'run', id], { cwd: join(project, 'sub'), env: { GREETING: 'outer' } })).code,
      ).toBe(0);
    const [rootId, rootRun, rootDir, rootGreeting] = readFileSync(join(project, 'root.txt'), 'utf8').trim().split('|');
    expect([rootId, rootDir, rootGreeting]).toEqual(['root', real, 'hello']);
    expect(rootRun).toMatch(/^r-\d{8}T\d{6}Z-[0-9a-f]+$/);
    const history = JSON.parse((await runCli(['routine', 'history', 'root', '--json'], { cwd: project })).stdout) as {
      run_id: string;
    }[];
    expect(history[0]!.run_id).toBe(rootRun);
    const [insideId, , insideDir, insideGreeting] = readFileSync(join(project, 'inside.txt'), 'utf8').trim().split('|');
    expect([insideId, insideDir, insideGreeting]).toEqual(['inside', join(real, 'sub'), 'there']);
  });
});
