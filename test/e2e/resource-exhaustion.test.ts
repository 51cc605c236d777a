// Out of file descriptors (issue 49, item 2), with a real `ulimit -n` in the shell that starts
// the built CLI: a fire that cannot start is that fire's failure, recorded with its cause; the
// scheduler stays up, says it once, and stops cleanly; `exec run` records its run and releases
// its lock.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { onTestFinished } from 'vitest';
import { childEnv, CLI, eventually, runCli } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

/** The CLI with at most `n` open descriptors (a shell sets the limit, then becomes the CLI). */
function limited(args: string[], cwd: string, n = 64) {
  const child = spawn('/bin/sh', ['-c', `ulimit -n ${n} && exec "$0" "$@"`, process.execPath, CLI, ...args], {
    cwd,
    env: childEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null }>((r) => child.once('close', (code) => r({ code })));
  onTestFinished(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return {
    child,
    exited,
    stdout: () => out,
    stderr: () => err,
    waitFor: (re: RegExp, limitMs: number) =>
      eventually(
        () => re.test(out),
        limitMs,
        String(re),
        () => out + err,
      ),
  };
}

/** A project of 30 tasks of `sleep 0.3`, 8 at a time. */
function thirtyTasksEightAtATime(): string {
  const project = testdir('routinely-emfile-');
  const tasks = Array.from({ length: 30 }, (_, i) => ({ id: `t${i}`, run: 'sleep 0.3' }));
  writeFileSync(
    join(project, 'routinely.json'),
    JSON.stringify({ exec: { parallel: 8, providers: { default: { maxConcurrency: 8 } }, tasks } }),
  );
  return project;
}

describe('out of file descriptors', () => {
  it(
    '30 routines each second under ulimit -n 64: fires that cannot start fail with the cause, the scheduler says it once and stays up',
    { timeout: 90_000 },
    async () => {
      const project = testdir('routinely-emfile-');
      const routines = Array.from({ length: 30 }, (_, i) => ({
        id: `r${i}`,
        schedule: '* * * * * *',
        action: 'command',
        run: 'sleep 1.5',
        exclusive: false,
      }));
      writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines }));
      const s = limited(['scheduler', 'start'], project);
      await s.waitFor(
        /\[scheduler\] warning: out of file descriptors \(EMFILE\): fires fail to start while it lasts/,
        30_000,
      );
      // it carries on: later ticks still fire
      const ticks = (): number => (s.stdout().match(/\[routine\] (succeeded|failed) /g) ?? []).length;
      const seen = ticks();
      await eventually(
        () => ticks() > seen + 30,
        30_000,
        'more fires after the warning',
        () => s.stdout(),
      );
      s.child.kill('SIGTERM');
      const end = await s.exited;
      expect([end.code, s.stderr()]).toEqual([0, '']);
      expect(s.stdout().match(/out of file descriptors/g)).toHaveLength(1);
      expect(s.stdout()).toMatch(/\[routine\] failed r\d+: could not start: \/bin\/sh: Too many open files \(EMFILE\)/);
      // each such fire is recorded with its cause, as routine history shows it
      const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
        id: string;
        counts: { failure: number };
      }[];
      const failed = rows.find((r) => r.counts.failure > 0)!;
      const history = JSON.parse(
        (await runCli(['routine', 'history', failed.id, '--json'], { cwd: project })).stdout,
      ) as { result: string; reason: string | null }[];
      expect(history.some((h) => h.result === 'failure' && /Too many open files \(EMFILE\)/.test(h.reason ?? ''))).toBe(
        true,
      );
      expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout)).toMatchObject({
        state: 'free',
      });
    },
  );

  it(
    'exec run --parallel 40 under ulimit -n 24 (room for no task, the run itself short of descriptors): the run is recorded, the lock released, no crash',
    { timeout: 60_000 },
    async () => {
      const project = testdir('routinely-emfile-');
      writeFileSync(
        join(project, 'routinely.json'),
        JSON.stringify({ exec: { tasks: Array.from({ length: 40 }, (_, i) => ({ id: `t${i}`, run: 'sleep 0.5' })) } }),
      );
      // (under 64, and down to about 28, tasks wait for room and the run succeeds)
      const r = limited(['exec', 'run', '--parallel', '40'], project, 24);
      const end = await r.exited;
      expect(end.code, r.stderr()).toBe(1);
      expect(r.stderr()).not.toMatch(/unexpected error|at .*\.js:\d+/);
      expect(r.stdout()).toMatch(/^run (r-\S+) (FAILED|ABORTED)/m);
      // out of descriptors is said as such, with what helps (not "free space")
      expect(r.stdout()).toMatch(
        /next: raise the open-file limit \(ulimit -n\) or lower --parallel, then: routinely exec resume r-/,
      );
      expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout)).toMatchObject({
        state: 'free',
      });
      const runs = await runCli(['exec', 'runs'], { cwd: project });
      expect(runs.stdout).toMatch(/r-\S+ +(FAILED|ABORTED)/);
    },
  );

  it(
    'exec run, 8 at a time under ulimit -n 38: a task that cannot start for want of descriptors is tried again once others free some, never failed at once with the rest of the queue after it',
    { timeout: 60_000 },
    async () => {
      const project = thirtyTasksEightAtATime();
      const r = limited(['exec', 'run'], project, 38);
      await r.exited;
      expect(r.stderr()).not.toMatch(/unexpected error|at .*\.js:\d+/);
      const runId = /^run (r-[^\s:]+)/m.exec(r.stdout())![1]!;
      const shown = JSON.parse((await runCli(['exec', 'show', runId, '--json'], { cwd: project })).stdout) as {
        tasks: Record<string, { status: string; why_code?: string | null }>;
      };
      const results = Object.entries(shown.tasks);
      // (before: the 8 first ones succeeded, and the 22 after them failed in milliseconds)
      expect(results.filter(([, t]) => t.status === 'succeeded').length).toBeGreaterThan(8);
      const logOf = (id: string): string =>
        readFileSync(join(project, '.routinely', 'exec', 'runs', runId, `${id}.log`), 'utf8');
      // a task that could not start was tried again (said in its log), not failed at once
      expect(results.some(([id]) => /Too many open files \(EMFILE\); trying again/.test(logOf(id)))).toBe(true);
    },
  );

  it(
    'exec run, 8 at a time under ulimit -n 32: every task runs — a start that failed for want of descriptors gives back all it took, and a task waiting for room holds none',
    { timeout: 60_000 },
    async () => {
      const project = thirtyTasksEightAtATime();
      const r = limited(['exec', 'run'], project, 32);
      const end = await r.exited;
      // (before: each failed start kept its output pipe's descriptor, and each waiting task its
      // log, so fewer tasks could run after each round: 16 of 30 succeeded, the rest failed)
      expect(r.stdout(), r.stderr()).toMatch(/^run r-\S+ SUCCEEDED: 30 succeeded/m);
      expect(end.code).toBe(0);
    },
  );
});
