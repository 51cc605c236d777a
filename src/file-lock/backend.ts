// The file lock as a LockBackend (lock/lock-backend.ts): the embedded default.

import type { Clock } from '../clock.js';
import { acquireFileLease } from './wait.js';
import { systemClock } from '../clock.js';
import { systemProbe } from '../process/identity.js';
import { lookAtLock } from './look.js';
import { lockPaths } from './paths.js';
import { namesIn } from '../fs/files.js';
import type { LivenessProbe } from '../process/identity.js';
import type { LockHooks } from '../lock/lease.js';
import type { LockBackend } from '../lock/lock-backend.js';
import { fileWaitLine } from './line.js';
import { breakStaleLock, readLockStatus } from './status.js';

export interface FileBackendOptions {
  lockDir: string;
  ttlMs: number;
  refreshMs: number;
  clock?: Clock;
  probe?: LivenessProbe;
  pollMaxMs?: number;
  hooks?: LockHooks;
  /** See FileLockOptions.generationFloor. */
  generationFloor?: () => number;
}

export function fileLockBackend(o: FileBackendOptions): LockBackend {
  const common = { lockDir: o.lockDir, clock: o.clock, probe: o.probe, generationFloor: o.generationFloor };
  return {
    acquire: (key, owner, policy = {}) =>
      acquireFileLease({
        ...common,
        key,
        owner,
        ttlMs: o.ttlMs,
        refreshMs: o.refreshMs,
        pollMaxMs: o.pollMaxMs,
        hooks: o.hooks,
        ...policy,
      }),
    status: async (key) => readLockStatus({ ...common, key }),
    breakStale: (key, onWatch) => breakStaleLock({ ...common, key, ttlMs: o.ttlMs, ...(onWatch ? { onWatch } : {}) }),
    keys: async (prefix) => lockKeys(o.lockDir, prefix),
    line: fileWaitLine({ lockDir: o.lockDir, ttlMs: o.ttlMs, refreshMs: o.refreshMs, clock: o.clock, probe: o.probe }),
    // a look that must be taken again (a slot appearing meanwhile) counts as held
    holds: async (key) =>
      lookAtLock(lockPaths(o.lockDir, key), (o.clock ?? systemClock).now(), o.probe ?? systemProbe(), {
        floor: o.generationFloor,
      }).kind !== 'free',
  };
}

const LOCK_FILE = /^([A-Za-z0-9][A-Za-z0-9._-]{0,79})\.(?:lock|slot\.[1-9][0-9]{0,15})$/;

/** The keys whose lock files are in `dir` (the view `<key>.lock` or a slot `<key>.slot.<n>`). */
export function lockKeys(dir: string, prefix: string): string[] {
  const names = namesIn(dir);
  const keys = new Set<string>();
  for (const n of names) {
    const key = LOCK_FILE.exec(n)?.[1];
    if (key && key.startsWith(prefix) && !key.includes('..')) keys.add(key);
  }
  return [...keys].sort();
}
