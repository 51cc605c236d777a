// `routine-state.json` (SPEC §6): the last result and counters of every routine, and whether it
// is paused. Pure reducers here; the read-modify-write happens under a short state lock
// (scheduler/routine-store.ts) so the scheduler and a manual `routine run` never lose each
// other's updates.

export type RoutineResult = 'success' | 'failure' | 'skipped';

export interface RoutineRecord {
  last_result: RoutineResult | null;
  last_reason: string | null;
  last_scheduled_at: string | null;
  last_started_at: string | null;
  last_finished_at: string | null;
  last_duration_ms: number | null;
  last_exit_code: number | null;
  last_run_id: string | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  last_skipped_at: string | null;
  counts: { success: number; failure: number; skipped: number };
  consecutive_failures: number;
  paused: boolean;
  paused_note: string | null;
}

export interface RoutineStateFile {
  version: 1;
  routines: Record<string, RoutineRecord>;
}

/** One firing of a routine, as recorded in state and history. */
export interface Fire {
  result: RoutineResult;
  reason: string | null;
  scheduled_at: string;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  exit_code: number | null;
  run_id: string | null;
}

export const emptyState = (): RoutineStateFile => ({ version: 1, routines: {} });

export const emptyRecord = (): RoutineRecord => ({
  last_result: null, last_reason: null, last_scheduled_at: null, last_started_at: null, last_finished_at: null,
  last_duration_ms: null, last_exit_code: null, last_run_id: null, last_success_at: null, last_failure_at: null,
  last_skipped_at: null, counts: { success: 0, failure: 0, skipped: 0 }, consecutive_failures: 0, paused: false,
  paused_note: null,
});

/** Records one fire. A skip never counts as a failure and leaves `consecutive_failures` alone. */
export function applyFire(prior: RoutineRecord | undefined, fire: Fire): RoutineRecord {
  const r = prior ?? emptyRecord();
  const next: RoutineRecord = {
    ...r,
    last_result: fire.result,
    last_reason: fire.reason,
    last_scheduled_at: fire.scheduled_at,
    last_started_at: fire.started_at,
    last_finished_at: fire.finished_at,
    last_duration_ms: fire.duration_ms,
    last_exit_code: fire.exit_code,
    last_run_id: fire.run_id,
    counts: { ...r.counts },
  };
  switch (fire.result) {
    case 'success':
      next.counts.success++;
      next.last_success_at = fire.finished_at;
      next.consecutive_failures = 0;
      break;
    case 'failure':
      next.counts.failure++;
      next.last_failure_at = fire.finished_at;
      next.consecutive_failures = r.consecutive_failures + 1;
      break;
    case 'skipped':
      next.counts.skipped++;
      next.last_skipped_at = fire.finished_at;
      break;
  }
  return next;
}

export function setPaused(prior: RoutineRecord | undefined, paused: boolean, note: string | null): RoutineRecord {
  return { ...(prior ?? emptyRecord()), paused, paused_note: paused ? note : null };
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Validates the file's shape; unknown extra fields are kept, missing ones filled in. */
export function checkRoutineState(v: unknown): RoutineStateFile | string {
  if (!isObj(v)) return 'not an object';
  if (v.version !== 1) return `unknown version ${JSON.stringify(v.version)}`;
  if (!isObj(v.routines)) return 'no "routines" object';
  const routines: Record<string, RoutineRecord> = {};
  for (const [id, rec] of Object.entries(v.routines)) {
    if (!isObj(rec)) return `routines.${id} is not an object`;
    const counts = isObj(rec.counts) ? rec.counts : {};
    routines[id] = {
      ...emptyRecord(),
      ...(rec as Partial<RoutineRecord>),
      counts: {
        success: Number(counts.success) || 0,
        failure: Number(counts.failure) || 0,
        skipped: Number(counts.skipped) || 0,
      },
      paused: rec.paused === true,
    };
  }
  return { version: 1, routines };
}
