// The original design, line by line, checked as a user would check it: the built CLI, the
// scheduler's log as printed, routine-state.json read as a file, `routine list` as shown, exit
// codes. Each test names the line of the design it pins (README "What it is", SPEC §1).

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, processRuns, runCli, startCli, type Spawned } from '../helpers/cli.js';
import { stateFileOf } from '../helpers/state.js';
import { testProject } from '../helpers/testdir.js';

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});
const YEARLY = '0 0 1 1 *';
const stop = async (s: Spawned): Promise<number | null> => {
  s.child.kill('SIGTERM');
  return (await s.exited).code;
};

describe('the design, as a user checks it', () => {
  it('"When a routine fires while the lock is busy, the tick is skipped, logged as `[routine] skipped <id>: exec busy`, stored as last_result: "skipped" in routine-state.json, and shown apart from failures in routine list"', async () => {
    const dir = testProject({ routines: [cmd('tick', '* * * * * *', 'true'), cmd('bad', YEARLY, 'exit 3')] });
    // a failure first, so that "apart from failures" has one to be apart from
    expect((await runCli(['routine', 'run', 'bad'], { cwd: dir })).code).toBe(1);
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    await s.waitFor(/\[routine\] succeeded tick/);
    // waiting its turn: a fire of this second may hold the lock for a moment (fail would be refused)
    const holder = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 30'], {
      cwd: dir,
    });
    await holder.waitFor(/holding/);
    // the log line, with its ISO-8601 UTC timestamp; what follows "exec busy" names the holder
    const skipped = (await s.waitFor(/^(\S+) \[routine\] skipped tick: exec busy( \(held by [^)]+\))?$/m))[1]!;
    expect(skipped).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // routine-state.json itself, as `jq .routines.tick` reads it
    await eventually(
      () => stateFileOf(dir)?.routines.tick?.last_result === 'skipped',
      5000,
      'the skip in routine-state.json',
    );
    const tick = stateFileOf(dir)!.routines.tick!;
    expect(tick).toMatchObject({ last_result: 'skipped', last_reason: 'exec busy', consecutive_failures: 0 });
    expect(tick.counts.failure).toBe(0);
    expect(tick.counts.skipped).toBeGreaterThanOrEqual(1);
    // routine list: the skip in its own word and column, the failure in its own
    const list = await runCli(['routine', 'list'], { cwd: dir });
    const row = (id: string): string => list.stdout.split('\n').find((l) => l.startsWith(`${id} `)) ?? '';
    expect(row('tick')).toMatch(/\bskipped\b/);
    expect(row('tick')).not.toMatch(/\bfail(ed|ing)\b/);
    expect(row('tick')).toMatch(/ \d+\/0\/[1-9]\d*$/); // ok / failed / skipped
    expect(row('bad')).toMatch(/\bfailing\b/);
    expect(row('bad')).toMatch(/ 0\/1\/0$/);
    // a skip is never a failure: --check names the failing routine only
    const check = await runCli(['routine', 'list', '--check'], { cwd: dir });
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(/failing routine: bad/);
    expect(check.stderr).not.toMatch(/routine: tick/);
    holder.child.kill('SIGTERM');
    await holder.exited;
    expect(await stop(s)).toBe(0);
  }, 40_000);

  it('"exec run --if-busy fail" exits 75 naming the holder; --if-busy skip exits 0 and changes nothing', async () => {
    const dir = testProject({ exec: { tasks: [{ id: 't', run: 'echo RAN > ran.txt' }] } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: dir });
    await holder.waitFor(/holding/);
    const fail = await runCli(['exec', 'run', '--if-busy', 'fail'], { cwd: dir });
    expect(fail.code).toBe(75);
    expect(fail.stderr).toMatch(
      new RegExp(`^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago\\n`),
    );
    const skip = await runCli(['exec', 'run', '--if-busy', 'skip'], { cwd: dir });
    expect(skip).toMatchObject({ code: 0, stdout: 'skipped: exec busy\n' });
    expect(() => readFileSync(join(dir, 'ran.txt'))).toThrow();
    holder.child.kill('SIGTERM');
    await holder.exited;
  });

  it('"reclaimed the moment its holder is dead": a SIGKILLed holder\'s lock is taken at once, and "released only by its owner": lock break refuses a live one', async () => {
    const dir = testProject({});
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: dir });
    await holder.waitFor(/holding/);
    const refused = await runCli(['lock', 'break'], { cwd: dir });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/not stale|held by/);
    holder.child.kill('SIGKILL');
    await holder.exited;
    // no --if-busy wait: the dead owner is judged at once, and its command's group is ended
    const next = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo next'], { cwd: dir });
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toBe('next\n');
    const st = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: dir })).stdout) as {
      state: string;
      generation: number;
    };
    expect(st.state).toBe('free');
    expect(st.generation).toBeGreaterThanOrEqual(2);
  });

  it('"every routine … holds one project-wide exec lock for its whole run": while a routine runs, the lock names it', async () => {
    const dir = testProject({ routines: [cmd('slow', '* * * * * *', 'echo running > running.txt; sleep 3')] });
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    await s.waitFor(/\[routine\] started slow/);
    await eventually(
      () => {
        try {
          return readFileSync(join(dir, 'running.txt'), 'utf8') === 'running\n';
        } catch {
          return false;
        }
      },
      10_000,
      'slow runs',
    );
    const status = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: dir })).stdout) as {
      state: string;
      record: { owner: { routine: string; command: string; pid: number } };
    };
    expect(status).toMatchObject({ state: 'held', record: { owner: { routine: 'slow', command: 'routine' } } });
    expect(status.record.owner.pid).toBe(s.pid);
    const busy = await runCli(['exec', 'run'], { cwd: dir });
    expect(busy.code).toBe(75);
    expect(busy.stderr).toMatch(/exec busy: held by pid \d+ on \S+ \(routine slow, run r-/);
    expect(await stop(s)).toBe(0);
    expect(processRuns(s.pid)).toBe(false);
  }, 30_000);

  it('the routine actions: register syncs the tasks, exec-auto runs what is pending, exec-resume finishes an interrupted run', async () => {
    const dir = testProject({
      exec: {
        tasks: [
          { id: 'build', run: 'echo built >> built.txt' },
          { id: 'slow', run: 'touch slow.started; sleep 60', dependsOn: ['build'] },
        ],
      },
      routines: [
        { id: 'sync', schedule: YEARLY, action: 'register' },
        { id: 'auto', schedule: YEARLY, action: 'exec-auto' },
        { id: 'resume', schedule: YEARLY, action: 'exec-resume' },
      ],
    });
    expect((await runCli(['routine', 'run', 'sync'], { cwd: dir })).code).toBe(0);
    const registered = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: dir })).stdout) as {
      id: string;
      status: string;
    }[];
    expect(registered.map((t) => [t.id, t.status])).toEqual([
      ['build', 'pending'],
      ['slow', 'pending'],
    ]);
    // exec-auto starts the pending tasks; killed while slow runs, the run is left interrupted
    const auto = startCli(['routine', 'run', 'auto'], { cwd: dir });
    await eventually(
      () => {
        try {
          readFileSync(join(dir, 'slow.started'));
          return true;
        } catch {
          return false;
        }
      },
      15_000,
      'slow started',
    );
    auto.child.kill('SIGKILL');
    await auto.exited;
    // the slow task finishes quickly from now on
    const cfg = JSON.parse(readFileSync(join(dir, 'routinely.json'), 'utf8'));
    cfg.exec.tasks[1].run = 'echo slow done > slow.txt';
    writeFileSync(join(dir, 'routinely.json'), JSON.stringify(cfg));
    expect((await runCli(['routine', 'run', 'sync'], { cwd: dir })).code).toBe(0);
    const resumed = await runCli(['routine', 'run', 'resume'], { cwd: dir });
    expect(resumed.code, resumed.stderr).toBe(0);
    const done = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: dir })).stdout) as {
      id: string;
      status: string;
    }[];
    expect(done.map((t) => [t.id, t.status])).toEqual([
      ['build', 'succeeded'],
      ['slow', 'succeeded'],
    ]);
    // build succeeded before the kill and was kept: it ran once
    expect(readFileSync(join(dir, 'built.txt'), 'utf8')).toBe('built\n');
    // and each of the three is in routine-state.json with its result
    const file = stateFileOf(dir)!;
    expect(file.routines.sync).toMatchObject({ last_result: 'success', counts: { success: 2 } });
    expect(file.routines.resume).toMatchObject({ last_result: 'success' });
    expect(file.routines.auto?.counts.success ?? 0).toBe(0);
  }, 60_000);
});
