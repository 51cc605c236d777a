// `routinely register` and `routinely exec …` end to end: the built CLI, real tasks (sh -c),
// real signals.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadRun } from '../../src/exec/run-store.js';
import type { RunState } from '../../src/exec/run-state.js';
import { eventually, lineIn, processRuns, runCli, sleep, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const runsDir = (p: string): string => join(p, '.routinely', 'exec', 'runs');
const runIds = (p: string): string[] => (existsSync(runsDir(p)) ? readdirSync(runsDir(p)).sort() : []);
const lastRun = (p: string): RunState => loadRun(runsDir(p), runIds(p).at(-1)!)!;
const lockFile = (p: string): string => join(p, '.routinely', 'locks', 'exec-run.lock');

/** A task that logs its start and end (epoch ms) to `events`, sleeping in between. */
const timed = (events: string, secs: number): string =>
  `echo "S $ROUTINELY_TASK_ID $(date +%s%3N)" >> ${events}; sleep ${secs}; echo "E $ROUTINELY_TASK_ID $(date +%s%3N)" >> ${events}`;

/** Like `timed`, but the task then waits until `n` tasks have arrived in the folder `dir`
 * (giving up, exit 9, after 600 rounds of 50 ms: far above normal): such tasks succeed only when
 * the runner runs all `n` at once, however slow the machine. */
const together = (events: string, dir: string, n: number): string =>
  `echo "S $ROUTINELY_TASK_ID $(date +%s%3N)" >> ${events}; mkdir -p ${dir}; touch ${dir}/$ROUTINELY_TASK_ID; i=0; ` +
  `while [ "$(ls ${dir} | wc -l)" -lt ${n} ]; do i=$((i+1)); if [ $i -gt 600 ]; then exit 9; fi; sleep 0.05; done; ` +
  `echo "E $ROUTINELY_TASK_ID $(date +%s%3N)" >> ${events}`;

function intervals(events: string): Map<string, { s: number; e: number }> {
  const m = new Map<string, { s: number; e: number }>();
  for (const line of readFileSync(events, 'utf8').trim().split('\n')) {
    const [k, id, t] = line.split(' ');
    const cur = m.get(id!) ?? { s: 0, e: 0 };
    if (k === 'S') cur.s = Number(t);
    else cur.e = Number(t);
    m.set(id!, cur);
  }
  return m;
}

/** The most tasks (of those matching `filter`) running at any one instant. */
function maxOverlap(iv: Map<string, { s: number; e: number }>, filter: (id: string) => boolean = () => true): number {
  const points: [number, number][] = [];
  for (const [id, { s, e }] of iv) if (filter(id)) points.push([s, 1], [e, -1]);
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let max = 0;
  for (const [, d] of points) max = Math.max(max, (cur += d));
  return max;
}

function hashTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir))
    out[name] = createHash('sha256')
      .update(readFileSync(join(dir, name)))
      .digest('hex');
  return out;
}

describe('register', () => {
  it('syncs the registry by content hash and prints the summary', async () => {
    const project = testProject({
      exec: {
        taskDirs: ['tasks'],
        tasks: [
          { id: 'build', run: 'true' },
          { id: 'lint', run: 'true' },
        ],
      },
    });
    mkdirSync(join(project, 'tasks'));
    writeFileSync(
      join(project, 'tasks', 'more.json'),
      JSON.stringify([{ id: 'docs', run: 'true', dependsOn: ['build'] }]),
    );
    expect((await runCli(['register'], { cwd: project })).stdout).toBe('3 new, 0 changed, 0 retired\n');
    expect((await runCli(['register'], { cwd: project })).stdout).toBe('0 new, 0 changed, 0 retired\n');
    writeFileSync(
      join(project, 'tasks', 'more.json'),
      JSON.stringify({ id: 'docs', run: 'make docs', dependsOn: ['build'] }),
    );
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ exec: { taskDirs: ['tasks'], tasks: [{ id: 'build', run: 'true' }] } }),
    );
    expect((await runCli(['register'], { cwd: project })).stdout).toBe('0 new, 1 changed, 1 retired\n');
    const status = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as {
      id: string;
      status: string;
      source: string;
    }[];
    expect(Object.fromEntries(status.map((t) => [t.id, t.status]))).toEqual({
      build: 'pending',
      lint: 'retired',
      docs: 'pending',
    });
    expect(status.find((t) => t.id === 'docs')?.source).toBe('tasks/more.json');
  });

  it('rejects bad task files with exit 2, naming the file and path', async () => {
    const project = testProject({ exec: { taskDirs: ['tasks'], tasks: [{ id: 'build', run: 'true' }] } });
    mkdirSync(join(project, 'tasks'));
    writeFileSync(
      join(project, 'tasks', 'bad.json'),
      JSON.stringify([
        { id: 'build', run: 'x' },
        { id: 'x', run: 'y', dependsOn: ['x'] },
      ]),
    );
    const r = await runCli(['register'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('tasks/bad.json: [0].id: "build" is a duplicate (also exec.tasks[0])');
    expect(r.stderr).toContain('tasks/bad.json: [1].dependsOn[0]: "x" is the task itself');
    writeFileSync(join(project, 'tasks', 'bad.json'), '{ nope');
    expect((await runCli(['exec', 'run'], { cwd: project })).stderr).toMatch(
      /tasks\/bad\.json: line 1, column 3: invalid JSON: expected a property name in double quotes, found "n"/,
    );
    writeFileSync(join(project, 'tasks', 'bad.json'), '[\n  { "id": "a", "run": "true" },\n]\n');
    expect((await runCli(['exec', 'run'], { cwd: project })).stderr).toMatch(
      /tasks\/bad\.json: line 2, column 31: invalid JSON: trailing comma before "\]"/,
    );
  });
});

