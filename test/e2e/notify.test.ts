// Notifications from the running scheduler and from `routine run` (SPEC §10), end to end: a real
// scheduler, real commands, a real local webhook receiver. (notify/*.test.ts cover the events,
// payloads and delivery rules in detail, on both backends.)

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { eventually, processRuns, runCli, startCli, type Spawned } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';
import { closedPort, webhookServer } from '../helpers/webhook-server.js';

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});

async function stop(s: Spawned): Promise<void> {
  s.child.kill('SIGTERM');
  expect((await s.exited).code).toBe(0);
}

describe('the scheduler notifies', () => {
  it('a failure once, then the recovery; busy skips only once starved; never an ordinary skip', async () => {
    const hook = await webhookServer();
    const project = testProject({
      notify: { webhook: hook.url },
      routines: [
        // fails on its first fire, succeeds from then on
        cmd(
          'flaky',
          '* * * * * *',
          'if [ -f failed-once ]; then echo fine; else touch failed-once; echo broken >&2; exit 3; fi',
          { starvedAfterSkips: 1000 },
        ),
        cmd('blocked', '* * * * * *', 'true', { starvedAfterSkips: 3, notify: { webhook: hook.url, on: ['starved'] } }),
        cmd('quiet', '* * * * * *', 'exit 1', { notify: false }),
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await eventually(
      () => hook.payloads().some((p) => p.event === 'recovery'),
      30_000,
      'a recovery',
      () => `${JSON.stringify(hook.payloads())}\n${s.stdout()}\n${s.stderr()}`,
    );
    const flaky = hook.payloads().filter((p) => p.routine === 'flaky');
    expect(flaky.map((p) => p.event)).toEqual(['failure', 'recovery']);
    expect(flaky[0]).toMatchObject({
      event: 'failure',
      routine: 'flaky',
      result: 'failure',
      why: 'exit code 3',
      exit_code: 3,
      consecutive_failures: 1,
      consecutive_skips: 0,
      run_id: expect.stringMatching(/^r-/),
      log: expect.stringMatching(/\.routinely\/logs\/flaky\.log$/),
    });
    expect(Object.keys(flaky[0]!).sort()).toEqual(
      [
        'consecutive_failures',
        'consecutive_skips',
        'event',
        'exit_code',
        'finished_at',
        'host',
        'log',
        'next',
        'output_tail',
        'project',
        'result',
        'routine',
        'run_id',
        'scheduled_at',
        'why',
      ].sort(),
    );
    expect(hook.payloads().filter((p) => p.routine === 'quiet')).toEqual([]);

    // hold the exec lock: every routine is skipped; `blocked` is starved once, after 3 skips.
    // Waiting its turn: a fire of this second may hold the lock, or others be queued for it
    // (they come first), and `--if-busy fail` would then be refused at once
    const holder = startCli(
      ['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; while [ ! -f go ]; do sleep 0.05; done'],
      { cwd: project },
    );
    await holder.waitFor(/holding/);
    await s.waitFor(
      /skipped blocked: exec busy[^]*skipped blocked: exec busy[^]*skipped blocked: exec busy[^]*skipped blocked: exec busy/,
    );
    await eventually(() => hook.payloads().some((p) => p.event === 'starved'), 10_000, 'starved');
    writeFileSync(join(project, 'go'), '');
    await holder.exited;
    await s.waitFor(/succeeded blocked/);
    await stop(s);
    const events = hook.payloads().map((p) => `${String(p.routine)}:${String(p.event)}`);
    expect(events.filter((e) => e === 'blocked:starved')).toHaveLength(1);
    // the skips of flaky (which notifies failures and recoveries) announced nothing
    expect(events.filter((e) => e.startsWith('flaky:'))).toEqual(['flaky:failure', 'flaky:recovery']);
    expect(hook.payloads().find((p) => p.event === 'starved')).toMatchObject({
      routine: 'blocked',
      result: 'skipped',
      consecutive_skips: 3,
    });
  });

  it('a webhook that is down never changes a result, and says so in the log', async () => {
    const port = await closedPort();
    const project = testProject({
      notify: { webhook: `http://127.0.0.1:${port}/hook` },
      routines: [cmd('bad', '* * * * * *', 'exit 5')],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[notify\] /, 60_000);
    await stop(s);
    expect(s.stdout()).toMatch(/failed bad: exit code 5/);
    const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      last_result: string;
      last_reason: string;
    }[];
    expect(rows[0]).toMatchObject({ last_result: 'failure', last_reason: 'exit code 5' });
  });
});

describe('the scheduler stopping (SIGTERM) still announces', () => {
  it('a failure that ends while it stops, and one whose retries the stop cut short: delivered before it exits', async () => {
    const hook = await webhookServer();
    const project = testProject({
      notify: { webhook: hook.url },
      routines: [
        cmd('slowfail', '*/2 * * * * *', 'echo started; sleep 2; exit 4', { starvedAfterSkips: 1000 }),
        cmd('retried', '*/2 * * * * *', 'exit 6', { retry: { attempts: 3, backoffSeconds: 300 } }),
      ],
    });
    const s = startCli(['scheduler', 'start', '--shutdown-timeout', '30'], { cwd: project, timeoutMs: 60_000 });
    // the stop comes while slowfail runs and while retried waits out its back-off
    await s.waitFor(/\[routine\] retrying retried /, 30_000);
    await s.waitFor(/started slowfail/, 30_000);
    await stop(s);
    const events = hook.payloads().map((p) => `${p.event} ${p.routine}`);
    expect(events, s.stdout()).toContain('failure slowfail');
    expect(events, s.stdout()).toContain('failure retried');
    expect(s.stdout()).not.toMatch(/failed after \d+ attempts?: stopped/);
  });
});

describe('the scheduler SIGKILLed', () => {
  it('ends a notify command under way with it: a delivery cut short is never sent later (the timer died with it)', async () => {
    // the command would wait 60 s, then deliver: past its 10 s, the kill and any restart
    const project = testProject({
      notify: { command: 'echo $$ > notify.pid; sleep 60; echo "sent $ROUTINELY_EVENT" >> late.log' },
      routines: [cmd('bad', '* * * * * *', 'exit 3')],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    // (the whole line: a file just created is empty, and pid 0 would name this very process group,
    // which the clean-up below would then SIGKILL, with the test runner in it)
    const pidFile = join(project, 'notify.pid');
    await eventually(
      () => existsSync(pidFile) && /^[1-9]\d*\n$/.test(readFileSync(pidFile, 'utf8')),
      20_000,
      'the notify command',
    );
    const pid = Number(readFileSync(pidFile, 'utf8'));
    onTestFinished(() => {
      try {
        process.kill(-pid, 'SIGKILL'); // (its group, should the guard not have ended it)
      } catch {
        /* gone */
      }
    });
    expect(processRuns(pid)).toBe(true);
    // that process, not one that has its pid later (other tests start `sleep 60` too)
    const startOf = (): string | undefined => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
        return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      } catch {
        return undefined;
      }
    };
    const born = startOf();
    // the death guard (an `sh` child of the scheduler), found before the kill: what a failure
    // reports of it. (Under load the command outlived its scheduler now and then: the guard was
    // started only once the command's spawn returned, and the command had written its pid, and
    // the kill landed, before that. The attempt's notify id is now told the guard first.)
    const guards = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          const stat = readFileSync(`/proc/${d}/stat`, 'latin1');
          return (
            Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === s.child.pid &&
            readFileSync(`/proc/${d}/cmdline`, 'latin1').includes('routinely-guard')
          );
        } catch {
          return false;
        }
      });
    const looked = (p: string): string => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'latin1');
        const wchan = readFileSync(`/proc/${p}/wchan`, 'latin1');
        return `${p}: ${stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 40)} wchan ${wchan}`;
      } catch {
        return `${p}: gone`;
      }
    };
    s.child.kill('SIGKILL');
    await s.exited;
    await eventually(
      () => !processRuns(pid) || startOf() !== born,
      30_000,
      'the notify command ended with its scheduler',
      () =>
        `guards found before the kill: ${guards.length === 0 ? 'none' : guards.map(looked).join('; ')}; the command ${looked(String(pid))}\n${s.stdout()}${s.stderr()}`,
    );
    expect(existsSync(join(project, 'late.log'))).toBe(false);
  });
});

