// The backend of a project: its lock and its state. Files are the embedded default; a project
// configured with `backend: { type: "postgres" }` keeps both in PostgreSQL (SPEC §9), loaded
// lazily so file-backed commands never pay for the driver.

import { systemClock } from './clock.js';
import type { Project } from './config/load.js';
import { backendCaps } from './config/backend-caps.js';
import { execGenerationFloor, fileExecStore } from './exec/file-store.js';
import { SCHEDULER_LOCK_KEY, type LockBackend } from './lock/lock-backend.js';
import { fileLockBackend } from './file-lock/backend.js';
import { readLockStatus } from './file-lock/status.js';
import type { Backend, OpenOptions } from './backend-types.js';
import { fileRoutineStore } from './state/file-store.js';
import { ensureStateRoot } from './state/json-file.js';
import { trustStateAndLocks } from './fs/files.js';

export type { Backend, BackendCaps, OpenOptions } from './backend-types.js';

/** The project's state and lock folders: routinely uses them only while they are its own user's,
 * writable by it alone (SPEC §12); see checkFolder. */
export function trustProjectRoots(project: Project): void {
  trustStateAndLocks(project.stateDir, project.lockDir);
}

/** The project's file lock alone (what `lock run` needs when it starts from the cache): its roots trusted,
 * its generations never below the exec runs' (SPEC §4.7), its notices said on stderr. */
export function projectFileLock(project: Project, notice: (message: string) => void): LockBackend {
  trustProjectRoots(project);
  return fileLockBackend({
    lockDir: project.lockDir,
    ttlMs: project.lockTtlMs,
    refreshMs: project.lockRefreshMs,
    generationFloor: () => execGenerationFloor(project),
    hooks: { notice },
  });
}

export function fileBackend(project: Project, opts: OpenOptions = {}): Backend {
  const lock = projectFileLock(project, (m) => process.stderr.write(`routinely: ${m}\n`));
  const routines = fileRoutineStore(project, {
    ...(opts.warn ? { warn: opts.warn } : {}),
    longRunning: opts.longRunning === true,
  });
  return {
    kind: 'file',
    caps: backendCaps(project.backend),
    // the lock folder directly: the lock backend's status would also read the exec state for a
    // generation floor, which a view of the scheduler does not need
    schedulerLocks: async (probe) => [
      readLockStatus({ lockDir: project.lockDir, key: SCHEDULER_LOCK_KEY, ...(probe ? { probe } : {}) }),
    ],
    lock: {
      ...lock,
      acquire: (key, owner, policy) => {
        ensureStateRoot(project.stateDir);
        return lock.acquire(key, owner, policy);
      },
    },
    exec: fileExecStore(project, opts.warn ?? ((m) => process.stderr.write(`routinely: warning: ${m}\n`))),
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
  const { postgresBackend } = await import('./pg/postgres-backend.js');
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