describe('exec run', () => {
  it('runs at most N at once, at most maxConcurrency per provider, dependencies first', async () => {
    const project = testProject();
    const ev = join(project, 'events');
    const tasks = [
      { id: 'build', run: timed(ev, 0.4) },
      { id: 'docs', run: timed(ev, 0.2), dependsOn: ['build'] },
      ...['a1', 'a2', 'a3'].map((id) => ({ id, run: timed(ev, 0.3), provider: 'agent' })),
      // b1..b3 wait for each other: they succeed only if the runner runs three at once
      ...['b1', 'b2', 'b3'].map((id) => ({ id, run: together(ev, join(project, 'together'), 3) })),
      { id: 'b4', run: timed(ev, 0.3) },
    ];
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ exec: { parallel: 3, providers: { agent: { maxConcurrency: 1 } }, tasks } }),
    );
    const r = await runCli(['exec', 'run'], { cwd: project, timeoutMs: 120_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/SUCCEEDED: 9 succeeded/);
    const iv = intervals(ev);
    expect(iv.size).toBe(9);
    expect(maxOverlap(iv)).toBeLessThanOrEqual(3);
    expect(maxOverlap(iv, (id) => id.startsWith('a'))).toBe(1);
    expect(iv.get('docs')!.s).toBeGreaterThanOrEqual(iv.get('build')!.e);
    const run = lastRun(project);
    expect(run).toMatchObject({ status: 'SUCCEEDED', attempt: 1 });
    expect(readFileSync(join(runsDir(project), run.run_id, 'build.log'), 'utf8')).toBe('');
  });

  it('--parallel overrides the config, and named tasks run as asked', async () => {
    const project = testProject();
    const ev = join(project, 'events');
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ exec: { parallel: 4, tasks: ['x', 'y', 'z'].map((id) => ({ id, run: timed(ev, 0.2) })) } }),
    );
    expect((await runCli(['exec', 'run', 'x', 'y', '--parallel', '1'], { cwd: project })).code).toBe(0);
    const iv = intervals(ev);
    expect([...iv.keys()].sort()).toEqual(['x', 'y']);
    expect(maxOverlap(iv)).toBe(1);
    const unknown = await runCli(['exec', 'run', 'nope'], { cwd: project });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown task "nope" \(known: x, y, z\)/);
    expect((await runCli(['exec', 'run', '--parallel', '0'], { cwd: project })).code).toBe(2);
    // 20 digits: too large, said as such (Number() had rounded it into "no whole number")
    const huge = await runCli(['exec', 'run', '--parallel', '99999999999999999999'], { cwd: project });
    expect(huge.code).toBe(2);
    expect(huge.stderr).toMatch(
      /--parallel takes a whole number of at least 1, got "99999999999999999999", which is too large/,
    );
  });

  it('a failure skips its dependants but not unrelated tasks; exit 1 with why and next', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'build', run: 'echo compiling; echo oops >&2; exit 3' },
          { id: 'docs', run: 'true', dependsOn: ['build'] },
          { id: 'site', run: 'true', dependsOn: ['docs'] },
          { id: 'lint', run: 'true' },
        ],
      },
    });
    const r = await runCli(['exec', 'run', '--json'], { cwd: project });
    expect(r.code).toBe(1);
    const run = JSON.parse(r.stdout) as RunState;
    expect(run.status).toBe('FAILED');
    expect(run.why_code).toBe('TASK_FAILED');
    expect(run.next).toContain(`routinely exec resume ${run.run_id}`);
    expect(run.tasks.build).toMatchObject({ status: 'failed', exit_code: 3, why_code: 'TASK_FAILED' });
    expect(run.tasks.docs).toMatchObject({ status: 'skipped_dependency', why_code: 'DEPENDENCY_FAILED' });
    expect(run.tasks.site?.status).toBe('skipped_dependency');
    expect(run.tasks.lint?.status).toBe('succeeded');
    expect(readFileSync(join(runsDir(project), run.run_id, 'build.log'), 'utf8')).toBe('compiling\noops\n');
    // the next run has nothing ready: build failed, its dependants wait for it
    const again = await runCli(['exec', 'run'], { cwd: project });
    // it says why, and what runs them again
    expect(again).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(
        /^nothing to run: \d+ succeeded, 1 failed, 2 waiting for a failed dependency\n  routinely exec resume retries the failed and interrupted tasks of their run\n  routinely exec reset TASK… sets tasks back to pending for the next exec run\n$/,
      ),
    });
    // reset, fix, run: the dependants follow
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({
        exec: {
          tasks: [
            { id: 'build', run: 'true' },
            { id: 'docs', run: 'true', dependsOn: ['build'] },
            { id: 'site', run: 'true', dependsOn: ['docs'] },
            { id: 'lint', run: 'true' },
          ],
        },
      }),
    );
    const fixed = await runCli(['exec', 'run', '--json'], { cwd: project });
    expect(Object.keys((JSON.parse(fixed.stdout) as RunState).tasks)).toEqual(['build', 'docs', 'site']);
    expect(fixed.code).toBe(0);
  });

  it('a timeout kills the task with its grandchildren', async () => {
    const project = testProject({
      exec: { tasks: [{ id: 'hang', run: 'sleep 60 & echo $! > gc.pid; wait', timeoutSeconds: 0.5 }] },
    });
    const r = await runCli(['exec', 'run', '--json'], { cwd: project });
    expect(r.code).toBe(1);
    const run = JSON.parse(r.stdout) as RunState;
    expect(run.tasks.hang).toMatchObject({
      status: 'failed',
      why_code: 'TASK_TIMEOUT',
      why: 'timed out (timeoutSeconds: 0.5)',
    });
    const gc = Number(readFileSync(join(project, 'gc.pid'), 'utf8'));
    await eventually(() => !processRuns(gc), 5000, 'grandchild gone');
    // the limit once, the time taken once: never "timed out after 0.5s in 0.5s"
    const plain = await runCli(['exec', 'run', 'hang'], { cwd: project });
    expect(plain.stdout).toMatch(/^failed hang: timed out \(timeoutSeconds: 0\.5\) in \d+\.\ds {2}\(log: /m);
    const id = /^run (r-\S+) FAILED/m.exec(plain.stdout)![1]!;
    expect((await runCli(['exec', 'show', id], { cwd: project })).stdout).toMatch(
      /^ {2}hang {2}failed +(exit \d+ )?\d+\.\ds {2}— timed out \(timeoutSeconds: 0\.5\)$/m,
    );
  });

  it('--timeout stops the whole run: ABORTED / RUN_TIMEOUT, what had not ended interrupted, what had not started left pending; a timeout that falls while only the leftovers of ended tasks are being ended (the kill grace) stops nothing', async () => {
    // a background child that ignores SIGTERM: ending it takes the 5 s kill grace after its task exited 0
    // (the task waits until the child has set its trap: a loaded machine may run the clean-up first)
    const stubborn = `rm -f trapped; sh -c 'trap "" TERM; touch trapped; sleep 30' & while [ ! -e trapped ]; do sleep 0.01; done; echo done`;
    const project = testProject({
      exec: {
        tasks: [
          { id: 'quick', run: stubborn },
          { id: 'after', run: 'true', dependsOn: ['quick'] },
          { id: 'slow', run: 'sleep 30' },
        ],
      },
    });
    const only = await runCli(['exec', 'run', 'quick', '--timeout', '3', '--json'], { cwd: project });
    expect(only.code, only.stdout + only.stderr).toBe(0);
    expect(JSON.parse(only.stdout)).toMatchObject({ status: 'SUCCEEDED', tasks: { quick: { status: 'succeeded' } } });
    expect((await runCli(['exec', 'runs'], { cwd: project })).stdout).not.toMatch(/ABORTED/);
    // the same timeout with a task still to start after it: that one is cut short
    const chain = await runCli(['exec', 'run', 'quick', 'after', '--timeout', '3', '--json'], { cwd: project });
    expect(chain.code).toBe(1);
    expect(JSON.parse(chain.stdout)).toMatchObject({
      status: 'ABORTED',
      why_code: 'RUN_TIMEOUT',
      tasks: { quick: { status: 'succeeded' }, after: { status: 'pending' } },
    });
    const slow = await runCli(['exec', 'run', 'slow', '--timeout', '1', '--json'], { cwd: project });
    expect(slow.code).toBe(1);
    expect(JSON.parse(slow.stdout)).toMatchObject({
      status: 'ABORTED',
      why_code: 'RUN_TIMEOUT',
      tasks: { slow: { status: 'interrupted', why_code: 'RUN_TIMEOUT' } },
    });
  });

  it('runs tasks in the project root or their cwd, with their env and the routinely variables', async () => {
    const project = testProject({
      exec: {
        tasks: [
          {
            id: 'where',
            run: 'echo "$PWD $GREETING $ROUTINELY_TASK_ID $ROUTINELY_RUN_ID"',
            env: { GREETING: 'hi' },
            cwd: 'sub',
          },
        ],
      },
    });
    mkdirSync(join(project, 'sub'));
    expect((await runCli(['exec', 'run'], { cwd: join(project, 'sub') })).code).toBe(0);
    const run = lastRun(project);
    expect(readFileSync(join(runsDir(project), run.run_id, 'where.log'), 'utf8')).toBe(
      `${join(project, 'sub')} hi where ${run.run_id}\n`,
    );
  });

  it('busy: exit 75 naming the holder; skip exits 0 and starts no run', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 30'], { cwd: project });
    await holder.waitFor(/started/);
    const r = await runCli(['exec', 'run'], { cwd: project });
    expect(r.code).toBe(75);
    expect(r.stderr).toMatch(/^exec busy: held by pid \d+ on .* \(lock run\)/);
    expect(await runCli(['exec', 'run', '--if-busy', 'skip'], { cwd: project })).toMatchObject({
      code: 0,
      stdout: 'skipped: exec busy\n',
    });
    expect(runIds(project)).toEqual([]);
    holder.child.kill('SIGTERM');
    await holder.exited;
  });

  it('SIGTERM: tasks stopped, run INTERRUPTED, lock free, exit 143; resume finishes it', async () => {
    const project = testProject({
      exec: {
        parallel: 2,
        tasks: [
          { id: 'quick', run: 'true' },
          { id: 'slow', run: 'echo "slow $$" > slow.pid; sleep 60' },
          { id: 'after', run: 'true', dependsOn: ['slow'] },
        ],
      },
    });
    const p = startCli(['exec', 'run'], { cwd: project });
    const slowPid = Number((await lineIn(join(project, 'slow.pid'), /slow (\d+)/, 10_000, 'slow started'))[1]);
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(143);
    expect(existsSync(lockFile(project))).toBe(false);
    expect(processRuns(slowPid)).toBe(false);
    const run = lastRun(project);
    expect(run).toMatchObject({ status: 'INTERRUPTED', why_code: 'INTERRUPTED' });
    expect(run.tasks.quick?.status).toBe('succeeded');
    expect(run.tasks.slow?.status).toBe('interrupted');
    expect(run.tasks.after?.status).toBe('pending');
    // interrupted work belongs to its run: a plain exec run does not pick it up, resume does
    expect((await runCli(['exec', 'run'], { cwd: project })).stdout).toMatch(/^nothing to run: /);
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({
        exec: {
          parallel: 2,
          tasks: [
            { id: 'quick', run: 'true' },
            { id: 'slow', run: 'true' },
            { id: 'after', run: 'true', dependsOn: ['slow'] },
          ],
        },
      }),
    );
    const resumed = await runCli(['exec', 'resume', '--json'], { cwd: project });
    expect(resumed.code).toBe(0);
    const done = JSON.parse(resumed.stdout) as RunState;
    expect(done).toMatchObject({ run_id: run.run_id, status: 'SUCCEEDED', attempt: 2 });
    expect(done.tasks.quick?.attempts).toBe(1); // kept, not run again
    expect(done.tasks.slow?.attempts).toBe(2);
    expect((await runCli(['exec', 'resume'], { cwd: project })).stdout).toBe('nothing to resume\n');
  });

  it('SIGKILL of the whole run mid-task: exec resume redoes only the unfinished tasks', async () => {
    const project = testProject();
    const count = join(project, 'count');
    const tasks = [
      { id: 'one', run: `echo one >> ${count}` },
      { id: 'two', run: `echo two >> ${count}; touch two.started; sleep 60` },
      { id: 'three', run: `echo three >> ${count}`, dependsOn: ['two'] },
    ];
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ exec: { parallel: 1, tasks } }));
    const p = startCli(['exec', 'run'], { cwd: project });
    await eventually(() => existsSync(join(project, 'two.started')), 10_000, 'two started');
    p.child.kill('SIGKILL');
    await p.exited;
    expect(lastRun(project).status).toBe('RUNNING'); // its owner died mid-run
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({
        exec: { parallel: 1, tasks: [tasks[0], { id: 'two', run: `echo two >> ${count}` }, tasks[2]] },
      }),
    );
    const r = await runCli(['exec', 'resume', '--json'], { cwd: project });
    expect(r.code).toBe(0);
    // the run's end it recorded itself (OWNER_DEAD) is no counter lost: nothing said of one
    expect(r.stderr).not.toMatch(/raised the exec-run lock's generation/);
    const run = JSON.parse(r.stdout) as RunState;
    expect(run).toMatchObject({ status: 'SUCCEEDED', attempt: 2 });
    expect(readFileSync(count, 'utf8').trim().split('\n')).toEqual(['one', 'two', 'two', 'three']);
  });

  it('SIGKILL mid-task, the task run alone and succeeded since: exec resume of the killed run does not run it again', async () => {
    const project = testProject();
    const count = join(project, 'count');
    const tasks = [
      { id: 'a', run: `echo a >> ${count}; touch a.started; [ -e go ] || sleep 60` },
      { id: 'c', run: `echo c >> ${count}`, dependsOn: ['a'] },
    ];
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ exec: { tasks } }));
    const p = startCli(['exec', 'run'], { cwd: project });
    await eventually(() => existsSync(join(project, 'a.started')), 10_000, 'a started');
    p.child.kill('SIGKILL');
    await p.exited;
    const killed = lastRun(project).run_id;
    writeFileSync(join(project, 'go'), '');
    // the next command records the killed run's end (OWNER_DEAD) under its own generation, then
    // runs a, under the same generation
    expect((await runCli(['exec', 'run', 'a'], { cwd: project })).code).toBe(0);
    writeFileSync(count, '');
    const r = await runCli(['exec', 'resume', killed, '--json'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(count, 'utf8')).toBe('c\n');
    const run = JSON.parse(r.stdout) as RunState;
    expect(run.status).toBe('SUCCEEDED');
    expect(run.tasks.a).toMatchObject({ status: 'succeeded', why_code: 'SUCCEEDED_SINCE' });
    // and exec status shows a as it last ended: succeeded
    const status = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as {
      id: string;
      status: string;
    }[];
    expect(status.map((t) => [t.id, t.status])).toEqual([
      ['a', 'succeeded'],
      ['c', 'succeeded'],
    ]);
  });

  it('exec resume without a run id: a newest interrupted run whose unfinished tasks all succeeded since is closed, and the older one that still has a task runs it (a fault pass found that task never run again)', async () => {
    const project = testProject();
    const count = join(project, 'count');
    const tasks = [
      { id: 'a', run: `echo a >> ${count}; touch a.started; [ -e go ] || sleep 60` },
      { id: 'b', run: `echo b >> ${count}` },
    ];
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ exec: { parallel: 1, tasks } }));
    // two runs killed while a runs (the first never got to b), then a alone succeeds
    const killedRuns: string[] = [];
    for (const args of [
      ['exec', 'run'],
      ['exec', 'run', 'a'],
    ]) {
      rmSync(join(project, 'a.started'), { force: true });
      const p = startCli(args, { cwd: project });
      await eventually(() => existsSync(join(project, 'a.started')), 10_000, 'a started');
      p.child.kill('SIGKILL');
      await p.exited;
      killedRuns.push(lastRun(project).run_id);
    }
    writeFileSync(join(project, 'go'), '');
    expect((await runCli(['exec', 'run', 'a'], { cwd: project })).code).toBe(0);
    writeFileSync(count, '');
    const r = await runCli(['exec', 'resume', '--json'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(count, 'utf8')).toBe('b\n');
    expect((JSON.parse(r.stdout) as RunState).run_id).toBe(killedRuns[0]);
    for (const id of killedRuns) expect(loadRun(runsDir(project), id)!.status).toBe('SUCCEEDED');
    expect((await runCli(['exec', 'resume'], { cwd: project })).stdout).toMatch(/^nothing to resume/);
  });

  it('exec resume without a run id that only closes a run (its one unfinished task succeeded since) answers with that run, not "nothing to resume" (fault pass)', async () => {
    const project = testProject();
    const count = join(project, 'count');
    const tasks = [{ id: 'a', run: `echo a >> ${count}; touch a.started; [ -e go ] || sleep 60` }];
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ exec: { tasks } }));
    const p = startCli(['exec', 'run'], { cwd: project });
    await eventually(() => existsSync(join(project, 'a.started')), 10_000, 'a started');
    p.child.kill('SIGKILL');
    await p.exited;
    const killed = lastRun(project).run_id;
    writeFileSync(join(project, 'go'), '');
    expect((await runCli(['exec', 'run', 'a'], { cwd: project })).code).toBe(0);
    writeFileSync(count, '');
    const r = await runCli(['exec', 'resume', '--json'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(count, 'utf8')).toBe('');
    expect(JSON.parse(r.stdout) as RunState).toMatchObject({ run_id: killed, status: 'SUCCEEDED' });
    const text = await runCli(['exec', 'resume'], { cwd: project });
    expect(text.stdout).toMatch(/^nothing to resume/);
  });

  it('the lock record of exec run and exec resume names the run from the moment it is linked (cat of the lock tells which run holds it)', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'echo started; [ -e go ] || sleep 30' }] } });
    const lock = join(project, '.routinely', 'locks', 'exec-run.lock');
    const linked = (): { owner: { command: string; run_id?: string } } =>
      JSON.parse(readFileSync(lock, 'utf8')) as { owner: { command: string; run_id?: string } };
    const first = startCli(['exec', 'run'], { cwd: project, timeoutMs: 60_000 });
    await eventually(() => existsSync(lock), 15_000, 'the lock');
    const runId = linked().owner.run_id;
    expect(runId).toMatch(/^r-\d{8}T\d{6}Z-[0-9a-f]+$/);
    await first.waitFor(/started/); // its task runs: the run exists
    expect(runIds(project)).toEqual([runId]);
    first.child.kill('SIGKILL'); // interrupted: left for a resume
    await first.exited;
    // busy meanwhile: a bare resume's conflict names the run it would have resumed
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: project });
    await holder.waitFor(/holding/);
    const bare = await runCli(['exec', 'resume'], { cwd: project });
    expect(bare.code).toBe(75);
    expect(bare.stderr).toContain(`  next: wait for it to finish, or: routinely exec resume ${runId} --if-busy wait`);
    holder.child.kill('SIGTERM');
    await holder.exited;
    const resume = startCli(['exec', 'resume', runId!], { cwd: project, timeoutMs: 60_000 });
    await eventually(() => existsSync(lock) && linked().owner.command === 'exec resume', 15_000, "the resume's lock");
    expect(linked().owner.run_id).toBe(runId);
    writeFileSync(join(project, 'go'), '');
    expect((await resume.exited).code).toBe(0);
  });

  it('resume while another process holds the lock: exit 75, CONFLICT, run files byte-identical', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'exit 1' }] } });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1);
    const id = runIds(project)[0]!;
    const before = hashTree(join(runsDir(project), id));
    const registryBefore = readFileSync(join(project, '.routinely', 'exec', 'tasks.json'), 'utf8');
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 30'], { cwd: project });
    await holder.waitFor(/started/);
    const r = await runCli(['exec', 'resume', id, '--json'], { cwd: project });
    expect(r.code).toBe(75);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'CONFLICT', why_code: 'LOCK_CONFLICT' });
    const plain = await runCli(['exec', 'resume', id], { cwd: project });
    expect(plain.code).toBe(75);
    expect(plain.stderr).toMatch(/exec busy: held by pid \d+.*\n {2}status: CONFLICT \(LOCK_CONFLICT\)/);
    expect(await runCli(['exec', 'resume', '--if-busy', 'skip'], { cwd: project })).toMatchObject({
      code: 0,
      stdout: 'skipped: exec busy\n',
    });
    // the conflict says what to run next about this very run, never a bare resume (which could
    // pick a newer one): also when RUN_ID was not given, the run that was the newest then
    expect(JSON.parse(r.stdout)).toMatchObject({
      run_id: id,
      next: `wait for it to finish, or: routinely exec resume ${id} --if-busy wait`,
    });
    expect(plain.stderr).toContain(`  next: wait for it to finish, or: routinely exec resume ${id} --if-busy wait`);
    expect(hashTree(join(runsDir(project), id))).toEqual(before);
    expect(readFileSync(join(project, '.routinely', 'exec', 'tasks.json'), 'utf8')).toBe(registryBefore);
    holder.child.kill('SIGTERM');
    await holder.exited;
  });

  it('lost lock (SIGSTOP past the TTL): ABORTED / LOCK_LOST, its tasks stopped, nothing else written', async () => {
    const project = testProject({
      lock: { ttlSeconds: 2 },
      exec: { tasks: [{ id: 'long', run: 'echo "pid $$" > long.pid; sleep 60' }] },
    });
    const p = startCli(['exec', 'run'], { cwd: project });
    const taskPid = Number((await lineIn(join(project, 'long.pid'), /pid (\d+)/, 10_000, 'task started'))[1]);
    const id = runIds(project)[0]!;
    process.kill(p.pid, 'SIGSTOP');
    const thief = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo took-over; sleep 2'], {
      cwd: project,
    });
    await thief.waitFor(/took-over/);
    const why = (): string => `exec run: ${p.stdout()} ${p.stderr()} | thief: ${thief.stdout()} ${thief.stderr()}`;
    expect(processRuns(taskPid), why()).toBe(false);
    const snapshotBefore = readFileSync(join(runsDir(project), id, 'run.json'), 'utf8');
    const registryBefore = readFileSync(join(project, '.routinely', 'exec', 'tasks.json'), 'utf8');
    const journalBefore = readFileSync(join(runsDir(project), id, 'journal.jsonl'), 'utf8');
    process.kill(p.pid, 'SIGCONT');
    expect((await p.exited).code, why()).toBe(1);
    expect(p.stdout(), why()).toMatch(/ABORTED/);
    expect(readFileSync(join(runsDir(project), id, 'run.json'), 'utf8')).toBe(snapshotBefore);
    expect(readFileSync(join(project, '.routinely', 'exec', 'tasks.json'), 'utf8')).toBe(registryBefore);
    const journal = readFileSync(join(runsDir(project), id, 'journal.jsonl'), 'utf8');
    expect(journal.startsWith(journalBefore)).toBe(true);
    const added = journal
      .slice(journalBefore.length)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; status: string; why_code: string });
    expect(added, why()).toEqual([
      expect.objectContaining({ type: 'run-finished', status: 'ABORTED', why_code: 'LOCK_LOST' }),
    ]);
    expect(lastRun(project)).toMatchObject({ status: 'ABORTED', why_code: 'LOCK_LOST' });
    expect((await thief.exited).code).toBe(0);
  });

  it('a task that exits 0 while its runner is paused past the TTL: the runner says it succeeded, not recorded (never "stopped"); the record runs it again', async () => {
    const project = testProject({
      lock: { ttlSeconds: 2 },
      exec: { tasks: [{ id: 't1', run: 'echo t1 >> ev; while [ ! -e go ]; do sleep 0.05; done; echo t1done >> ev' }] },
    });
    const p = startCli(['exec', 'run', '--json'], { cwd: project });
    await lineIn(join(project, 'ev'), /t1/, 10_000, 't1 started');
    process.kill(p.pid, 'SIGSTOP');
    try {
      writeFileSync(join(project, 'go'), '');
      await lineIn(join(project, 'ev'), /t1done/, 10_000, 't1 ended');
      // the next holder, once the paused one's heartbeat is a TTL old
      const thief = await runCli(['lock', 'run', '--if-busy', 'wait', '--', 'echo', 'took-over'], { cwd: project });
      expect(thief.stdout).toBe('took-over\n');
    } finally {
      process.kill(p.pid, 'SIGCONT');
    }
    expect((await p.exited).code).toBe(1);
    const run = JSON.parse(p.stdout()) as RunState;
    expect(run).toMatchObject({ status: 'ABORTED', why_code: 'LOCK_LOST' });
    expect(run.tasks.t1).toMatchObject({
      status: 'interrupted',
      exit_code: 0,
      why_code: 'NOT_RECORDED',
      why: 'succeeded, but the result could not be recorded (the exec lock was lost before it was stored)',
    });
    expect(lastRun(project).tasks.t1!.status).toBe('interrupted');
  });

  it('a run that lost the lock while paused keeps what it finished: the next exec run runs nothing again, exec resume the rest (SPEC §3)', async () => {
    const project = testProject({
      lock: { ttlSeconds: 2 },
      exec: {
        parallel: 2,
        tasks: [
          { id: 'a', run: 'echo a >> done.txt' },
          // the first time it waits to be cut off; resumed (once `resumed` exists) it finishes
          { id: 'b', run: 'if [ -e resumed ]; then echo b >> done.txt; else echo "pid $$" > b.pid; sleep 60; fi' },
        ],
      },
    });
    const p = startCli(['exec', 'run'], { cwd: project });
    await lineIn(join(project, 'b.pid'), /pid \d+/, 10_000, 'b started');
    await eventually(() => lastRun(project).tasks.a?.status === 'succeeded', 10_000, 'a succeeded');
    const id = runIds(project)[0]!;
    process.kill(p.pid, 'SIGSTOP');
    try {
      // takes the lock once the paused holder's heartbeat is a TTL old
      const next = await runCli(['exec', 'run', '--if-busy', 'wait'], { cwd: project });
      expect(next.code, next.stderr).toBe(0);
      expect(next.stdout).toMatch(/nothing to run: 1 succeeded, 1 interrupted/);
      expect(lastRun(project)).toMatchObject({ run_id: id, status: 'ABORTED', why_code: 'LOCK_LOST' });
      const status = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as {
        id: string;
        status: string;
        last_run_id: string | null;
      }[];
      expect(status.map((t) => [t.id, t.status, t.last_run_id])).toEqual([
        ['a', 'succeeded', id],
        ['b', 'interrupted', id],
      ]);
      writeFileSync(join(project, 'resumed'), '');
      const resumed = await runCli(['exec', 'resume'], { cwd: project });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stdout).toMatch(new RegExp(`run ${id} SUCCEEDED`));
    } finally {
      process.kill(p.pid, 'SIGCONT');
    }
    expect((await p.exited).code).toBe(1);
    expect(readFileSync(join(project, 'done.txt'), 'utf8')).toBe('a\nb\n');
    // the lost holder's own late record (its older generation) changes nothing
    expect(lastRun(project)).toMatchObject({ run_id: id, status: 'SUCCEEDED' });
  });
});

