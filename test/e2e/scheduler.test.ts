// `routinely scheduler start` and `routinely routine …` end to end, with second-level schedules
// (6-field cron), real child processes and a real exec lock.

import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RoutineStateFile } from '../../src/state/routine-state.js';
import { eventually, lineIn, processRuns, runCli, sleep, startCli, type Spawned } from '../helpers/cli.js';
import { routineStateOf } from '../helpers/state.js';
import { testProject } from '../helpers/testdir.js';

const stateOf = (p: string): RoutineStateFile => routineStateOf(p);
const lines = (s: Spawned): string[] => s.stdout().trim().split('\n').filter(Boolean);
const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});

async function stopScheduler(s: Spawned): Promise<number | null> {
  s.child.kill('SIGTERM');
  return (await s.exited).code;
}

describe('scheduler start', () => {
  it('busy ticks are skipped (log line, state, list, --check 0); the next free tick succeeds; failures count apart', async () => {
    const project = testProject({
      routines: [cmd('tick', '* * * * * *', 'echo tick'), cmd('bad', '* * * * * *', 'exit 3')],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[scheduler\] started \(2 routines\)/);
    await s.waitFor(/\[routine\] succeeded tick in \d+\.\ds/);
    await s.waitFor(/\[routine\] failed bad: exit code 3 in \d+\.\ds/);
    // hold the exec lock by hand: the next ticks meet a busy lock (waiting its turn: a fire of
    // this second may hold the lock, or be queued for it, and --if-busy fail would be refused)
    const holder = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 2.5'], {
      cwd: project,
    });
    await holder.waitFor(/holding/);
    await s.waitFor(/\[routine\] skipped tick: exec busy/);
    await eventually(() => stateOf(project).routines.tick?.last_result === 'skipped', 10_000, 'skip recorded');
    const list = await runCli(['routine', 'list'], { cwd: project });
    expect(list.stdout).toMatch(/^scheduler: running, pid \d+ on \S+ since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n/);
    expect(list.stdout).toMatch(
      /\ntick +\* \* \* \* \* \* +\S+ UTC, in \S+ +(skipped \S+ ago|running \S+) +\d+\/0\/[1-9]\d*\n/,
    );
    const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as Record<
      string,
      unknown
    >[];
    expect(rows.find((r) => r.id === 'tick')).toMatchObject({
      last_result: 'skipped',
      last_reason: 'exec busy',
      action: 'command',
      enabled: true,
      schedule: '* * * * * *',
      consecutive_failures: 0,
    });
    expect(rows.find((r) => r.id === 'tick')?.next_run_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    await holder.exited;
    // the lock is free again: success
    await eventually(
      () => stateOf(project).routines.tick?.last_result === 'success',
      10_000,
      'success after the lock frees',
      () =>
        `scheduler output (last 40 lines):\n${s.stdout().split('\n').slice(-40).join('\n')}\nholder: ${holder.stdout()}${holder.stderr()}`,
    );
    const tick = stateOf(project).routines.tick!;
    expect(tick.counts.failure).toBe(0);
    expect(tick.consecutive_failures).toBe(0);
    // --check: a skip is not a failure, but "bad" failed
    const writeOnly = { ...stateOf(project) };
    expect(writeOnly.routines.bad?.counts.failure).toBeGreaterThan(0);
    expect(await stopScheduler(s)).toBe(0);
    const check = await runCli(['routine', 'list', '--check'], { cwd: project });
    // failing until a run succeeds, whether its last tick ran or was skipped (SPEC §6)
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(/failing routine: bad \((exit code 3|failed at .*\))/);
    expect(check.stderr).not.toMatch(/routine: tick/);
    // skips never fail --check; with the scheduler stopped, its absence does
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [cmd('tick', '* * * * * *', 'echo tick')] }),
    );
    const stopped = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toBe(
      'routinely: no scheduler is running (1 enabled routine will not fire): start one with `routinely scheduler start`\n',
    );
    expect(lines(s).every((l) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[(scheduler|routine)\] /.test(l))).toBe(
      true,
    );
  });

  it('a routine whose own previous run is still going is skipped with that reason, and never called starved (SPEC §10)', async () => {
    const project = testProject({
      routines: [cmd('long', '* * * * * *', 'sleep 4', { starvedAfterSkips: 2, exclusive: false })],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] started long/);
    await s.waitFor(/(\[routine\] skipped long: previous run still running[^]*){3}/, 15_000);
    const check = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(check.stderr).not.toMatch(/starved/);
    const row = (
      JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
        id: string;
        consecutive_skips: number;
        counts: { skipped: number };
      }[]
    )[0]!;
    expect(row.counts.skipped).toBeGreaterThanOrEqual(3);
    expect(row.consecutive_skips).toBe(0);
    expect(await stopScheduler(s)).toBe(0);
  });

  it('a run that outlasts its interval and fails is recorded after the ticks it made skip: the routine is failing in every view, then recovers', async () => {
    const project = testProject({
      routines: [cmd('over', '* * * * * *', 'sleep 1.5; if [ -e fail ]; then exit 3; fi', { exclusive: false })],
    });
    writeFileSync(join(project, 'fail'), '');
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/(\[routine\] failed over[^]*){2}/, 20_000);
    await s.waitFor(/\[routine\] skipped over: previous run still running/, 10_000);
    const row = async () =>
      (
        JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
          failing: boolean;
          consecutive_failures: number;
        }[]
      )[0]!;
    expect((await row()).failing).toBe(true);
    expect((await row()).consecutive_failures).toBeGreaterThanOrEqual(2);
    const check = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(/failing routine: over/);
    // recovers: a run that succeeds, recorded after a skip all the same
    rmSync(join(project, 'fail'));
    await s.waitFor(/\[routine\] succeeded over/, 20_000);
    await eventually(async () => !(await row()).failing, 10_000, 'over no longer failing');
    expect((await runCli(['routine', 'list', '--check'], { cwd: project })).code).toBe(0);
    expect(await stopScheduler(s)).toBe(0);
  });

  it('a queued tick of a routine that a reload removes is not fired: the log says so, nothing is recorded', async () => {
    const slow = cmd('slow', '*/10 * * * * *', 'sleep 6');
    const fast = cmd('fast', '* * * * * *', 'echo ran >> fast-ran');
    const project = testProject({ routines: [slow, fast] });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] queued fast: behind slow/, 20_000);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: [slow] }));
    await s.waitFor(/\[scheduler\] reloaded config \(1 routine: removed fast\)/, 10_000);
    const afterReload = s.stdout().length;
    await s.waitFor(
      /fast: its tick of \S+ is not fired: the routine was removed from the config while it waited for its turn/,
      15_000,
    );
    await s.waitFor(/\[routine\] succeeded slow/, 15_000);
    expect(s.stdout().slice(afterReload)).not.toMatch(/\[routine\] started fast/);
    expect(await stopScheduler(s)).toBe(0);
  });

  it('a tick waiting for its lock (ifBusy wait) of a routine a reload removes is not fired once the lock frees (it was; fault pass)', async () => {
    const w = cmd('w', '*/2 * * * * *', 'echo ran >> w-ran', { ifBusy: 'wait' });
    const project = testProject({ routines: [w, cmd('other', '0 0 1 1 *', 'true')] });
    const holder = startCli(
      ['lock', 'run', '--', 'sh', '-c', 'echo held; while [ ! -e release ]; do sleep 0.1; done'],
      {
        cwd: project,
        timeoutMs: 60_000,
      },
    );
    await holder.waitFor(/held/);
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    await s.waitFor(/\[routine\] waiting w: exec busy/, 20_000);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: [cmd('other', '0 0 1 1 *', 'true')] }));
    await s.waitFor(/\[scheduler\] reloaded config \(1 routine: removed w\)/, 10_000);
    writeFileSync(join(project, 'release'), '');
    expect((await holder.exited).code).toBe(0);
    await s.waitFor(
      /w: its tick of \S+ is not fired: the routine was removed from the config while it waited for its lock/,
      15_000,
    );
    expect(s.stdout()).not.toMatch(/\[routine\] started w/);
    expect(existsSync(join(project, 'w-ran'))).toBe(false);
    expect(await stopScheduler(s)).toBe(0);
  });

  it('a queued tick of a routine disabled and enabled again while it waits is not fired (it was)', async () => {
    const slow = cmd('slow', '*/10 * * * * *', 'sleep 6');
    // due with slow, queued behind it; its next tick comes after slow ends (nothing supersedes it)
    const fast = cmd('fast', '*/10 * * * * *', 'echo ran >> fast-ran');
    const project = testProject({ routines: [slow, fast] });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    const queued = await s.waitFor(/\[routine\] queued fast: behind slow/, 20_000);
    expect(queued).toBeTruthy();
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: [slow, { ...fast, enabled: false }] }));
    await s.waitFor(/\[scheduler\] reloaded config \(1 routine: changed fast\)/, 10_000);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: [slow, fast] }));
    await s.waitFor(/\[scheduler\] reloaded config \(2 routines: changed fast\)/, 10_000);
    await s.waitFor(
      /fast: its tick of \S+ is not fired: the routine was disabled while it waited for its turn/,
      15_000,
    );
    expect(await stopScheduler(s)).toBe(0);
  });

  it('a second scheduler for the same project exits 75 naming the first', async () => {
    const project = testProject({ routines: [cmd('x', '0 0 1 1 *', 'true')] });
    const first = startCli(['scheduler', 'start'], { cwd: project });
    await first.waitFor(/\[scheduler\] started/);
    const second = await runCli(['scheduler', 'start'], { cwd: project });
    expect(second.code).toBe(75);
    expect(second.stderr).toMatch(new RegExp(`^scheduler already running: pid ${first.pid} on \\S+ \\(scheduler\\)`));
    expect(second.stderr).toContain('routinely scheduler stop stops it');
    expect(await stopScheduler(first)).toBe(0);
  });

  it('pause is honoured live, resume fires again', async () => {
    const project = testProject({ routines: [cmd('p', '* * * * * *', 'true')] });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/succeeded p/);
    expect(await runCli(['routine', 'pause', 'p', '--note', 'deploy freeze'], { cwd: project })).toMatchObject({
      code: 0,
    });
    await s.waitFor(/\[routine\] paused p \(deploy freeze\)/);
    const count = stateOf(project).routines.p!.counts.success;
    await sleep(2500);
    expect(stateOf(project).routines.p!.counts.success).toBe(count);
    expect((await runCli(['routine', 'list'], { cwd: project })).stdout).toMatch(/paused: deploy freeze/);
    await runCli(['routine', 'resume', 'p'], { cwd: project });
    await s.waitFor(/\[routine\] resumed p/);
    await eventually(() => stateOf(project).routines.p!.counts.success > count, 10_000, 'fires again');
    expect(await stopScheduler(s)).toBe(0);
  });

  it('a routine paused while its fire runs: its ticks meanwhile are no skips (nothing is due), and the fire under way ends and is recorded (a fault pass found them recorded as previous-run skips)', async () => {
    const project = testProject({ routines: [cmd('long', '* * * * * *', 'sleep 3', { exclusive: false })] });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] started long/);
    expect((await runCli(['routine', 'pause', 'long'], { cwd: project })).code).toBe(0);
    // said at its next tick, which is then not recorded
    await s.waitFor(/\[routine\] paused long/);
    const skipped = stateOf(project).routines.long?.counts.skipped ?? 0;
    await s.waitFor(/\[routine\] succeeded long/, 15_000);
    await sleep(2000);
    expect(s.stdout().slice(s.stdout().indexOf('[routine] paused long'))).not.toMatch(/skipped long/);
    expect(stateOf(project).routines.long!).toMatchObject({ last_result: 'success', counts: { skipped: skipped } });
    expect(await stopScheduler(s)).toBe(0);
  });

  it('reloads on config change and on SIGHUP; a bad new config is logged and the old one kept', async () => {
    const project = testProject({ routines: [cmd('a', '* * * * * *', 'true')] });
    const s = startCli(['scheduler', 'start', '--log-format', 'json'], { cwd: project });
    await s.waitFor(/"event":"scheduler.started"/);
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [cmd('a', '* * * * * *', 'true'), cmd('b', '* * * * * *', 'true')] }),
    );
    await s.waitFor(/"event":"scheduler.reloaded","routines":2/);
    await s.waitFor(/"event":"routine.succeeded","routine":"b"/);
    writeFileSync(
      join(project, 'routinely.json'),
      '{ "routines": [ { "id": "a", "schedule": "*/61 * * * *", "action": "register" } ] }',
    );
    await s.waitFor(/"event":"scheduler.reload_failed".*routines\[0\]\.schedule/);
    const before = stateOf(project).routines.b!.counts.success;
    await eventually(() => stateOf(project).routines.b!.counts.success > before, 10_000, 'old config keeps firing');
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: [cmd('c', '* * * * * *', 'true')] }));
    await s.waitFor(/"event":"scheduler.reloaded","routines":1/);
    s.child.kill('SIGHUP');
    await eventually(
      () => lines(s).filter((l) => l.includes('"scheduler.reloaded"')).length >= 3,
      10_000,
      'SIGHUP reload',
    );
    expect(await stopScheduler(s)).toBe(0);
    for (const l of lines(s))
      expect(JSON.parse(l)).toMatchObject({ ts: expect.stringMatching(/Z$/), event: expect.any(String) });
  });

  it('SIGTERM waits for a running routine, then exits 0 with every lock released', async () => {
    const project = testProject({ routines: [cmd('work', '* * * * * *', 'echo begin; sleep 1.5; echo end')] });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] started work/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    const out = s.stdout();
    expect(out.indexOf('[scheduler] stopping')).toBeLessThan(out.indexOf('[routine] succeeded work'));
    expect(out.trim().endsWith('[scheduler] stopped')).toBe(true);
    const status = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout);
    expect(status.state).toBe('free');
    const sched = JSON.parse(
      (await runCli(['lock', 'status', '--json', '--key', 'scheduler'], { cwd: project })).stdout,
    );
    expect(sched.state).toBe('free');
  });

  it("SIGTERM during a retry's back-off: no running routine is waited for, and it stops at once", async () => {
    const project = testProject({
      routines: [cmd('f', '* * * * * *', 'exit 1', { retry: { attempts: 2, backoffSeconds: 60 } })],
    });
    const s = startCli(['scheduler', 'start', '--shutdown-timeout', '60'], { cwd: project });
    await s.waitFor(/\[routine\] retrying f in/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    // (before: "stopping (waiting for 1 running routine)" for a fire that ran nothing)
    expect(s.stdout()).toMatch(/\[scheduler\] stopping\n/);
  });

  it('SIGTERM: ticks queued behind a running one are skips and not counted as running; a tick waiting for its lock (ifBusy wait) is not started once the lock frees (SPEC §6)', async () => {
    const project = testProject({
      routines: [
        cmd('a', '* * * * * *', 'sleep 1.5'),
        cmd('b', '* * * * * *', 'true'),
        cmd('c', '* * * * * *', 'true'),
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] queued c: behind a/);
    expect(await stopScheduler(s)).toBe(0);
    expect(s.stdout()).toMatch(/\[scheduler\] stopping \(waiting for 1 running routine\)/);
    expect(s.stdout()).toMatch(/\[routine\] skipped c: scheduler stopping/);

    const waits = testProject({
      routines: [cmd('w', '* * * * * *', 'echo ran >> ran.txt', { ifBusy: 'wait', waitTimeoutSeconds: 60 })],
    });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo held; while [ ! -f go ]; do sleep 0.02; done'], {
      cwd: waits,
    });
    await holder.waitFor(/held/);
    const w = startCli(['scheduler', 'start', '--shutdown-timeout', '30'], { cwd: waits });
    await w.waitFor(/\[routine\] waiting w: exec busy/);
    w.child.kill('SIGTERM');
    await w.waitFor(/\[scheduler\] stopping/);
    // (a fire waiting for its lock runs nothing: no running routine to wait for)
    expect(w.stdout()).toMatch(/\[scheduler\] stopping\n/);
    writeFileSync(join(waits, 'go'), '');
    expect((await holder.exited).code).toBe(0);
    expect((await w.exited).code).toBe(0);
    expect(w.stdout()).toMatch(/\[routine\] skipped w: scheduler stopping/);
    expect(w.stdout()).not.toMatch(/\[routine\] started w/);
    expect(existsSync(join(waits, 'ran.txt'))).toBe(false);
  });

  it('past --shutdown-timeout the running routine is stopped and recorded as a failure', async () => {
    const project = testProject({ routines: [cmd('long', '* * * * * *', 'echo begin; sleep 30')] });
    const s = startCli(['scheduler', 'start', '--shutdown-timeout', '0.5'], { cwd: project });
    await s.waitFor(/\[routine\] started long/);
    s.child.kill('SIGINT');
    expect((await s.exited).code).toBe(0);
    expect(s.stdout()).toMatch(/\[routine\] failed long: stopped at scheduler shutdown/);
    expect(stateOf(project).routines.long).toMatchObject({
      last_result: 'failure',
      last_reason: 'stopped at scheduler shutdown',
    });
    expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout).state).toBe('free');
  });

  it('a routine past its timeoutSeconds is stopped and recorded as a failure', async () => {
    const project = testProject({
      routines: [cmd('slow', '*/30 * * * * *', 'echo "pid $$" > slow.pid; sleep 30', { timeoutSeconds: 1 })],
    });
    const r = await runCli(['routine', 'run', 'slow'], { cwd: project });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/failed slow: timed out \(timeoutSeconds: 1\) in \d+\.\ds/);
    const pid = Number(readFileSync(join(project, 'slow.pid'), 'utf8').split(' ')[1]);
    await eventually(() => !processRuns(pid), 5000, 'command stopped');
    expect(stateOf(project).routines.slow).toMatchObject({
      last_result: 'failure',
      last_reason: 'timed out (timeoutSeconds: 1)',
      consecutive_failures: 1,
    });
    expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout).state).toBe('free');
  });

  it("an exec action past its timeoutSeconds: its run ABORTED (RUN_TIMEOUT), the fire recorded in the same words as a command routine's", async () => {
    const project = testProject({
      exec: { tasks: [{ id: 't', run: 'sleep 30' }] },
      routines: [{ id: 'auto', schedule: '0 0 1 1 *', action: 'exec-auto', timeoutSeconds: 1 }],
    });
    const r = await runCli(['routine', 'run', 'auto'], { cwd: project });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/failed auto: timed out \(timeoutSeconds: 1\) in \d+\.\ds/);
    expect(stateOf(project).routines.auto).toMatchObject({
      last_result: 'failure',
      last_reason: 'timed out (timeoutSeconds: 1)',
    });
    const runs = await runCli(['exec', 'runs'], { cwd: project });
    expect(runs.stdout).toMatch(/r-\S+ +ABORTED/);
  });

  it('a fire left open by a routine run killed with SIGKILL is recorded by the running scheduler once a fire of its takes the lock over (SPEC §6)', async () => {
    const project = testProject({
      routines: [
        cmd('tick', '* * * * * *', 'true'),
        cmd('yearly', '0 0 1 1 *', 'echo "pid $$" > yearly.pid; sleep 30'),
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] succeeded tick/);
    const manual = startCli(['routine', 'run', 'yearly', '--if-busy', 'wait'], { cwd: project });
    await lineIn(join(project, 'yearly.pid'), /pid \d+/, 15_000, 'yearly started');
    manual.child.kill('SIGKILL');
    await manual.exited;
    // the next tick finds the exec lock's holder dead, takes it over, and records what it left
    await s.waitFor(/recorded 1 fire left open by a process that died as failed \(interrupted\)/, 15_000);
    expect(stateOf(project).routines.yearly).toMatchObject({ counts: { failure: 1 }, last_result: 'failure' });
    const listed = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      id: string;
      counts: { failure: number };
    }[];
    expect(listed.find((r) => r.id === 'yearly')?.counts.failure).toBe(1);
    expect(await stopScheduler(s)).toBe(0);
    // recorded once: a restart finds nothing left open
    const again = startCli(['scheduler', 'start'], { cwd: project });
    await again.waitFor(/\[routine\] succeeded tick/);
    expect(again.stdout() + again.stderr()).not.toMatch(/left open/);
    expect(await stopScheduler(again)).toBe(0);
    expect(stateOf(project).routines.yearly?.counts.failure).toBe(1);
  });

  it('a routine without a lock never runs beside itself across processes: routine run and the ticks of a scheduler take turns (SPEC §6)', async () => {
    const project = testProject({
      routines: [
        cmd('nx', '* * * * * *', 'echo "start $(date +%s%N)" >> spans; sleep 2; echo "end $(date +%s%N)" >> spans', {
          exclusive: false,
        }),
      ],
    });
    const manual = startCli(['routine', 'run', 'nx'], { cwd: project });
    await manual.waitFor(/started nx/);
    // the same routine by hand again: refused, nothing recorded
    const again = await runCli(['routine', 'run', 'nx'], { cwd: project });
    expect(again.code).toBe(75);
    expect(again.stderr).toMatch(/nx: previous run still running in another process/);
    // a scheduler's ticks meanwhile are skips, then it fires once the manual run is done
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] skipped nx: previous run still running/);
    expect((await manual.exited).code).toBe(0);
    await s.waitFor(/\[routine\] succeeded nx/, 15_000);
    expect(await stopScheduler(s)).toBe(0);
    const spans = readFileSync(join(project, 'spans'), 'utf8').trim().split('\n');
    // start, end, start, end …: never two starts in a row
    spans.forEach((line, i) => expect(line.startsWith(i % 2 === 0 ? 'start' : 'end'), spans.join('\n')).toBe(true));
    // the refused manual run left nothing open: a later command reconciles nothing, and no fire
    // of nx failed (a marker left open became an "interrupted" failure)
    const later = await runCli(['routine', 'run', 'nx'], { cwd: project });
    expect(later.code, later.stderr).toBe(0);
    expect(later.stderr).not.toMatch(/left open/);
    const history = await runCli(['routine', 'history', 'nx', '--json'], { cwd: project });
    expect((JSON.parse(history.stdout) as { result: string }[]).filter((h) => h.result === 'failure')).toEqual([]);
    expect(stateOf(project).routines.nx?.open_fires).toBeUndefined();
  });

  it("a routine without a lock whose process was SIGKILLed mid-fire: what its fire started is ended before the routine runs again, at a scheduler's start and by routine run (SPEC §6)", async () => {
    const run = 'echo "start $$" >> spans; sleep 30';
    const project = testProject({ routines: [cmd('nx', '*/2 * * * * *', run, { exclusive: false })] });
    const started = (): number[] =>
      readFileSync(join(project, 'spans'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => Number(l.split(' ')[1]));
    const first = startCli(['scheduler', 'start'], { cwd: project });
    await lineIn(join(project, 'spans'), /start \d+/, 15_000, 'nx started');
    first.child.kill('SIGKILL');
    await first.exited;
    const [orphan] = started();
    expect(processRuns(orphan!)).toBe(true);
    const second = startCli(['scheduler', 'start', '--shutdown-timeout', '1'], { cwd: project });
    await second.waitFor(/\[routine\] started nx/, 15_000);
    expect(second.stdout()).toMatch(/ended 1 process group left running by interrupted run r-\S+ \(its process died\)/);
    expect(processRuns(orphan!), 'the orphan of the first scheduler').toBe(false);
    expect(await stopScheduler(second)).toBe(0);
    // by hand: a routine run killed, then another
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [cmd('nx', '0 0 1 1 *', run, { exclusive: false })] }),
    );
    const manual = startCli(['routine', 'run', 'nx'], { cwd: project });
    await eventually(() => started().length === 3, 15_000, 'the manual run started');
    manual.child.kill('SIGKILL');
    await manual.exited;
    const left = started()[2]!;
    expect(processRuns(left)).toBe(true);
    const again = startCli(['routine', 'run', 'nx'], { cwd: project });
    await eventually(() => started().length === 4, 15_000, 'the second manual run started');
    expect(processRuns(left), 'the orphan of the killed routine run').toBe(false);
    expect(again.stderr()).toMatch(/ended 1 process group left running by interrupted run/);
    again.child.kill('SIGTERM');
    await again.exited;
  });

  it('a routine without a lock: a routine run SIGKILLed while a scheduler runs has what it started ended by the next tick, which then fires (SPEC §6)', async () => {
    const project = testProject({
      routines: [cmd('nx', '* * * * * *', 'echo "start $$" >> spans; sleep 30', { exclusive: false })],
    });
    const manual = startCli(['routine', 'run', 'nx'], { cwd: project });
    await lineIn(join(project, 'spans'), /start \d+/, 15_000, 'the manual run started');
    const orphan = Number(readFileSync(join(project, 'spans'), 'utf8').split(' ')[1]);
    const s = startCli(['scheduler', 'start', '--shutdown-timeout', '1'], { cwd: project });
    await s.waitFor(/\[routine\] skipped nx: previous run still running/, 15_000);
    manual.child.kill('SIGKILL');
    await manual.exited;
    expect(processRuns(orphan)).toBe(true);
    await s.waitFor(/\[routine\] started nx/, 15_000);
    expect(s.stdout()).toMatch(/ended 1 process group left running by interrupted run r-\S+ \(its process died\)/);
    expect(processRuns(orphan), 'the orphan of the killed routine run').toBe(false);
    // and its fire recorded as interrupted now, once (not at the next start)
    await s.waitFor(/recorded 1 fire left open by a process that died as failed \(interrupted\)/, 15_000);
    expect(await stopScheduler(s)).toBe(0);
    expect(s.stdout().match(/left open by a process that died/g)).toHaveLength(1);
    const history = await runCli(['routine', 'history', 'nx', '--json'], { cwd: project });
    expect(
      (JSON.parse(history.stdout) as { result: string; reason: string | null }[]).filter((h) =>
        h.reason?.startsWith('interrupted'),
      ),
    ).toHaveLength(1);
  });

  it("the interrupted fire's failure notification is never taken for one of its orphans: its command carries the run's id too, and runs to its end once", async () => {
    const notifyRun =
      'echo "start $$" >> notified; trap "echo TERM >> notified; exit 1" TERM; sleep 0.5; echo "done $ROUTINELY_RUN_ID" >> notified';
    const project = testProject({
      notify: { command: notifyRun, outputLines: 0 },
      routines: [
        cmd('long', '0 0 1 1 *', 'echo "start $$" >> spans; sleep 30', { exclusive: false }),
        cmd('other', '0 0 1 1 *', 'true', { notify: false }),
      ],
    });
    const manual = startCli(['routine', 'run', 'long'], { cwd: project });
    await lineIn(join(project, 'spans'), /start \d+/, 15_000, 'long started');
    const orphan = Number(readFileSync(join(project, 'spans'), 'utf8').split(' ')[1]);
    manual.child.kill('SIGKILL');
    await manual.exited;
    // the next command reconciles the fire: ends its orphan, then announces its failure
    const other = await runCli(['routine', 'run', 'other'], { cwd: project });
    expect(other.code, other.stderr).toBe(0);
    expect(other.stderr).toMatch(/ended 1 process group left running by interrupted run (r-\S+) \(its process died\)/);
    const runId = /interrupted run (r-\S+) /.exec(other.stderr)![1]!;
    expect(processRuns(orphan)).toBe(false);
    const notified = readFileSync(join(project, 'notified'), 'utf8');
    expect(notified).not.toMatch(/TERM/);
    expect(notified).toMatch(new RegExp(`^start \\d+\ndone ${runId}\n$`));
  });

  it('catchUp latest fires once at start for a missed time', async () => {
    const project = testProject({ routines: [cmd('yearly', '0 0 1 1 *', 'echo caught', { catchUp: 'latest' })] });
    // the routine last fired for 2020: the 1 January since then was missed
    await runCli(['routine', 'run', 'yearly'], { cwd: project });
    const history = join(project, '.routinely', 'history', 'yearly.jsonl');
    writeFileSync(
      history,
      readFileSync(history, 'utf8').replace(/"scheduled_at":"[^"]*"/g, '"scheduled_at":"2020-01-01T00:00:00.000Z"'),
    );
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] catching up yearly \(missed \d{4}-01-01T/);
    await s.waitFor(/\[routine\] succeeded yearly/);
    expect(await stopScheduler(s)).toBe(0);
    expect(stateOf(project).routines.yearly?.counts.success).toBe(2);
  });

  it('a corrupt routine-state.json is reported, moved aside, and never stops the scheduler', async () => {
    const project = testProject({ routines: [cmd('c', '* * * * * *', 'true')] });
    await runCli(['routine', 'run', 'c'], { cwd: project });
    writeFileSync(join(project, '.routinely', 'routine-state.json'), '{"version": 1, "routines": ');
    const list = await runCli(['routine', 'list', '--json'], { cwd: project });
    expect(list.code).toBe(0);
    // a read-only view leaves the file and shows the state rebuilt from history
    expect(list.stderr).toMatch(/routine-state\.json is corrupt .*left in place, rebuilt from the history files/);
    expect((JSON.parse(list.stdout) as { counts: { success: number } }[])[0]!.counts.success).toBe(1);
    writeFileSync(join(project, '.routinely', 'routine-state.json'), 'garbage');
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[scheduler\] warning: .*routine-state\.json is corrupt/);
    await s.waitFor(/succeeded c/);
    // the scheduler (the writer of the shared index) moves it aside and writes it again, nothing forgotten
    await eventually(
      () => readdirSync(join(project, '.routinely')).some((n) => /^routine-state\.json\.corrupt\.\d+$/.test(n)),
      10_000,
      'moved aside',
    );
    await eventually(
      () => {
        try {
          return (
            JSON.parse(readFileSync(join(project, '.routinely', 'routine-state.json'), 'utf8')).routines.c.counts
              .success >= 1
          );
        } catch {
          return false;
        }
      },
      10_000,
      'state rewritten',
    );
    await eventually(() => (stateOf(project).routines.c?.counts.success ?? 0) >= 2, 10_000, 'fires go on');
    expect(await stopScheduler(s)).toBe(0);
    // said once as found (its reads before the write), once as moved: never "left in place" again
    const log = s.stdout() + s.stderr();
    expect(log.match(/routine-state\.json is corrupt .*left in place/g)).toHaveLength(1);
    expect(log).toMatch(/left in place, rebuilt from the history files; the next write of it sets it aside/);
    expect(
      log.match(/routine-state\.json is corrupt .*moved aside to routine-state\.json\.corrupt\.\d+/g),
    ).toHaveLength(1);
  });
});

