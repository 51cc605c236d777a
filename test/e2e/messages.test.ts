// What the exec commands say when the lock is busy, when they wait, and after a failed or
// resumed run: each message tells the user what happened and what to run next.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunState } from '../../src/exec/run-state.js';
import { runCli, sleep, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

/** Holds the exec lock until the file `go` appears in the project. */
function holdLock(project: string) {
  return startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; while [ ! -f go ]; do sleep 0.02; done'], {
    cwd: project,
  });
}

const failing = () =>
  testProject({
    exec: {
      tasks: [
        { id: 'package', run: 'test -f LICENSE || { echo "LICENSE is missing" >&2; exit 1; }' },
        { id: 'publish', run: 'echo published', dependsOn: ['package'] },
        { id: 'lint', run: 'echo linted' },
      ],
    },
  });

describe('a busy exec lock', () => {
  it('exec run with the default --if-busy fail keeps the SPEC line and suggests --if-busy wait', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    const holder = holdLock(project);
    await holder.waitFor(/started/);
    const r = await runCli(['exec', 'run'], { cwd: project });
    expect(r.code).toBe(75);
    expect(r.stderr).toMatch(
      new RegExp(
        `^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago\\n {2}to wait for it instead, add --if-busy wait \\(--wait-timeout S gives up after S seconds\\)\\n$`,
      ),
    );
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
  });

  it('exec run --json refused or skipped as busy answers in JSON on stdout, as exec resume --json does', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    const holder = holdLock(project);
    await holder.waitFor(/started/);
    const refused = await runCli(['exec', 'run', '--json'], { cwd: project });
    expect(refused.code).toBe(75);
    expect(JSON.parse(refused.stdout)).toEqual({
      status: 'CONFLICT',
      why_code: 'LOCK_CONFLICT',
      why: expect.stringMatching(new RegExp(`^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\)`)),
      next: 'wait for it to finish, or: routinely exec run --if-busy wait',
    });
    const skipped = await runCli(['exec', 'run', '--json', '--if-busy', 'skip'], { cwd: project });
    expect(skipped.code).toBe(0);
    expect(JSON.parse(skipped.stdout)).toMatchObject({ status: 'CONFLICT', next: 'skipped; try again later' });
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
  });

  it.each([
    [['exec', 'run', '--if-busy', 'wait'], /run r-\S+ SUCCEEDED/],
    [['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '60', '--', 'echo', 'got it'], /^got it$/m],
    [['register', '--if-busy', 'wait'], /1 new, 0 changed, 0 retired/],
    [['routine', 'run', 'tick', '--if-busy', 'wait'], /succeeded tick/],
  ])('%j says once, on stderr, whom it waits for', async (args, done) => {
    const project = testProject({
      exec: { tasks: [{ id: 'a', run: 'true' }] },
      routines: [{ id: 'tick', schedule: '@daily', action: 'command', run: 'echo tick' }],
    });
    const holder = holdLock(project);
    await holder.waitFor(/started/);
    const waiter = startCli(args, { cwd: project });
    await waiter.waitFor(/waiting for the exec lock/);
    await sleep(300); // a few polls of the wait loop: none of them may say it again
    writeFileSync(join(project, 'go'), '');
    expect((await waiter.exited).code).toBe(0);
    const limit = args.includes('--wait-timeout') ? '; giving up after 60s' : '';
    expect(waiter.stderr()).toMatch(
      new RegExp(
        `^waiting for the exec lock, held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago${limit}\\n$`,
      ),
    );
    expect(waiter.stdout()).toMatch(done);
  });

  it('a free lock is taken without a word about waiting', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    const r = await runCli(['exec', 'run', '--if-busy', 'wait'], { cwd: project });
    expect(r).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('after a failed run', () => {
  it('exec show does not send the user to exec show of the same run', async () => {
    const project = failing();
    const run = await runCli(['exec', 'run'], { cwd: project });
    expect(run.code).toBe(1);
    const id = /^run (r-\S+) FAILED/m.exec(run.stdout)![1]!;
    expect(run.stdout).toContain(
      `  next: routinely exec show ${id} (logs beside it), fix, then: routinely exec resume ${id}`,
    );
    const show = await runCli(['exec', 'show', id], { cwd: project });
    expect(show.code).toBe(0);
    expect(show.stdout).not.toContain('exec show');
    expect(show.stdout).toContain(`  next: fix the failed tasks (logs below), then: routinely exec resume ${id}\n`);
  });

  it('exec resume without an id says how to resume the failed run, exit 0; with the id it resumes it', async () => {
    const project = failing();
    const run = await runCli(['exec', 'run'], { cwd: project });
    const id = /^run (r-\S+) FAILED/m.exec(run.stdout)![1]!;
    const r = await runCli(['exec', 'resume'], { cwd: project });
    expect(r).toMatchObject({
      code: 0,
      stderr: '',
      stdout: `nothing interrupted to resume; the newest run ${id} FAILED (1 task failed, 1 skipped); fix them and run: routinely exec resume ${id}\n`,
    });
    const json = JSON.parse((await runCli(['exec', 'resume', '--json'], { cwd: project })).stdout) as Record<
      string,
      string
    >;
    expect(json).toMatchObject({ status: 'NOTHING_TO_RESUME', next: `routinely exec resume ${id}` });
    writeFileSync(join(project, 'LICENSE'), 'MIT\n');
    const resumed = await runCli(['exec', 'resume', id], { cwd: project });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`^run ${id} SUCCEEDED \\(resume, attempt 2\\): 3 succeeded in `, 'm'));
    expect((await runCli(['exec', 'resume'], { cwd: project })).stdout).toBe('nothing to resume\n');
  });

  it('a resumed run reports the time of the resume, not the time since the run was created', async () => {
    const project = failing();
    const id = /^run (r-\S+) FAILED/m.exec((await runCli(['exec', 'run'], { cwd: project })).stdout)![1]!;
    await sleep(1200); // the run's age at resume: what the summary must not report
    writeFileSync(join(project, 'LICENSE'), 'MIT\n');
    const resumed = await runCli(['exec', 'resume', id], { cwd: project });
    const state = JSON.parse((await runCli(['exec', 'show', id, '--json'], { cwd: project })).stdout) as RunState;
    expect(Date.parse(state.resumed_at!) - Date.parse(state.created_at)).toBeGreaterThanOrEqual(1200);
    const own = `${((Date.parse(state.finished_at!) - Date.parse(state.resumed_at!)) / 1000).toFixed(1)}s`;
    expect(resumed.stdout).toMatch(
      new RegExp(`^run ${id} SUCCEEDED \\(resume, attempt 2\\): 3 succeeded in ${own.replace('.', '\\.')}$`, 'm'),
    );
    const show = await runCli(['exec', 'show', id], { cwd: project });
    expect(show.stdout).toContain(
      `  started ${state.created_at}, resumed ${state.resumed_at}, finished ${state.finished_at} (${own})\n`,
    );
  });
});

describe('exec status before the first register', () => {
  it('names the tasks the config defines and what registers them; a config without tasks says only to register', async () => {
    const defined = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }], taskDirs: ['tasks'] } });
    mkdirSync(join(defined, 'tasks'), { mode: 0o700 });
    const r = await runCli(['exec', 'status'], { cwd: defined });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      'no tasks registered yet (the config defines 1 task in exec.tasks and exec.taskDirs "tasks"): `routinely register` registers them, `routinely exec run` registers and runs them\n',
    );
    const none = await runCli(['exec', 'status'], { cwd: testProject({}) });
    expect(none.stdout).toBe('no tasks registered (run `routinely register`)\n');
  });
});