describe('exec state outlives a wiped lock folder', () => {
  it('resume still works after the generation counter was lost (its generation is raised above the state)', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'a', run: 'true' },
          { id: 'b', run: 'exit 1' },
        ],
      },
    });
    for (let i = 0; i < 3; i++) await runCli(['lock', 'run', '--', 'true'], { cwd: project }); // generation 3
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1);
    const id = runIds(project)[0]!;
    rmSync(join(project, '.routinely', 'locks'), { recursive: true, force: true });
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({
        exec: {
          tasks: [
            { id: 'a', run: 'true' },
            { id: 'b', run: 'true' },
          ],
        },
      }),
    );
    const r = await runCli(['exec', 'resume', id, '--json'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as RunState;
    expect(run).toMatchObject({ status: 'SUCCEEDED', attempt: 2 });
    expect(run.generation).toBeGreaterThan(4);
  });
});

describe('exec read views and bad input', () => {
  it('status, runs, show, reset', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'a', run: 'true' },
          { id: 'b', run: 'exit 4' },
        ],
      },
    });
    await runCli(['exec', 'run'], { cwd: project });
    const id = runIds(project)[0]!;
    const runs = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: project })).stdout);
    expect(runs).toEqual([
      expect.objectContaining({
        run_id: id,
        status: 'FAILED',
        summary: expect.objectContaining({ succeeded: 1, failed: 1, total: 2 }),
      }),
    ]);
    const show = await runCli(['exec', 'show', id], { cwd: project });
    expect(show.stdout).toMatch(new RegExp(`^run ${id}: FAILED`));
    expect(show.stdout).toMatch(/b +failed +exit 4/);
    expect(JSON.parse((await runCli(['exec', 'show', id, '--json'], { cwd: project })).stdout)).toMatchObject({
      run_id: id,
      tasks: { b: { exit_code: 4 } },
    });
    const human = await runCli(['exec', 'status'], { cwd: project });
    expect(human.stdout).toMatch(/^TASK +STATUS/);
    expect(human.stdout).toMatch(/b +failed/);
    expect(await runCli(['exec', 'reset', 'b'], { cwd: project })).toMatchObject({
      code: 0,
      stdout: 'reset to pending: b\n',
    });
    const after = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as {
      id: string;
      status: string;
    }[];
    expect(after.find((t) => t.id === 'b')?.status).toBe('pending');
    expect((await runCli(['exec', 'reset', 'zzz'], { cwd: project })).code).toBe(2);
  });

  it.each([
    [['exec', 'show', '../../etc/passwd'], /is not a run id/],
    [['exec', 'show', 'r-a/../../x'], /is not a run id/],
    [['exec', 'show', 'r-20000101T000000Z-dead'], /no run r-20000101T000000Z-dead/],
    [['exec', 'resume', 'r-20000101T000000Z-dead'], /no run r-20000101T000000Z-dead/],
    [['exec', 'resume', '..'], /is not a run id/],
  ])('%j: exit 2', async (args, message) => {
    const project = testProject();
    const r = await runCli(args, { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('a failed task fixed and run on its own: exec resume of the failed run runs its dependants and succeeds', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'a', run: 'test -e ok' },
          { id: 'b', run: 'echo b >> b-ran', dependsOn: ['a'] },
        ],
      },
    });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1);
    const failed = lastRun(project);
    expect(failed.tasks.b!.status).toBe('skipped_dependency');
    // b named alone: its dependency, outside this run, is said as the registry has it
    const alone = await runCli(['exec', 'run', 'b'], { cwd: project });
    expect(alone.code).toBe(1);
    expect(alone.stdout).toContain(
      'skipped b: dependency a did not succeed (failed in an earlier run, not in this one)',
    );
    writeFileSync(join(project, 'ok'), '');
    expect((await runCli(['exec', 'run', 'a'], { cwd: project })).code).toBe(0);
    const statusOfA = async () =>
      (
        JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as {
          id: string;
          last_run_id: string;
          last_exit_code: number | null;
        }[]
      ).find((t) => t.id === 'a')!;
    const fixedIn = (await statusOfA()).last_run_id;
    expect(fixedIn).not.toBe(failed.run_id);
    // the `next` the failure named: it ran b, and the run is done (it said: dependency a did not
    // succeed (failed), at every resume)
    const resumed = await runCli(['exec', 'resume', failed.run_id], { cwd: project });
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(readFileSync(join(project, 'b-ran'), 'utf8')).toBe('b\n');
    const after = loadRun(runsDir(project), failed.run_id)!;
    expect(after.status).toBe('SUCCEEDED');
    expect(after.tasks.a!).toMatchObject({ status: 'succeeded', why: `succeeded since in run ${fixedIn}` });
    // the registry keeps the run a succeeded in (what proves it, which retention keeps)
    expect(await statusOfA()).toMatchObject({ last_run_id: fixedIn, last_exit_code: 0 });
  });

  it('nothing to run and nothing to resume exit 0', async () => {
    const project = testProject();
    expect(await runCli(['exec', 'run'], { cwd: project })).toMatchObject({
      code: 0,
      stdout: 'nothing to run: the config has no tasks (exec.tasks, exec.taskDirs)\n',
    });
    expect(await runCli(['exec', 'resume'], { cwd: project })).toMatchObject({
      code: 0,
      stdout: 'nothing to resume\n',
    });
    // everything done: says so, and how to run it again
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({
        exec: {
          tasks: [
            { id: 'a', run: 'true' },
            { id: 'b', run: 'true' },
          ],
        },
      }),
    );
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    expect(await runCli(['exec', 'run'], { cwd: project })).toMatchObject({
      code: 0,
      stdout:
        'nothing to run: all 2 tasks succeeded\n  routinely exec reset TASK… sets tasks back to pending for the next exec run\n',
    });
    await sleep(0);
  });
});

