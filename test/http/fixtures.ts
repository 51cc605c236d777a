// Page data for the HTTP unit tests: a routine list row, a lock status, a run, with any field
// replaceable (hostile strings included).

import type { LockStatus } from '../../src/lock/status.js';
import type { RoutineView, RunView, StatusSources } from '../../src/http/sources.js';
import type { PageData } from '../../src/http/view.js';
import { emptyRecord } from '../../src/state/routine-state.js';

export const NOW = Date.UTC(2026, 10, 29, 19, 0, 30);
const iso = (ms: number): string => new Date(ms).toISOString();

export const row = (over: Partial<RoutineView> = {}): RoutineView => ({
  id: 'tick',
  schedule: '* * * * * *',
  timezone: null,
  action: 'command',
  enabled: true,
  next_run_at: iso(NOW + 500),
  ...emptyRecord(),
  last_result: 'success',
  last_finished_at: iso(NOW - 1000),
  last_duration_ms: 120,
  last_success_at: iso(NOW - 1000),
  counts: { success: 3, failure: 1, skipped: 2 },
  consecutive_skips: 1,
  ...over,
});

export const heldLock = (over: Partial<LockStatus> = {}): LockStatus => ({
  key: 'exec-run',
  path: '/p/.routinely/locks/exec-run.lock',
  state: 'held',
  generation: 7,
  holder: 'pid 4711 on build-01',
  heartbeat_age_s: 1.5,
  expires_in_s: 58.5,
  stale_reason: null,
  why: 'alive',
  record: {
    version: 1,
    key: 'exec-run',
    lock_id: 'a'.repeat(32),
    generation: 7,
    created_at: (NOW - 12_000) / 1000,
    heartbeat_at: (NOW - 1500) / 1000,
    expires_at: (NOW + 58_500) / 1000,
    owner: {
      pid: 4711,
      host: 'build-01',
      boot_id: null,
      start_time: null,
      command: 'routine',
      routine: 'tick',
      run_id: 'r-20261129T190018Z-ab12',
    },
  },
  ...over,
});

export const run = (over: Partial<RunView> = {}): RunView => ({
  version: 1,
  run_id: 'r-20261129T190000Z-7f3a',
  status: 'FAILED',
  command: 'exec run',
  routine: null,
  generation: 3,
  lock_id: 'b'.repeat(32),
  owner: { pid: 99, host: 'build-01', boot_id: null, start_time: null },
  attempt: 1,
  parallel: 2,
  created_at: iso(NOW - 20_000),
  updated_at: iso(NOW - 19_000),
  finished_at: iso(NOW - 19_000),
  why_code: 'TASK_FAILED',
  why: '1 of 2 tasks failed: test (exit 1)',
  next: 'routinely exec show …',
  summary: { total: 2, pending: 0, running: 0, succeeded: 1, failed: 1, skipped_dependency: 0, interrupted: 0 },
  ...over,
});

export function pageData(over: Partial<PageData> = {}): PageData {
  return {
    status: {
      project: 'app',
      host: 'build-01',
      backend: 'file',
      mode: 'scheduler',
      pid: 4242,
      health: { ok: true },
      scheduler_up: true,
      now: iso(NOW),
    },
    routines: [row()],
    recent: {
      tick: {
        results: [
          {
            result: 'success',
            scheduled_at: iso(NOW - 3000),
            finished_at: iso(NOW - 2900),
            reason: null,
            run_id: null,
          },
          {
            result: 'failure',
            scheduled_at: iso(NOW - 2000),
            finished_at: iso(NOW - 1900),
            reason: 'exit code 3',
            run_id: null,
          },
          {
            result: 'skipped',
            scheduled_at: iso(NOW - 1000),
            finished_at: iso(NOW - 1000),
            reason: 'exec busy',
            run_id: null,
          },
        ],
        trailing_skips: 1,
      },
    },
    lock: heldLock(),
    runs: [run()],
    ...over,
  };
}

/** Sources that answer with fixed data (or what `over` says). */
export function fixedSources(data: PageData = pageData(), over: Partial<StatusSources> = {}): StatusSources {
  return {
    info: {
      project: data.status.project,
      host: data.status.host,
      backend: data.status.backend,
      mode: data.status.mode,
      pid: data.status.pid,
    },
    routines: async () => data.routines,
    recent: async () => data.recent,
    lock: async () => data.lock,
    runs: async () => data.runs,
    health: async () => data.status.health,
    schedulerUp: async () => data.status.scheduler_up,
    fires: async () => [],
    output: async () => null,
    ...over,
  };
}
