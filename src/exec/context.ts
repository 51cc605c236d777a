// What every exec operation is given (SPEC §5): the project, the clock, where warnings go, and
// an open backend or a way to open the project's own for the call (src/exec-api.ts gives
// `open` to callers without a backend; exec/ itself never opens one).

import type { Backend } from '../backend-types.js';
import type { Clock } from '../clock.js';
import type { Project } from '../config/load.js';

export interface ExecContext {
  project: Project;
  clock?: Clock;
  /** Non-fatal problems (a corrupt registry moved aside, ...). */
  warn?: (message: string) => void;
  /** Environment for tasks (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** An open backend to use (else the project's is opened and closed per operation). */
  backend?: Backend;
  /** Opens the project's backend for one call when `backend` is not given (src/exec-api.ts
   * sets it: the backend's module imports exec/, so exec/ does not import it back). */
  open?: <T>(project: Project, fn: (backend: Backend) => Promise<T>) => Promise<T>;
}

/** Runs `fn` with the context's backend, or with the project's, opened for the call. */
export async function withExecBackend<T>(ctx: ExecContext, fn: (backend: Backend) => Promise<T>): Promise<T> {
  if (ctx.backend) return fn(ctx.backend);
  if (!ctx.open)
    throw new Error(
      'an exec operation was called with neither a backend nor a way to open one (call it through src/exec-api.ts)',
    );
  return ctx.open(ctx.project, fn);
}

export const nowIso = (c: Clock): string => new Date(c.now()).toISOString();
