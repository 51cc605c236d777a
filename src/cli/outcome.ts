// How a command fired by the scheduler (or by `routine run`) tells it what happened. Both a
// success and a busy skip exit 0, so the exit code cannot say; the child sends its outcome over
// the IPC channel the scheduler opened (Node's `ipc` stdio; grandchildren do not inherit it).
// Outside the scheduler there is no channel and these calls do nothing.

import type { RoutineResult } from '../state/routine-state.js';

export interface ChildOutcome {
  type: 'routinely:outcome';
  outcome: RoutineResult;
  reason: string | null;
  run_id: string | null;
  exit_code: number;
}

export interface ChildStarted {
  type: 'routinely:started';
  run_id: string | null;
}

const pending: Promise<void>[] = [];

function send(message: ChildOutcome | ChildStarted): void {
  if (!process.send || !process.connected) return;
  pending.push(
    new Promise<void>((resolve) => {
      process.send!(message, undefined, {}, () => resolve());
    }),
  );
}

/** The lock is ours and the work begins. */
export function reportStarted(runId: string | null = null): void {
  send({ type: 'routinely:started', run_id: runId });
}

export function reportOutcome(outcome: RoutineResult, reason: string | null, exitCode: number, runId: string | null = null): void {
  send({ type: 'routinely:outcome', outcome, reason, run_id: runId, exit_code: exitCode });
}

/** Waits until every message has been handed to the channel, then lets it go. */
export async function flushOutcome(): Promise<void> {
  await Promise.all(pending);
  if (process.connected) process.disconnect?.();
}
