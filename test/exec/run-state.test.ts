import { describe, expect, it } from 'vitest';
import { finalStatus, foldRun } from '../../src/exec/outcome.js';
import { emptyRegistry, syncRegistry, taskHash } from '../../src/exec/registry.js';
import { applyEvent, type RunState, type TaskRun } from '../../src/exec/run-state.js';
import { isRunId, newRunId } from '../../src/run-id.js';

const task = (over: Partial<TaskRun> = {}): TaskRun => ({
  status: 'pending',
  provider: 'default',
  attempts: 0,
  started_at: null,
  finished_at: null,
  duration_ms: null,
  exit_code: null,
  signal: null,
  log: 'x.log',
  hash: 'h',
  ...over,
});

function run(tasks: Record<string, TaskRun>, over: Partial<RunState> = {}): RunState {
  return {
    version: 1,
    run_id: 'r-20261129T190000Z-7f3a',
    status: 'RUNNING',
    command: 'exec run',
    routine: null,
    generation: 5,
    lock_id: 'l',
    owner: { pid: 1, host: 'h', boot_id: null, start_time: null },
    attempt: 1,
    parallel: 2,
    created_at: '2026-11-29T19:00:00.000Z',
    updated_at: '2026-11-29T19:00:00.000Z',
    finished_at: null,
    tasks,
    ...over,
  };
}

describe('run state reducer', () => {
  it('records a task start and finish', () => {
    let s = run({ a: task() });
    s = applyEvent(s, { type: 'task-started', gen: 5, at: 't1', task: 'a' });
    expect(s.tasks.a).toMatchObject({ status: 'running', attempts: 1, started_at: 't1' });
    s = applyEvent(s, {
      type: 'task-finished',
      gen: 5,
      at: 't2',
      task: 'a',
      status: 'failed',
      exit_code: 2,
      signal: null,
      duration_ms: 10,
      why_code: 'TASK_FAILED',
      why: 'w',
      next: 'n',
    });
    expect(s.tasks.a).toMatchObject({ status: 'failed', exit_code: 2, why_code: 'TASK_FAILED', why: 'w', next: 'n' });
  });

  it('is pure', () => {
    const s = run({ a: task() });
    applyEvent(s, { type: 'task-started', gen: 5, at: 't1', task: 'a' });
    expect(s.tasks.a?.status).toBe('pending');
  });

  it('fences off events of an older generation (a holder that lost the lock)', () => {
    let s = run({ a: task({ status: 'succeeded' }) }, { generation: 7 });
    s = applyEvent(s, {
      type: 'run-finished',
      gen: 6,
      at: 't',
      status: 'ABORTED',
      why_code: 'LOCK_LOST',
      why: 'x',
      next: 'y',
    });
    expect(s.status).toBe('RUNNING');
    s = applyEvent(s, { type: 'run-finished', gen: 7, at: 't', status: 'SUCCEEDED' });
    expect(s.status).toBe('SUCCEEDED');
    expect(s.why_code).toBeUndefined();
  });

  it('turns tasks still running into interrupted when the run ends', () => {
    const s = applyEvent(run({ a: task({ status: 'running' }) }), {
      type: 'run-finished',
      gen: 5,
      at: 't',
      status: 'INTERRUPTED',
      why_code: 'INTERRUPTED',
      why: '',
      next: '',
    });
    expect(s.tasks.a?.status).toBe('interrupted');
  });

  it('resume resets only the named tasks, moves the generation and the attempt', () => {
    const s0 = run(
      { a: task({ status: 'succeeded' }), b: task({ status: 'interrupted', attempts: 1 }) },
      { status: 'INTERRUPTED', why_code: 'INTERRUPTED', why: 'w', next: 'n' },
    );
    const s = applyEvent(s0, {
      type: 'run-resumed',
      gen: 9,
      at: 't',
      lock_id: 'l2',
      owner: s0.owner,
      command: 'exec resume',
      routine: null,
      parallel: 2,
      reset: { b: 'h2' },
    });
    expect(s).toMatchObject({ status: 'RUNNING', generation: 9, attempt: 2, lock_id: 'l2' });
    expect(s.why_code).toBeUndefined();
    expect(s.tasks.a?.status).toBe('succeeded');
    expect(s.tasks.b).toMatchObject({ status: 'pending', attempts: 1, hash: 'h2' });
  });

  it('validates run ids so they can never be paths', () => {
    expect(isRunId(newRunId(Date.UTC(2026, 10, 29, 19), 'ab12'))).toBe(true);
    expect(newRunId(Date.UTC(2026, 10, 29, 19), '7f3a')).toBe('r-20261129T190000Z-7f3a');
    for (const bad of ['../etc', 'r-../x', 'r-a/b', 'r-', 'x-1', 'r-a.b', '']) expect(isRunId(bad)).toBe(false);
  });
});

