// The project as a library user sees it (SPEC §8): its config, its exec lock and its named locks.

import { loadProject, type LoadOptions, type Project } from './config/load.js';
import { disposable, openBackend } from './backend.js';
import { EXEC_LOCK_KEY, type BusyPolicy, type LockBackend } from './lock/lock-backend.js';
import type { Lease, LockLost, LockOwnerInfo } from './lock/lease.js';
import type { LockRecord } from './lock/record.js';
import type { LockStatus } from './lock/status.js';
import { acquireLock, namedLockStatus, slotsOf, type NamedLockStatus } from './lock/named.js';
import { liveSlots } from './lock/live-slots.js';
import { isLockKey } from './file-lock/paths.js';
import { EXEC_LOCK_NAME, LOCK_NAME_PATTERN, reservedLockName } from './config/types.js';
import { UsageError } from './errors.js';

/** The project's lock (files, or the database), for callers that only need the lock. */
export async function projectLockBackend(project: Project): Promise<LockBackend & { close(): Promise<void> }> {
  const backend = await openBackend(project);
  return { ...backend.lock, close: () => backend.close() };
}

export interface ProjectLockOptions extends LoadOptions, BusyPolicy {
  /** An already loaded project; otherwise it is loaded from `cwd` / `configPath`. */
  project?: Project;
  /** A named lock (SPEC §4.16), with the slots the config declares; default "exec", the project
   * exec lock. */
  lock?: string;
  /** A backend lock key (instead of `lock`): the scheduler's, say. */
  key?: string;
  owner?: LockOwnerInfo;
}

export type WithLockResult<T> =
  | { ok: true; value: T }
  | { ok: false; reason: 'busy' | 'timeout' | 'aborted'; holder: LockRecord | null; why: string }
  | { ok: false; reason: 'lost'; lost: LockLost; value: T | undefined };

/** Runs `fn` while holding the project lock; the lease's `signal` aborts if the lock is lost.
 * The lock is released afterwards (only if still ours), also when `fn` throws. */
export async function withProjectLock<T>(
  options: ProjectLockOptions,
  fn: (lease: Lease) => Promise<T>,
): Promise<WithLockResult<T>> {
  // what it is asked is checked first: a refused call writes nothing (not even the state folder)
  checkLockOptions(options);
  // an AbortSignal already aborted: nothing is taken, nothing runs (as for one aborted while waiting)
  if (options.signal?.aborted)
    return { ok: false, reason: 'aborted', holder: null, why: 'aborted before the lock was taken' };
  const name = options.key === undefined ? lockName(options.lock) : EXEC_LOCK_NAME;
  const project = options.project ?? loadProject(options);
  await using backend = disposable(await openBackend(project));
  const owner = options.owner ?? { command: 'library' };
  const got =
    options.key !== undefined
      ? await backend.lock.acquire(options.key, owner, options)
      : await acquireLock(
          backend.lock,
          name,
          liveSlots(project.configPath, slotsOf(project.config.locks, name), () =>
            slotsOf(loadProject({ configPath: project.configPath }).config.locks, name),
          ),
          owner,
          options,
        );
  if (!got.ok) {
    const reason = got.reason === 'WAIT_TIMEOUT' ? 'timeout' : got.reason === 'ABORTED' ? 'aborted' : 'busy';
    return { ok: false, reason, holder: got.holder, why: got.why };
  }
  await using lease = got.lease;
  const value = await fn(lease);
  const check = lease.verify();
  // (a lease `fn` released itself lost nothing: its value stands)
  if (!check.ok && lease.lost !== null) return { ok: false, reason: 'lost', lost: check.lost, value };
  return { ok: true, value };
}

/** The lock's state as `routinely lock status --json` shows it, read from the project's own
 * backend: the lock folder with files, the database with `backend.type: "postgres"` (where the
 * lock folder says nothing). */
export async function projectLockStatus(
  options: LoadOptions & { project?: Project; key?: string } = {},
): Promise<LockStatus> {
  const project = options.project ?? loadProject(options);
  await using backend = disposable(await openBackend(project));
  // awaited here: `await using` closes the backend when the function returns
  return await backend.lock.status(options.key ?? EXEC_LOCK_KEY);
}

/** Every slot of a named lock, as `routinely lock status --lock NAME --json` shows it. */
export async function namedLockStatusOf(
  options: LoadOptions & { project?: Project; lock: string },
): Promise<NamedLockStatus> {
  const project = options.project ?? loadProject(options);
  await using backend = disposable(await openBackend(project));
  const name = lockName(options.lock);
  return await namedLockStatus(backend.lock, name, slotsOf(project.config.locks, name));
}

/** A lock name as given (default the exec lock); one that cannot be a lock is a usage error. */
/** The busy policy and the lock as a caller gave them, checked as the CLI checks its flags (a
 * JavaScript caller's `ifBusy: "WAIT"` or `waitTimeoutMs: "500"` must not quietly become another
 * policy). */
function checkLockOptions(o: ProjectLockOptions): void {
  const bad = (what: string): never => {
    throw new UsageError(`withProjectLock: ${what}`);
  };
  if (o.ifBusy !== undefined && o.ifBusy !== 'fail' && o.ifBusy !== 'skip' && o.ifBusy !== 'wait')
    bad(`ifBusy ${JSON.stringify(o.ifBusy)} is not one of "fail", "skip", "wait"`);
  if (o.waitTimeoutMs !== undefined && !(typeof o.waitTimeoutMs === 'number' && o.waitTimeoutMs >= 0))
    bad(`waitTimeoutMs ${JSON.stringify(o.waitTimeoutMs)} is not a number of milliseconds (0 or more)`);
  if ('waitTimeoutSeconds' in o) bad('waitTimeoutSeconds is not an option here: give waitTimeoutMs');
  if (o.lock !== undefined && typeof o.lock !== 'string') bad(`lock ${JSON.stringify(o.lock)} is not a lock name`);
  if (o.lock !== undefined && o.key !== undefined) bad('lock and key name a lock each: give one of them');
  if (o.key !== undefined && !isLockKey(o.key))
    bad(`key ${JSON.stringify(o.key)} is not a lock key (letters, digits, ".", "_" and "-")`);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) bad('signal is not an AbortSignal');
}

function lockName(name: string | undefined): string {
  if (name === undefined) return EXEC_LOCK_NAME;
  if (!LOCK_NAME_PATTERN.test(name))
    throw new UsageError(
      `${JSON.stringify(name)} is not a lock name (lowercase letters, digits, "_" and "-", at most 63 characters)`,
    );
  const reserved = reservedLockName(name);
  if (reserved) throw new UsageError(`lock: ${reserved}`);
  return name;
}
