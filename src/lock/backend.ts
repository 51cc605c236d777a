// The lock as the rest of routinely sees it: a backend with acquire / status / break. Files are
// the embedded default; a database backend (SPEC §9) implements the same interface.

import type { Clock } from '../clock.js';
import { acquireFileLease } from './acquire.js';
import type { LivenessProbe } from './identity.js';
import type { AcquireResult, IfBusy, LockHooks, LockOwnerInfo } from './lease.js';
import { breakStaleLock, readLockStatus, type BreakResult, type LockStatus } from './status.js';

export const EXEC_LOCK_KEY = 'exec-run';
export const SCHEDULER_LOCK_KEY = 'scheduler';

export interface BusyPolicy {
  ifBusy?: IfBusy;
  waitTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface LockBackend {
  acquire(key: string, owner: LockOwnerInfo, policy?: BusyPolicy): Promise<AcquireResult>;
  status(key: string): Promise<LockStatus>;
  breakStale(key: string): Promise<BreakResult>;
}

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
      acquireFileLease({ ...common, key, owner, ttlMs: o.ttlMs, refreshMs: o.refreshMs, pollMaxMs: o.pollMaxMs, hooks: o.hooks, ...policy }),
    status: async (key) => readLockStatus({ ...common, key }),
    breakStale: (key) => breakStaleLock({ ...common, key }),
  };
}