describe('routine run notifies', () => {
  it('the failure of a manual fire stopped by SIGTERM: recorded and sent before it exits (it was recorded, its delivery cut short; fault pass)', async () => {
    const hook = await webhookServer();
    const project = testProject({ notify: { webhook: hook.url }, routines: [cmd('long', '0 0 1 1 *', 'sleep 30')] });
    const p = startCli(['routine', 'run', 'long'], { cwd: project });
    await p.waitFor(/started long/);
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(143);
    expect(hook.payloads()).toEqual([
      expect.objectContaining({ event: 'failure', routine: 'long', why: 'stopped by SIGTERM' }),
    ]);
    expect(p.stderr()).not.toMatch(/failed after 1 attempt: stopped/);
  });

  it('a failure of a manual fire', async () => {
    const hook = await webhookServer();
    const project = testProject({ notify: { webhook: hook.url }, routines: [cmd('manual', '0 0 1 1 *', 'exit 7')] });
    const r = await runCli(['routine', 'run', 'manual'], { cwd: project });
    expect(r.code).toBe(1);
    expect(hook.payloads()).toEqual([
      expect.objectContaining({ event: 'failure', routine: 'manual', exit_code: 7, why: 'exit code 7' }),
    ]);
    expect(existsSync(join(project, '.routinely', 'logs', 'manual.log'))).toBe(true);
  });

  it("carries the run's last 20 lines of output, escaped, as cron mails a job's output; outputLines 0 leaves them out", async () => {
    const hook = await webhookServer();
    // 25 lines, the last with a terminal escape and a tab
    const run = "for i in $(seq 1 24); do echo line $i; done; printf '\\033[2Jgone\\tcol\\n'; exit 3";
    const project = testProject({
      notify: { webhook: hook.url },
      routines: [
        cmd('noisy', '0 0 1 1 *', run),
        cmd('terse', '0 0 1 1 *', run, { notify: { webhook: hook.url, outputLines: 0 } }),
      ],
    });
    expect((await runCli(['routine', 'run', 'noisy'], { cwd: project })).code).toBe(1);
    expect((await runCli(['routine', 'run', 'terse'], { cwd: project })).code).toBe(1);
    const [noisy, terse] = hook.payloads();
    const tail = Array.from({ length: 19 }, (_, i) => `line ${i + 6}`)
      .concat('\\x1b[2Jgone\\x09col')
      .join('\n');
    expect(noisy).toMatchObject({ routine: 'noisy', event: 'failure', output_tail: tail });
    expect(terse).toMatchObject({ routine: 'terse', event: 'failure' });
    expect(terse).not.toHaveProperty('output_tail');
  });

  it('a run that printed one line of megabytes sends its end, at most 16 KiB, not the line (a fault pass sent 20 MB)', async () => {
    const hook = await webhookServer();
    const project = testProject({
      notify: { webhook: hook.url },
      routines: [cmd('flood', '0 0 1 1 *', "head -c 1000000 /dev/zero | tr '\\0' x; printf 'END'; exit 3")],
    });
    expect((await runCli(['routine', 'run', 'flood'], { cwd: project })).code).toBe(1);
    const [payload] = hook.payloads() as { output_tail: string }[];
    expect(payload!.output_tail.length).toBe(16 * 1024 + 1);
    expect(payload!.output_tail).toMatch(/^…x+END$/);
  });
});
