// The backend of a project, as the code outside the backends sees it: types only, so the
// stores (exec/, scheduler/, pg/) and whoever composes them (backend.ts, pg/postgres-backend.ts) import
// it without importing each other.

import type { Clock } from './clock.js';
import type { ExecStore } from './exec/store.js';
import type { LockBackend } from './lock/lock-backend.js';
import type { LockStatus } from './lock/status.js';
import type { LivenessProbe } from './process/identity.js';
import type { RoutineStore } from './state/store.js';
import type { DbClock } from './pg/db-clock.js';

/** What differs between the backends (config/backend-caps.ts decides it once per project). */
export type { BackendCaps } from './config/backend-caps.js';
import type { BackendCaps } from './config/backend-caps.js';

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
