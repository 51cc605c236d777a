// The lines an exec run prints for its events: a success whose output its log could not take
// (a full disk) says so beside the result, naming the log.

import { describe, expect, it } from 'vitest';
import { eventLine } from '../../src/exec/run-lines.js';
import type { RunEvent, RunState } from '../../src/exec/run-state.js';

const state = { run_id: 'r-1', tasks: { big: { log: 'big.log' } } } as unknown as RunState;
const finished = (over: Partial<RunEvent> = {}): RunEvent =>
  ({
    type: 'task-finished',
    gen: 1,
    at: '2026-12-06T09:00:00.000Z',
    task: 'big',
    status: 'succeeded',
    exit_code: 0,
    signal: null,
    duration_ms: 1200,
    ...over,
  }) as RunEvent;

describe('eventLine', () => {
  it('a success says how much of its output was lost to a full disk, and where', () => {
    expect(eventLine(finished(), state, '.routinely/exec/runs/r-1')).toBe('succeeded big in 1.2s');
    expect(
      eventLine(finished({ output_lost_bytes: 1700000 } as Partial<RunEvent>), state, '.routinely/exec/runs/r-1'),
    ).toBe(
      'succeeded big in 1.2s  (1700000 bytes of its output could not be written to .routinely/exec/runs/r-1/big.log)',
    );
  });
});
