// The backend of a project: its lock and its state. Files are the embedded default; a project
// configured with `backend: { type: "postgres" }` keeps both in PostgreSQL (SPEC §9), loaded
// lazily so file-backed commands never pay for the driver.

import { systemClock, type Clock } from './clock.js';
import type { Project } from './config/load.js';
import { execGenerationFloor, fileExecStore } from './exec/file-store.js';
import type { ExecStore } from './exec/store.js';
import { SCHEDULER_LOCK_KEY, fileLockBackend, type LockBackend } from './lock/backend.js';
import { fileRoutineStore } from './scheduler/file-store.js';
import { ensureStateRoot } from './state/json-file.js';
import { trustRoot } from './lock/files.js';
import type { RoutineStore } from './scheduler/store.js';
import type { DbClock } from './pg/db-clock.js';

export interface Backend {
  kind: 'file' | 'postgres';
  lock: LockBackend;
  exec: ExecStore;
  routines: RoutineStore;
  /** The scheduler's lock key: one scheduler per project with files, one per host (and each
   * tick claimed once across hosts) with a database. */
  schedulerKey(host: string): string;
  /** The clock for times other hosts read — ticks, history times, run ids: the wall clock with
   * files, the database's (measured, docs/postgres.md "Clock model") with PostgreSQL. */
  clock: Clock;
  /** With PostgreSQL: the measured offset to the database clock, for the scheduler's log. */
  dbClock?: DbClock;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** Told once at connect when this host's clock is far off the database's (default: a warning
   * on stderr); the scheduler logs it instead. */
  skewNotice?: (message: string) => void;
}

/** The project's state and lock folders: routinely uses them only while they are its own user's,
 * writable by it alone (SPEC §12); see checkFolder. */
export function trustProjectRoots(project: Project): void {
  trustRoot(project.stateDir);
  trustRoot(project.lockDir);
}

export function fileBackend(project: Project): Backend {
  trustProjectRoots(project);
  const lock = fileLockBackend({
      lockDir: project.lockDir,
      ttlMs: project.lockTtlMs,
      refreshMs: project.lockRefreshMs,
      generationFloor: () => execGenerationFloor(project),
      hooks: { notice: (m) => process.stderr.write(`routinely: ${m}\n`) },
  });
  return {
    kind: 'file',
    lock: {
      ...lock,
      acquire: (key, owner, policy) => {
        ensureStateRoot(project.stateDir);
        return lock.acquire(key, owner, policy);
      },
    },
    exec: fileExecStore(project),
    routines: fileRoutineStore(project),
    schedulerKey: () => SCHEDULER_LOCK_KEY,
    clock: systemClock,
    close: async () => {},
  };
}

export async function openBackend(project: Project, opts: OpenOptions = {}): Promise<Backend> {
  trustProjectRoots(project);
  if (project.backend.type === 'file') return fileBackend(project);
  const { postgresBackend } = await import('./pg/backend.js');
  return postgresBackend(project, opts.skewNotice ?? ((m) => process.stderr.write(`routinely: warning: ${m}\n`)));
}

/** `await using b = disposable(await openBackend(p))` closes it at the end of the scope. */
export function disposable(backend: Backend): Backend & AsyncDisposable {
  return Object.assign(backend, { [Symbol.asyncDispose]: () => backend.close() });
}

/** Runs `fn` with the project's backend open, closing it afterwards. */
export async function withBackend<T>(project: Project, fn: (backend: Backend) => Promise<T>): Promise<T> {
  const backend = await openBackend(project);
  try {
    return await fn(backend);
  } finally {
    await backend.close();
  }
}
