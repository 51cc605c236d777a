// Taking a lock with `--if-busy wait` while telling the user, once, whom they are waiting for.
// The lock's wait loop (src/lock) polls silently until it succeeds; a first attempt that does not
// wait finds the holder, which is named once, and only then does the wait begin. A lock freed in
// between is simply taken by the wait at once. The exec lock goes through its waiting line
// (lock/line.ts): waiters take it in the order they came.

import { EXEC_LOCK_NAME } from './config/types.js';
import { EXEC_LOCK_KEY, type BusyPolicy, type LockBackend } from './lock/lock-backend.js';
import type { LineTicket } from './lock/line.js';
import { acquireLock } from './lock/named.js';
import type { AcquireResult, LockOwnerInfo } from './lock/lease.js';
import type { LockRecord } from './lock/record.js';

export async function acquireAnnounced(
  lock: LockBackend,
  key: string,
  owner: LockOwnerInfo,
  policy: BusyPolicy & { ticket?: LineTicket | null },
  onWait?: (why: string, holder: LockRecord | null) => void,
): Promise<AcquireResult> {
  if (key === EXEC_LOCK_KEY) return acquireLock(lock, EXEC_LOCK_NAME, 1, owner, policy, onWait);
  if (policy.ifBusy !== 'wait' || !onWait) return lock.acquire(key, owner, policy);
  const first = await lock.acquire(key, owner, { ...policy, ifBusy: 'fail' });
  if (first.ok || first.reason !== 'LOCK_HELD') return first;
  onWait(first.why, first.holder);
  return lock.acquire(key, owner, policy);
}
