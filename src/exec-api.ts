// The exec operations (SPEC §5) as the library and the CLI call them: with the context's open
// backend, or with the project's, opened for the call at the point the operation needs it and
// closed after. exec/ is given the opener here, so it never imports the backend's module (which
// imports exec/'s stores).

import { withBackend } from './backend.js';
import type { ExecContext } from './exec/context.js';
import * as operations from './exec/operations.js';
import type { LockedPolicy, ResumeOutcome, RunOptions, RunOutcome } from './exec/operations.js';
import type { RunState } from './exec/run-state.js';
import * as views from './exec/views.js';
import type { TaskView, UnreadableRun } from './exec/views.js';

/** The context with a way to open the project's backend for one call, unless it has a backend. */
const withOpener = (ctx: ExecContext): ExecContext => (ctx.backend || ctx.open ? ctx : { ...ctx, open: withBackend });

export function register(
  ctx: ExecContext,
  policy: LockedPolicy & { routine?: string | null },
): ReturnType<typeof operations.register> {
  return operations.register(withOpener(ctx), policy);
}
export function execRun(ctx: ExecContext, opts: RunOptions = {}): Promise<RunOutcome> {
  return operations.execRun(withOpener(ctx), opts);
}
export function execResume(ctx: ExecContext, runId: string | undefined, opts: RunOptions = {}): Promise<ResumeOutcome> {
  return operations.execResume(withOpener(ctx), runId, opts);
}
export function resetTasks(
  ctx: ExecContext,
  ids: string[],
  policy: LockedPolicy,
): ReturnType<typeof operations.resetTasks> {
  return operations.resetTasks(withOpener(ctx), ids, policy);
}
export function execStatus(ctx: ExecContext): Promise<TaskView[]> {
  return views.execStatus(withOpener(ctx));
}
export function listRuns(ctx: ExecContext, limit = 20): Promise<(RunState | UnreadableRun)[]> {
  return views.listRuns(withOpener(ctx), limit);
}
export function showRun(ctx: ExecContext, runId: string): Promise<RunState> {
  return views.showRun(withOpener(ctx), runId);
}