describe('final status and explainability', () => {
  it('explains failures and what to run next', () => {
    const s = run({
      a: task({ status: 'failed', exit_code: 3, why_code: 'TASK_FAILED' }),
      b: task({ status: 'skipped_dependency' }),
      c: task({ status: 'succeeded' }),
    });
    const f = finalStatus(s, null);
    expect(f).toMatchObject({ status: 'FAILED', why_code: 'TASK_FAILED' });
    expect(f.why).toBe('1 of 3 tasks failed: a (exit 3); 1 skipped (dependency failed)');
    expect(f.next).toContain('routinely exec resume r-20261129T190000Z-7f3a');
    expect(finalStatus(run({ a: task({ status: 'succeeded' }) }), null)).toEqual({ status: 'SUCCEEDED' });
    expect(finalStatus(s, 'LOCK_LOST')).toMatchObject({ status: 'ABORTED', why_code: 'LOCK_LOST' });
    expect(finalStatus(s, 'RUN_TIMEOUT')).toMatchObject({ status: 'ABORTED', why_code: 'RUN_TIMEOUT' });
    expect(finalStatus(s, 'INTERRUPTED')).toMatchObject({ status: 'INTERRUPTED', why_code: 'INTERRUPTED' });
  });
});

describe('registry', () => {
  const def = (id: string, run = 'true') => ({ task: { id, run }, source: 'routinely.json' });

  it('syncs by content hash: new, changed, unchanged, retired, and back again', () => {
    let r = syncRegistry(emptyRegistry(), [def('a'), def('b')], 't1');
    expect(r).toMatchObject({ added: ['a', 'b'], changed: [], retired: [] });
    r.registry.tasks.a!.status = 'succeeded';
    r = syncRegistry(r.registry, [def('a'), def('b', 'make')], 't2');
    expect(r).toMatchObject({ added: [], changed: ['b'], retired: [] });
    expect(r.registry.tasks.a?.status).toBe('succeeded');
    expect(r.registry.tasks.b?.status).toBe('pending');
    r = syncRegistry(r.registry, [def('b', 'make')], 't3');
    expect(r).toMatchObject({ added: [], changed: [], retired: ['a'] });
    expect(r.registry.tasks.a?.status).toBe('retired');
    r = syncRegistry(r.registry, [def('a'), def('b', 'make')], 't4');
    expect(r).toMatchObject({ added: ['a'], retired: [] });
  });

  it('hashes definitions independent of key order', () => {
    expect(taskHash({ id: 'a', run: 'x', env: { A: '1', B: '2' } })).toBe(
      taskHash({ env: { B: '2', A: '1' }, run: 'x', id: 'a' }),
    );
    expect(taskHash({ id: 'a', run: 'x' })).not.toBe(taskHash({ id: 'a', run: 'y' }));
  });

  it('folds a run into the registry only where the definition is unchanged', () => {
    const reg = syncRegistry(emptyRegistry(), [def('a'), def('b')], 't').registry;
    reg.active_runs = ['r-1'];
    const hashA = reg.tasks.a!.hash;
    const folded = foldRun(
      reg,
      run(
        { a: task({ status: 'succeeded', hash: hashA, exit_code: 0 }), b: task({ status: 'failed', hash: 'old' }) },
        { run_id: 'r-1', status: 'FAILED' },
      ),
      'now',
    );
    expect(folded.tasks.a).toMatchObject({ status: 'succeeded', last_run_id: 'r-1', last_exit_code: 0 });
    expect(folded.tasks.b?.status).toBe('pending');
    expect(folded.active_runs).toEqual([]);
    const interrupted = foldRun(
      reg,
      run({ a: task({ status: 'pending', hash: hashA }) }, { run_id: 'r-1', status: 'INTERRUPTED' }),
      'now',
    );
    expect(interrupted.tasks.a?.status).toBe('interrupted');
  });
});