describe('the tasks as they are once the exec lock is held', () => {
  it('a command that waited for the lock runs and registers the tasks as they are then: a task file removed during the wait never runs, a changed one runs its new command; a task named on the line that is gone then is refused (exit 2)', async () => {
    const project = testProject({ exec: { taskDirs: ['tasks'] } });
    mkdirSync(join(project, 'tasks'));
    const task = (id: string, run: string): void =>
      writeFileSync(join(project, 'tasks', `${id}.json`), JSON.stringify({ id, run }));
    task('drop-db', 'echo DROPPED >> effects');
    task('fix', 'echo OLD >> effects');
    expect((await runCli(['register'], { cwd: project })).code).toBe(0);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; while [ ! -e go ]; do sleep 0.05; done'], {
      cwd: project,
    });
    await holder.waitFor(/holding/);
    const run = startCli(['exec', 'run', '--if-busy', 'wait'], { cwd: project });
    const named = startCli(['exec', 'run', 'drop-db', '--if-busy', 'wait'], { cwd: project });
    await run.waitFor(/waiting for the exec lock/);
    await named.waitFor(/waiting for the exec lock/);
    rmSync(join(project, 'tasks', 'drop-db.json'));
    task('fix', 'echo NEW >> effects');
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
    const [r, n] = [await run.exited, await named.exited];
    expect(r.code, run.stderr()).toBe(0);
    expect(n.code, named.stderr()).toBe(2);
    expect(named.stderr()).toMatch(/unknown task "drop-db"/);
    expect(readFileSync(join(project, 'effects'), 'utf8')).toBe('NEW\n');
    expect(Object.keys(lastRun(project).tasks)).toEqual(['fix']);
  });

  it('…and so are tasks written inline in routinely.json (a second read: they were the config read before the wait)', async () => {
    const config = (run: string, extra: object[] = []) => ({ exec: { tasks: [{ id: 'fix', run }, ...extra] } });
    const project = testProject(config('echo OLD >> effects', [{ id: 'drop-db', run: 'echo DROPPED >> effects' }]));
    expect((await runCli(['register'], { cwd: project })).code).toBe(0);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; while [ ! -e go ]; do sleep 0.05; done'], {
      cwd: project,
    });
    await holder.waitFor(/holding/);
    const run = startCli(['exec', 'run', '--if-busy', 'wait'], { cwd: project });
    await run.waitFor(/waiting for the exec lock/);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify(config('echo NEW >> effects')));
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
    expect((await run.exited).code, run.stderr()).toBe(0);
    expect(readFileSync(join(project, 'effects'), 'utf8')).toBe('NEW\n');
    expect(Object.keys(lastRun(project).tasks)).toEqual(['fix']);
  });
});

describe('a run whose unfinished task is no longer defined', () => {
  it('resume records it retired and says to define it again; resumed again it runs nothing and says so (exit 0), never a failed attempt that advises another', async () => {
    const project = testProject({
      exec: {
        parallel: 1,
        tasks: [
          { id: 't1', run: 'echo started; sleep 30' },
          { id: 't2', run: 'true' },
        ],
      },
    });
    const run = startCli(['exec', 'run'], { cwd: project });
    await run.waitFor(/started t1/);
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(143);
    const id = runIds(project).at(-1)!;
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ exec: { parallel: 1, tasks: [{ id: 't1', run: 'true' }] } }),
    );
    const first = await runCli(['exec', 'resume'], { cwd: project });
    expect(first.code).toBe(1);
    expect(first.stdout).toContain(
      `next: t2 is no longer defined in the config: define it again, then: routinely exec resume ${id}; or leave the run as it is`,
    );
    const again = await runCli(['exec', 'resume', id], { cwd: project });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(
      `nothing to resume: the tasks run ${id} did not finish (t2) are no longer defined in the config`,
    );
    expect(lastRun(project).attempt).toBe(2);
  });
});