describe('routine run, history, pause', () => {
  it('routine run fires now and records it exactly like the scheduler; busy is 75 (fail) or 0 (skip)', async () => {
    const project = testProject({
      exec: { tasks: [{ id: 't', run: 'true' }] },
      routines: [{ id: 'auto', schedule: '0 0 1 1 *', action: 'exec-auto' }],
    });
    const ok = await runCli(['routine', 'run', 'auto'], { cwd: project });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^started auto\nsucceeded auto in \d+\.\ds \(run r-\d{8}T\d{6}Z-[0-9a-f]{4}\)\n$/);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: project });
    await holder.waitFor(/holding/);
    // refused as busy, a manual run is not a tick: nothing recorded (SPEC §4)
    const busy = await runCli(['routine', 'run', 'auto'], { cwd: project });
    expect(busy).toMatchObject({ code: 75, stdout: '' });
    expect(busy.stderr).toMatch(/^exec busy: held by pid \d+ on \S+ \(lock run\), heartbeat \d+s ago\n/);
    const skip = await runCli(['routine', 'run', 'auto', '--if-busy', 'skip'], { cwd: project });
    expect(skip).toMatchObject({ code: 0, stdout: 'skipped: exec busy\n' });
    holder.child.kill('SIGTERM');
    await holder.exited;
    expect(stateOf(project).routines.auto).toMatchObject({
      counts: { success: 1, failure: 0, skipped: 0 },
      last_result: 'success',
    });
    const history = JSON.parse((await runCli(['routine', 'history', 'auto', '--json'], { cwd: project })).stdout) as {
      result: string;
      run_id: string | null;
    }[];
    expect(history.map((h) => h.result)).toEqual(['success']);
    expect(history[0]?.run_id).toMatch(/^r-/);
    const human = await runCli(['routine', 'history', 'auto', '--limit', '1'], { cwd: project });
    expect(human.stdout.trim().split('\n')).toHaveLength(1);
    expect((await runCli(['routine', 'run', 'nope'], { cwd: project })).stderr).toMatch(
      /unknown routine "nope" \(known: auto\)/,
    );
  });

  // (SIGHUP and SIGQUIT: Node's default ended routine run alone, its command running on in a
  // group of its own, the fire unrecorded and its lock stale)
  it.each([
    ['SIGTERM', 143],
    ['SIGHUP', 129],
    ['SIGQUIT', 131],
  ] as const)('routine run stopped by %s exits %i and records why', async (signal, code) => {
    const project = testProject({ routines: [cmd('long', '0 0 1 1 *', 'echo started; sleep 30')] });
    const p = startCli(['routine', 'run', 'long'], { cwd: project });
    await p.waitFor(/started long/);
    p.child.kill(signal);
    expect((await p.exited).code).toBe(code);
    expect(stateOf(project).routines.long).toMatchObject({
      last_result: 'failure',
      last_reason: `stopped by ${signal}`,
    });
    expect((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout).toMatch(/"state": "free"/);
  });

  it("concurrent writers never lose each other's updates", async () => {
    const project = testProject({ routines: [cmd('a', '0 0 1 1 *', 'true'), cmd('b', '0 0 1 1 *', 'true')] });
    const runsA = Array.from({ length: 5 }, () => runCli(['routine', 'run', 'a'], { cwd: project }));
    const runsB = Array.from({ length: 5 }, () =>
      runCli(['routine', 'run', 'b', '--if-busy', 'wait'], { cwd: project }),
    );
    const pauses = [runCli(['routine', 'pause', 'b', '--note', 'x'], { cwd: project })];
    const [doneA] = await Promise.all([Promise.all(runsA), Promise.all(runsB), ...pauses]);
    const st = stateOf(project).routines;
    // every run of a may have met the lock held (refused, nothing recorded)
    const a = st.a?.counts ?? { success: 0, failure: 0, skipped: 0 };
    const b = st.b!.counts;
    // a run refused as busy (exit 75) records nothing; every one that ran is recorded
    const ranA = doneA.filter((r) => r.code === 0).length;
    expect(doneA.filter((r) => r.code !== 0).map((r) => r.code)).toEqual(Array.from({ length: 5 - ranA }, () => 75));
    expect(a).toEqual({ success: ranA, failure: 0, skipped: 0 });
    const historyB = (await runCli(['routine', 'history', 'b', '--json'], { cwd: project })).stdout;
    expect(b, historyB).toEqual({ success: 5, failure: 0, skipped: 0 }); // --if-busy wait: every one ran
    expect(st.b?.paused).toBe(true);
    const history = JSON.parse(
      (await runCli(['routine', 'history', 'a', '--json'], { cwd: project })).stdout,
    ) as unknown[];
    expect(history).toHaveLength(ranA);
  });
});
