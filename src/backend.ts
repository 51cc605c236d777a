// The backend of a project: its lock and its state. Files are the embedded default; a project
// configured with `backend: { type: "postgres" }` keeps both in PostgreSQL (SPEC §9), loaded
// lazily so file-backed commands never pay for the driver.

import { systemClock, type Clock } from './clock.js';
import type { Project } from './config/load.js';
import { execGenerationFloor, fileExecStore } from './exec/file-store.js';
import type { ExecStore } from './exec/store.js';
import { SCHEDULER_LOCK_KEY, fileLockBackend, type LockBackend } from './lock/backend.js';
import { readLockStatus, type LockStatus } from './lock/status.js';
import type { LivenessProbe } from './lock/identity.js';
import { fileRoutineStore } from './scheduler/file-store.js';
import { ensureStateRoot } from './state/json-file.js';
import { trustRoot } from './fs/files.js';
import type { RoutineStore } from './scheduler/store.js';
import type { DbClock } from './pg/db-clock.js';

/** What differs between the backends, as the code outside them needs to know it: it asks these,
 * never which backend it is (`kind` is for display). */
export interface BackendCaps {
  /** One scheduler per project, kept out by its lock: a scheduler that loses it stops (files).
   * Otherwise one per host, every tick claimed once across them, and a lost lease is taken
   * again (a database). */
  schedulerPerProject: boolean;
  /** Its clock is shared by every host (the database's, measured): views say which clock. */
  sharedClock: boolean;
}

export interface Backend {
  /** For display (`file`, `postgres`); decisions ask `caps`. */
  kind: 'file' | 'postgres';
  caps: BackendCaps;
  /** The statuses of the scheduler locks (one with files, one per host with a database). */
  schedulerLocks(probe?: LivenessProbe): Promise<LockStatus[]>;
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
  /** What background work of the stores says (a rewrite of routine-state.json that failed;
   * default: a warning on stderr); the scheduler logs it instead. */
  warn?: (message: string) => void;
  /** The process runs for long (the scheduler): its stores keep their indexes current even
   * for what others record (files: routine-state.json checked once a minute). */
  longRunning?: boolean;
}

/** The project's state and lock folders: routinely uses them only while they are its own user's,
 * writable by it alone (SPEC §12); see checkFolder. */
export function trustProjectRoots(project: Project): void {
  trustRoot(project.stateDir);
  trustRoot(project.lockDir);
}

export function fileBackend(project: Project, opts: OpenOptions = {}): Backend {
  trustProjectRoots(project);
  const lock = fileLockBackend({
      lockDir: project.lockDir,
      ttlMs: project.lockTtlMs,
      refreshMs: project.lockRefreshMs,
      generationFloor: () => execGenerationFloor(project),
      hooks: { notice: (m) => process.stderr.write(`routinely: ${m}\n`) },
  });
  const routines = fileRoutineStore(project, { ...(opts.warn ? { warn: opts.warn } : {}), longRunning: opts.longRunning === true });
  return {
    kind: 'file',
    caps: { schedulerPerProject: true, sharedClock: false },
    // the lock folder directly: the lock backend's status would also read the exec state for a
    // generation floor, which a view of the scheduler does not need
    schedulerLocks: async (probe) => [readLockStatus({ lockDir: project.lockDir, key: SCHEDULER_LOCK_KEY, ...(probe ? { probe } : {}) })],
    lock: {
      ...lock,
      acquire: (key, owner, policy) => {
        ensureStateRoot(project.stateDir);
        return lock.acquire(key, owner, policy);
      },
    },
    exec: fileExecStore(project),
    routines,
    schedulerKey: () => SCHEDULER_LOCK_KEY,
    clock: systemClock,
    // routine-state.json gets what is pending before the process goes
    close: async () => routines.close?.(),
  };
}

export async function openBackend(project: Project, opts: OpenOptions = {}): Promise<Backend> {
  trustProjectRoots(project);
  if (project.backend.type === 'file') return fileBackend(project, opts);
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
