// The file lock below the public API, for the test fixtures and the benchmarks that drive it
// directly (built to dist/lock-internals.cjs; the package's exports do not name it). The library's
// one way to take a lock is withProjectLock, its backend projectLockBackend (index.ts).

export { attemptAcquire } from './file-lock/acquire.js';
export { acquireFileLease } from './file-lock/wait.js';
export { fileLockBackend } from './file-lock/backend.js';
export { acquireLock } from './lock/named.js';
export { guardGroup, guardLock, guardNotify, guardPid, unguardGroup } from './exec/death-guard.js';
