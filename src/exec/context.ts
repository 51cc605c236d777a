// What every exec operation is given (SPEC §5): the project, the clock, where warnings go, and
// an open backend or none (then each operation opens the project's own for its call).

import { withBackend, type Backend } from '../backend.js';
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
}

/** Runs `fn` with the context's backend, or with the project's, opened for the call. */
export async function withStore<T>(ctx: ExecContext, fn: (backend: Backend) => Promise<T>): Promise<T> {
  return ctx.backend ? fn(ctx.backend) : withBackend(ctx.project, fn);
}


export const nowIso = (c: Clock): string => new Date(c.now()).toISOString();

