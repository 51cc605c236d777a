// What the runner asks of one fire (firing.ts in production, a stub in tests): the contract
// between the scheduler's runner and the code that fires a routine.

import type { Project } from '../config/load.js';
import type { RoutineDef } from '../config/types.js';
import type { LineTicket } from '../lock/line.js';
import type { LockRecord } from '../lock/record.js';
import type { RoutineRecord } from '../state/routine-state.js';
import type { FireResult, Trigger } from './firing.js';
import type { Schedule } from '../config/schedule.js';

export { PREVIOUS_RUN } from './previous-run.js';

/** What a tick asks of one fire. */
export interface FireRequest {
  project: Project;
  signal: AbortSignal;
  /** Ends a wait for the lock (the scheduler stopping: a tick still waiting is not started). */
  waitSignal?: AbortSignal;
  trigger: Trigger;
  /** Set when the routine has `retry`: 1 for the scheduled fire, 2… for its retries. */
  attempt?: number;
  /** The routine's `ifBusy` (SPEC §10): skip, or wait up to `waitTimeoutMs` for the lock. */
  ifBusy: 'skip' | 'wait';
  waitTimeoutMs?: number;
  /** Checked once the exec lock is held and before any work starts, and when a wait for it
   * ended: false means this scheduler is stopping or no longer holds its own lock, and the fire
   * gives the exec lock back unstarted. */
  mayStart: () => boolean;
  onStarted: () => void;
  /** With ifBusy "wait": the lock is busy and the fire waits for it. */
  onWait: (why: string, holder: LockRecord | null, holders?: LockRecord[]) => void;
  /** The lock was taken over from a holder judged stale (`from`, as its record named it): what it
   * left open, the marker of a fire killed with SIGKILL, is for this scheduler to record now. */
  onTookOver?: (from: LockRecord | null) => void;
  /** Its place in the lock's line, taken when it was queued (lock/line.ts). */
  ticket?: LineTicket | null;
  /** A tick claimed with a shared database: its claimer, whose claim the fire's open marker
   * settles (it opens only while the claim is still this claimer's). */
  claimer?: string;
  /** With a shared database: the scheduler's claimer id, named by the fire's open marker whether
   * the tick was claimed or the fire is manual (its page), so that another host records the fire
   * if this scheduler's lease runs out (scheduler/claims.ts). */
  scheduler?: string;
}

/** Fires one routine (firing.ts in production, a stub in tests) and returns its record; null
 * when it did not start because `mayStart()` said no (nothing to record). */
export type FireFn = (def: RoutineDef, scheduledAt: Date, o: FireRequest) => Promise<FireResult | null>;

/** The longest a routine with ifBusy "wait" waits by default: its interval, at most an hour. */
export const MAX_DEFAULT_WAIT_MS = 3_600_000;

export interface Entry {
  def: RoutineDef;
  schedule: Schedule;
  /** Its index in the config (the queue's order among routines due at the same time). */
  order: number;
}

export type Announce = (n: {
  project: Project;
  def: RoutineDef;
  prior: RoutineRecord | undefined;
  fire: FireResult;
  final: boolean;
  signal: AbortSignal;
}) => Promise<unknown>;
