// SPEC §10 end to end with real processes: `ifBusy: "wait"` runs as soon as the lock frees and
// gives up (a skip) at its timeout; `retry` tries a failed fire again with back-off, each attempt
// its own history line; `routine list` shows running and starved routines; `--check` fails for
// each of its three reasons and passes when all is well.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { HistoryEntry } from '../../src/state/history.js';
import { eventually, runCli, startCli, type Spawned } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});

async function history(project: string, id: string): Promise<HistoryEntry[]> {
  const r = await runCli(['routine', 'history', id, '--json', '--limit', '1000'], { cwd: project });
  return JSON.parse(r.stdout) as HistoryEntry[]; // in time order, as every history view
}

async function stop(s: Spawned): Promise<void> {
  s.child.kill('SIGTERM');
  expect((await s.exited).code).toBe(0);
}

/** Holds the exec lock until the file `go` appears in the project. */
async function holdLock(project: string): Promise<Spawned> {
  const holder = startCli(
    ['lock', 'run', '--', 'sh', '-c', 'echo holding; while [ ! -f go ]; do sleep 0.05; done; echo released'],
    { cwd: project },
  );
  await holder.waitFor(/holding/);
  return holder;
}

describe('ifBusy "wait"', () => {
  it('waits for the busy lock, says whom for, and runs as soon as it frees', async () => {
    const project = testProject({ routines: [cmd('w', '*/5 * * * * *', 'date +%s%N > ran-at', { ifBusy: 'wait' })] });
    const holder = await holdLock(project);
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] waiting w: exec busy \(held by lock run since \d\d:\d\d:\d\d\)/);
    expect(existsSync(join(project, 'ran-at'))).toBe(false);
    const freed = Date.now(); // the holder lets go only once it sees `go`
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
    await s.waitFor(/\[routine\] succeeded w in/);
    await stop(s);
    const fires = await history(project, 'w');
    expect(fires[0]).toMatchObject({ result: 'success', trigger: 'schedule' });
    // it waited: its command ran (`date +%s%N`, in ns) only once the holder had been told to go
    expect(Number(readFileSync(join(project, 'ran-at'), 'utf8').trim()) / 1e6).toBeGreaterThanOrEqual(freed);
    expect(Date.parse(fires[0]!.finished_at)).toBeGreaterThanOrEqual(freed);
  });

  it('gives up at waitTimeoutSeconds: recorded as a skip, reason "exec busy"', async () => {
    const project = testProject({
      routines: [cmd('w', '*/5 * * * * *', 'touch ran', { ifBusy: 'wait', waitTimeoutSeconds: 1 })],
    });
    const holder = await holdLock(project);
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] waiting w: exec busy/);
    await s.waitFor(/\[routine\] skipped w: exec busy/);
    await stop(s);
    writeFileSync(join(project, 'go'), '');
    await holder.exited;
    expect(existsSync(join(project, 'ran'))).toBe(false);
    const list = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as Record<
      string,
      unknown
    >[];
    expect(list[0]).toMatchObject({
      id: 'w',
      last_result: 'skipped',
      last_reason: 'exec busy',
      consecutive_skips: 1,
      counts: { success: 0, failure: 0, skipped: 1 },
    });
  });
});

describe('retry', () => {
  it('tries a failed fire again with back-off; each attempt is its own history line', async () => {
    const project = testProject({
      routines: [
        cmd('flaky', '* * * * * *', 'echo try >> tries; exit 4', { retry: { attempts: 2, backoffSeconds: 0.2 } }),
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] retrying flaky in 0\.2s \(attempt 2 of 3\)/);
    await s.waitFor(/\[routine\] retrying flaky in 0\.[45]s \(attempt 3 of 3\)/);
    await eventually(() => /(failed flaky[^\n]*\n[^]*){3}/.test(s.stdout()), 15_000, 'three failed attempts');
    await stop(s);
    const fires = await history(project, 'flaky');
    const first = fires.findIndex((f) => f.attempt === 1);
    expect(fires.slice(first, first + 3).map((f) => [f.trigger, f.attempt, f.result, f.reason])).toEqual([
      ['schedule', 1, 'failure', 'exit code 4'],
      ['retry', 2, 'failure', 'exit code 4'],
      ['retry', 3, 'failure', 'exit code 4'],
    ]);
  });
});

describe('routine list and --check (SPEC §10)', () => {
  it('shows a running fire, a starved routine, and --check fails for each of its three reasons', async () => {
    const project = testProject({
      routines: [
        cmd('slow', '*/2 * * * * *', 'echo started > slow-started; while [ ! -f go ]; do sleep 0.05; done'),
        cmd('starving', '* * * * * *', 'true', { starvedAfterSkips: 2 }),
      ],
    });
    // no scheduler yet: --check says so (and only that: nothing failed or starved)
    const none = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(none).toMatchObject({
      code: 1,
      stderr:
        'routinely: no scheduler is running (2 enabled routines will not fire): start one with `routinely scheduler start`\n',
    });
    expect(none.stdout).toMatch(/^scheduler: not running\n/);

    const s = startCli(['scheduler', 'start'], { cwd: project });
    await eventually(() => existsSync(join(project, 'slow-started')), 15_000, 'slow started');
    // slow holds the exec lock: starving is skipped every second until it is starved
    await s.waitFor(/skipped starving: exec busy[^]*skipped starving: exec busy/);
    const running = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(running.stdout).toMatch(/^scheduler: running, pid \d+ on \S+ since /);
    expect(running.stdout).toMatch(/\nslow +\*\/2 \* \* \* \* \* +.+ +running \d+(\.\d)?s +\d+\/0\/\d+\n/);
    // (starving may have run once before slow took the lock)
    expect(running.stdout).toMatch(/\nstarving +\* \* \* \* \* \* +.+ +starved: \d+ skips +\d+\/0\/[2-9]\d*\n/);
    expect(running.code).toBe(1);
    expect(running.stderr).toMatch(/^routinely: starved routine: starving \(\d+ busy skips in a row\)\n$/);
    const json = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as Record<
      string,
      unknown
    >[];
    expect(json.find((r) => r.id === 'slow')).toMatchObject({ running_since: expect.stringMatching(/^\d{4}-/) });
    expect(json.find((r) => r.id === 'starving')).toMatchObject({ starved: true, running_since: null });

    // the lock frees: starving runs, and all is well
    writeFileSync(join(project, 'go'), '');
    await s.waitFor(/succeeded starving/);
    await s.waitFor(/succeeded slow/);
    // (slow fires again every 2 s and may hold the lock at any moment: until both have run
    // since, --check may still see a fresh skip; it must pass once neither is starved)
    // (under load a fire of slow can outlast a second and cost starving two skips in a row: it
    // then recovers at its next run, so --check is asked again for up to 30 s)
    let well = await runCli(['routine', 'list', '--check'], { cwd: project });
    for (const until = Date.now() + 30_000; well.code !== 0 && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 200));
      well = await runCli(['routine', 'list', '--check'], { cwd: project });
    }
    expect(well).toMatchObject({ code: 0, stderr: '' });

    // a failure fails it
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: [cmd('bad', '* * * * * *', 'exit 9')] }));
    await s.waitFor(/failed bad: exit code 9/);
    const failing = await runCli(['routine', 'list', '--check'], { cwd: project });
    expect(failing.code).toBe(1);
    expect(failing.stderr).toMatch(/^routinely: failing routine: bad \(exit code 9\)\n$/);
    await stop(s);
  }, 90_000);
});
