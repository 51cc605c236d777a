// The public library API (SPEC §8). The CLI is a thin layer over these functions.

export {
  ExitCode,
  RoutinelyError,
  UsageError,
  ConfigError,
  UnsafePathError,
  StateIOError,
  NotFoundError,
} from './errors.js';
export type { ConfigIssue } from './errors.js';
export { systemClock, ManualClock, type Clock } from './clock.js';

export {
  loadProject,
  findConfig,
  readConfigFile,
  resolveProject,
  type Project,
  type LoadOptions,
} from './config/load.js';
export { validateConfig, validateTaskFile, validateTaskSet, type Validation } from './config/validate.js';
export type { Config, RoutineDef, TaskDef, RoutineAction } from './config/types.js';

// One way to take a lock: withProjectLock (project.ts); its backend for those who need the lease
// itself: projectLockBackend.
export { EXEC_LOCK_KEY, SCHEDULER_LOCK_KEY, type LockBackend, type BusyPolicy } from './lock/lock-backend.js';
export type {
  Lease,
  AcquireResult,
  RefreshResult,
  ReleaseResult,
  LockLost,
  LockHooks,
  IfBusy,
  LockOwnerInfo,
} from './lock/lease.js';
export { readLockStatus, breakStaleLock } from './file-lock/status.js';
export type { LockStatus, BreakResult } from './lock/status.js';
export { judgeLock, describeHolder, type Judgement, type StaleReason } from './lock/stale.js';
export { systemProbe, type LivenessProbe, type ProcessState } from './process/identity.js';
export type { LockRecord, LockOwner, ChildGroup } from './lock/record.js';

export {
  withProjectLock,
  projectLockBackend,
  projectLockStatus,
  namedLockStatusOf,
  type ProjectLockOptions,
  type WithLockResult,
} from './project.js';
export { lockKey, slotKeys, type NamedLockStatus, type SlotStatus, type NamedAcquireResult } from './lock/named.js';
export { configJsonSchema, taskFileJsonSchema } from './config/json-schema.js';

export { register, execRun, execResume, resetTasks, execStatus, listRuns, showRun } from './exec-api.js';
export type { RunOptions, RunOutcome, ResumeOutcome } from './exec/operations.js';
export type { ExecContext } from './exec/context.js';
export type { RegisterSummary } from './exec/registry-sync.js';
export type { TaskView } from './exec/views.js';
export type { RunState, RunStatus, TaskRun, Why, WhyCode, RunEvent } from './exec/run-state.js';
export type { TaskStatus } from './exec/registry.js';
export { openBackend, withBackend, fileBackend, type Backend } from './backend.js';
export { hostId } from './process/identity.js';
