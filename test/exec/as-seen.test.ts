// What readers show for a run left RUNNING, and what a holder that lost its lock reports (issue
// 15): pure decisions over plain data.

import { describe, expect, it } from 'vitest';
import { asSeen } from '../../src/exec/views.js';
import { asRecorded } from '../../src/exec/outcome.js';
import type { RunEvent, RunState, TaskRun } from '../../src/exec/run-state.js';

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

// An owner on another host: its pid says nothing here, only the lock does.
const run = (over: Partial<RunState> = {}): RunState => ({
  version: 1,
  run_id: 'r-20261129T190000Z-7f3a',
  status: 'RUNNING',
  command: 'exec run',
  routine: null,
  generation: 5,
  lock_id: 'a'.repeat(32),
  owner: { pid: 4711, host: 'another-host.invalid', boot_id: null, start_time: null },
  attempt: 1,
  parallel: 2,
  created_at: '2026-11-29T19:00:00.000Z',
  updated_at: '2026-11-29T19:00:00.000Z',
  finished_at: null,
  tasks: { a: task({ status: 'running' }), b: task({ status: 'succeeded' }) },
  ...over,
});

describe('asSeen: a RUNNING run judged by the exec lock', () => {
  it('stays RUNNING while its generation holds the lock at either read (it may have started or ended in between)', () => {
    expect(asSeen(run(), [5, 5]).status).toBe('RUNNING');
    expect(asSeen(run(), ['free', 5]).status).toBe('RUNNING');
    expect(asSeen(run(), [5, 'free']).status).toBe('RUNNING');
  });

  it('reads as INTERRUPTED / LOCK_LOST when every read finds the lock free, expired or held at another epoch', () => {
    for (const holders of [
      ['free', 'free'],
      ['expired', 'expired'],
      [6, 6],
      ['free', 6],
    ] as const) {
      const seen = asSeen(run(), holders);
      expect(seen).toMatchObject({
        status: 'INTERRUPTED',
        why_code: 'LOCK_LOST',
        next: 'routinely exec resume r-20261129T190000Z-7f3a',
        tasks: { a: { status: 'interrupted' }, b: { status: 'succeeded' } },
      });
    }
    expect(asSeen(run(), ['free', 6]).why).toMatch(
      /epoch 5\) no longer holds the exec lock \(the exec lock is held at epoch 6\)/,
    );
  });

  it('concludes nothing when the lock could not be read, or was not asked', () => {
    expect(asSeen(run(), [undefined, 'free']).status).toBe('RUNNING');
    expect(asSeen(run()).status).toBe('RUNNING');
  });

  it('leaves finished runs alone', () => {
    expect(asSeen(run({ status: 'ABORTED' }), ['free', 'free']).status).toBe('ABORTED');
  });
});

describe('asRecorded: what a holder that lost its lock reports', () => {
  const finished = (status: 'succeeded' | 'failed'): RunEvent => ({
    type: 'task-finished',
    gen: 5,
    at: 't',
    task: 'b',
    status,
    exit_code: 0,
    signal: null,
    duration_ms: 1,
  });

  it('a finish that never reached the record is reported as interrupted, saying what the task did', () => {
    const s = asRecorded(run({ status: 'ABORTED' }), [finished('succeeded')], null);
    expect(s.tasks.b).toMatchObject({
      status: 'interrupted',
      why_code: 'NOT_RECORDED',
      why: 'succeeded, but the result could not be recorded (the exec lock was lost before it was stored)',
    });
    expect(s.why).toBeUndefined();
  });

  it("a final record that could not be stored is said in the run's why", () => {
    const s = asRecorded(
      run({ status: 'ABORTED', why: 'the exec lock was lost' }),
      [finished('succeeded')],
      'database h:5432/d: connection refused',
    );
    expect(s.tasks.b?.why).toBe(
      'succeeded, but the result could not be recorded (database h:5432/d: connection refused)',
    );
    expect(s.why).toBe(
      'the exec lock was lost; this could not be recorded (database h:5432/d: connection refused), so the run reads as interrupted until resumed',
    );
  });

  it("ignores events that are not a task's last word", () => {
    expect(asRecorded(run(), [finished('failed')], null).tasks.b?.status).toBe('succeeded');
  });
});
