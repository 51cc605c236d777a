// The same behaviour, through the CLI only, on both backends: files and PostgreSQL (SPEC §9:
// "an added backend, not a rewrite"). State is read back through `--json` views, never files.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunState } from '../../src/exec/run-state.js';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const backends = cluster ? (['file', 'postgres'] as const) : (['file'] as const); // postgres only outside CI may be missing

async function project(
  kind: 'file' | 'postgres',
  config: object,
): Promise<{ dir: string; write: (c: object) => void }> {
  const extra =
    kind === 'postgres' ? { project: 'app', backend: { type: 'postgres', url: await freshDatabase(cluster!) } } : {};
  const dir = testProject({ ...extra, ...config });
  return { dir, write: (c) => writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ ...extra, ...c })) };
}

const json = async <T>(args: string[], cwd: string): Promise<T> => {
  const r = await runCli([...args, '--json'], { cwd });
  if (r.stdout === '') throw new Error(`${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
};

describe.each(backends)('%s backend', (kind) => {
  it('exec: dependencies, a failure that skips its dependants, resume after the fix', async () => {
    const { dir, write } = await project(kind, {
      exec: {
        parallel: 2,
        tasks: [
          { id: 'build', run: 'true' },
          { id: 'test', run: 'exit 4', dependsOn: ['build'] },
          { id: 'docs', run: 'true', dependsOn: ['test'] },
          { id: 'lint', run: 'true' },
        ],
      },
    });
    expect((await runCli(['register'], { cwd: dir })).stdout).toBe('4 new, 0 changed, 0 retired\n');
    const r = await runCli(['exec', 'run', '--json'], { cwd: dir });
    expect(r.code).toBe(1);
    const run = JSON.parse(r.stdout) as RunState;
    expect(run).toMatchObject({
      status: 'FAILED',
      why_code: 'TASK_FAILED',
      tasks: {
        build: { status: 'succeeded' },
        test: { status: 'failed', exit_code: 4 },
        docs: { status: 'skipped_dependency' },
        lint: { status: 'succeeded' },
      },
    });
    const status = await json<{ id: string; status: string }[]>(['exec', 'status'], dir);
    expect(Object.fromEntries(status.map((t) => [t.id, t.status]))).toEqual({
      build: 'succeeded',
      test: 'failed',
      docs: 'skipped_dependency',
      lint: 'succeeded',
    });
    expect((await runCli(['exec', 'run'], { cwd: dir })).stdout).toMatch(/^nothing to run: /);
    write({
      exec: {
        parallel: 2,
        tasks: [
          { id: 'build', run: 'true' },
          { id: 'test', run: 'true', dependsOn: ['build'] },
          { id: 'docs', run: 'true', dependsOn: ['test'] },
          { id: 'lint', run: 'true' },
        ],
      },
    });
    const resumed = JSON.parse(
      (await runCli(['exec', 'resume', run.run_id, '--json'], { cwd: dir })).stdout,
    ) as RunState;
    expect(resumed).toMatchObject({
      run_id: run.run_id,
      status: 'SUCCEEDED',
      attempt: 2,
      tasks: { build: { attempts: 1 }, test: { attempts: 2 } },
    });
    const runs = await json<{ run_id: string; status: string }[]>(['exec', 'runs'], dir);
    expect(runs.map((x) => [x.run_id, x.status])).toEqual([[run.run_id, 'SUCCEEDED']]);
    expect(await json(['exec', 'show', run.run_id], dir)).toMatchObject({ status: 'SUCCEEDED' });
    expect((await runCli(['exec', 'show', 'r-20000101T000000Z-dead'], { cwd: dir })).code).toBe(2);
  });

  it('exec: SIGKILL of a run mid-task, then resume redoes only what did not finish', async () => {
    const { dir, write } = await project(kind, {
      exec: {
        parallel: 1,
        tasks: [
          { id: 'one', run: 'echo one >> count' },
          { id: 'two', run: 'echo two >> count; touch two.started; sleep 60' },
        ],
      },
    });
    const p = startCli(['exec', 'run'], { cwd: dir });
    await eventually(() => existsSync(join(dir, 'two.started')), 15_000, 'two started');
    p.child.kill('SIGKILL');
    await p.exited;
    write({
      exec: {
        parallel: 1,
        tasks: [
          { id: 'one', run: 'echo one >> count' },
          { id: 'two', run: 'echo two >> count' },
        ],
      },
    });
    const r = await runCli(['exec', 'resume', '--json'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'SUCCEEDED', attempt: 2 });
    expect(readFileSync(join(dir, 'count'), 'utf8')).toBe('one\ntwo\ntwo\n');
  });

  it('busy: fail 75 naming the holder, skip 0, resume is a CONFLICT that touches nothing', async () => {
    const { dir } = await project(kind, { exec: { tasks: [{ id: 'a', run: 'exit 1' }] } });
    const failed = JSON.parse((await runCli(['exec', 'run', '--json'], { cwd: dir })).stdout) as RunState;
    const before = await json(['exec', 'show', failed.run_id], dir);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: dir });
    await holder.waitFor(/holding/);
    const busy = await runCli(['exec', 'run'], { cwd: dir });
    expect(busy.code).toBe(75);
    expect(busy.stderr).toMatch(/^exec busy: held by pid \d+ on \S+ \(lock run\)/);
    expect(await runCli(['register', '--if-busy', 'skip'], { cwd: dir })).toMatchObject({
      code: 0,
      stdout: 'skipped: exec busy\n',
    });
    const conflict = await runCli(['exec', 'resume', failed.run_id, '--json'], { cwd: dir });
    expect(conflict.code).toBe(75);
    expect(JSON.parse(conflict.stdout)).toMatchObject({ status: 'CONFLICT', why_code: 'LOCK_CONFLICT' });
    expect(await json(['exec', 'show', failed.run_id], dir)).toEqual(before);
    const status = await json<{ state: string; record: { owner: { command: string } } }>(['lock', 'status'], dir);
    expect(status).toMatchObject({ state: 'held', record: { owner: { command: 'lock run' } } });
    holder.child.kill('SIGTERM');
    expect((await holder.exited).code).toBe(143);
  });

  it('routines: run, busy skip recorded apart from failure, history, pause, list --check', async () => {
    const { dir } = await project(kind, {
      routines: [
        { id: 'ok', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
        { id: 'bad', schedule: '0 0 1 1 *', action: 'command', run: 'exit 3' },
      ],
    });
    expect((await runCli(['routine', 'run', 'ok'], { cwd: dir })).code).toBe(0);
    expect((await runCli(['routine', 'run', 'bad'], { cwd: dir })).code).toBe(1);
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: dir });
    await holder.waitFor(/holding/);
    // a manual run refused as busy is not a tick: nothing is recorded (SPEC §4)
    expect(await runCli(['routine', 'run', 'ok', '--if-busy', 'skip'], { cwd: dir })).toMatchObject({
      code: 0,
      stdout: 'skipped: exec busy\n',
    });
    holder.child.kill('SIGTERM');
    await holder.exited;
    const rows = await json<{ id: string; last_result: string; counts: object; consecutive_failures: number }[]>(
      ['routine', 'list'],
      dir,
    );
    expect(rows.find((r) => r.id === 'ok')).toMatchObject({
      last_result: 'success',
      counts: { success: 1, failure: 0, skipped: 0 },
      consecutive_failures: 0,
    });
    expect(rows.find((r) => r.id === 'bad')).toMatchObject({
      last_result: 'failure',
      counts: { success: 0, failure: 1, skipped: 0 },
      consecutive_failures: 1,
    });
    expect((await runCli(['routine', 'list', '--check'], { cwd: dir })).code).toBe(1);
    const history = await json<{ result: string }[]>(['routine', 'history', 'ok'], dir);
    expect(history.map((h) => h.result)).toEqual(['success']);
    await runCli(['routine', 'pause', 'bad', '--note', 'flaky'], { cwd: dir });
    expect(
      (await json<{ id: string; paused: boolean; paused_note: string }[]>(['routine', 'list'], dir)).find(
        (r) => r.id === 'bad',
      ),
    ).toMatchObject({ paused: true, paused_note: 'flaky' });
  });

  it('scheduler: fires, skips a busy tick, and stops cleanly', async () => {
    const { dir } = await project(kind, {
      routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: dir });
    await s.waitFor(/\[routine\] succeeded tick/);
    // waiting its turn: a fire of this second may hold the lock, or be queued for it (fail: refused)
    const holder = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 2.5'], {
      cwd: dir,
    });
    await holder.waitFor(/holding/);
    await s.waitFor(/\[routine\] skipped tick: exec busy/);
    await holder.exited;
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    const [row] = await json<{ counts: { success: number; skipped: number; failure: number } }[]>(
      ['routine', 'list'],
      dir,
    );
    expect(row!.counts.skipped).toBeGreaterThan(0);
    expect(row!.counts.success).toBeGreaterThan(0);
    expect(row!.counts.failure).toBe(0);
  });
});

/** Every object's keys, in order, as one string per path (arrays: their first element). */
function keyOrder(v: unknown, path = '$'): string[] {
  if (Array.isArray(v)) return v.length ? keyOrder(v[0], `${path}[]`) : [];
  if (!v || typeof v !== 'object') return [];
  const keys = Object.keys(v);
  return [
    `${path}: ${keys.join(',')}`,
    ...keys.flatMap((k) => keyOrder((v as Record<string, unknown>)[k], `${path}.${k}`)),
  ];
}

describe.runIf(cluster)('both backends', () => {
  it('JSON read back has the same key order on both backends (issue 15)', async () => {
    const config = {
      exec: {
        tasks: [
          { id: 'a', run: 'true' },
          { id: 'b', run: 'exit 2', dependsOn: [] },
        ],
      },
      routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
    };
    const views: Record<string, string[]>[] = [];
    for (const kind of ['file', 'postgres'] as const) {
      const { dir } = await project(kind, config);
      const run = JSON.parse((await runCli(['exec', 'run', '--json'], { cwd: dir })).stdout) as RunState;
      expect((await runCli(['routine', 'run', 'r'], { cwd: dir })).code).toBe(0);
      views.push({
        show: keyOrder(await json(['exec', 'show', run.run_id], dir)),
        runs: keyOrder(await json(['exec', 'runs'], dir)),
        status: keyOrder(await json(['exec', 'status'], dir)),
        list: keyOrder(await json(['routine', 'list'], dir)),
        // the same keys too: the bookkeeping of the files (id, closes) is not shown
        history: keyOrder(await json(['routine', 'history', 'r'], dir)),
      });
    }
    expect(views[1]).toEqual(views[0]);
  });
});
