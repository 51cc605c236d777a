// The notification payload (SPEC §10): the JSON body of a webhook POST and the stdin of a
// notify command, with exactly these fields.

import type { NotifyEvent } from '../config/types.js';
import { applyFire, type Fire, type RoutineRecord, type RoutineResult } from '../state/routine-state.js';

export interface NotifyPayload {
  event: NotifyEvent;
  project: string;
  host: string;
  routine: string;
  run_id: string | null;
  result: RoutineResult;
  scheduled_at: string;
  finished_at: string;
  exit_code: number | null;
  /** Why it happened, one sentence. */
  why: string | null;
  /** What to run next, one line. */
  next: string;
  /** The routine's log file (its output, every run framed). */
  log: string;
  /** The run's last lines of output (notify.outputLines, default 20), control characters
   * escaped, one per line; absent with outputLines 0; "" when the run printed nothing. */
  output_tail?: string | null;
  /** The routine's counters after this fire. */
  consecutive_failures: number;
  consecutive_skips: number;
}

export interface PayloadInput {
  event: NotifyEvent;
  project: string;
  host: string;
  routine: string;
  prior: RoutineRecord | undefined;
  fire: Fire;
  log: string;
  /** The run's last lines (already escaped), or undefined to leave the field out. */
  outputTail?: string | null;
  /** Who held the exec lock, for a starved routine (`exec run r-… since 12:01:07`). */
  holder?: string | null;
  /** The routine's ifBusy (the advice for a starved routine depends on it). */
  ifBusy?: 'skip' | 'wait';
  /** The lock it takes (`exec`, a named lock): the advice for a starved routine names it. */
  lock?: string;
}

const plural = (n: number, one: string): string => `${n} ${one}${n === 1 ? '' : 's'}`;

export function buildPayload(i: PayloadInput): NotifyPayload {
  const after = applyFire(i.prior, i.fire);
  const f = i.fire;
  return {
    event: i.event,
    project: i.project,
    host: i.host,
    routine: i.routine,
    run_id: f.run_id,
    result: f.result,
    scheduled_at: f.scheduled_at,
    finished_at: f.finished_at,
    exit_code: f.exit_code,
    why: why(i, after),
    next: nextStep(i.event, i.routine, f.run_id, i.ifBusy, i.lock),
    log: i.log,
    ...(i.outputTail !== undefined ? { output_tail: i.outputTail } : {}),
    consecutive_failures: after.consecutive_failures,
    consecutive_skips: after.consecutive_skips,
  };
}

function why(i: PayloadInput, after: RoutineRecord): string | null {
  switch (i.event) {
    case 'failure':
      return i.fire.reason ?? 'failed';
    case 'recovery':
      return `succeeded after ${plural(i.prior?.consecutive_failures ?? 0, 'failed fire')}`;
    case 'starved':
      return `skipped ${plural(after.consecutive_skips, 'time')} in a row: ${i.fire.reason ?? 'exec busy'}${i.holder ? ` (held by ${i.holder})` : ''}`;
  }
}

/** One line: what a person should run now. */
export function nextStep(
  event: NotifyEvent,
  routine: string,
  runId: string | null,
  ifBusy: 'skip' | 'wait' = 'skip',
  lock = 'exec',
): string {
  const status =
    lock === 'exec'
      ? 'routinely lock status shows what holds the exec lock'
      : `routinely lock status --lock ${lock} shows what holds it`;
  switch (event) {
    case 'failure':
      return runId
        ? `routinely routine logs ${routine} --run ${runId}`
        : `routinely routine logs ${routine} --lines 50; routinely routine history ${routine}`;
    case 'recovery':
      return `nothing to do; earlier runs: routinely routine history ${routine}`;
    case 'starved':
      // never advice the routine already follows
      return ifBusy === 'wait'
        ? `${status}; give ${routine} a longer "waitTimeoutSeconds", or move the work that holds the lock to another time`
        : `${status}; give ${routine} "ifBusy": "wait" or another schedule`;
  }
}
