// The lock as the rest of routinely sees it: a backend with acquire / status / break. Files are
// the embedded default; a database backend (SPEC §9) implements the same interface.

import type { AcquireResult, BusyPolicy, LockOwnerInfo } from './lease.js';
import type { WaitLine } from './line.js';
import type { BreakResult, LockStatus } from './status.js';

export type { BusyPolicy };

export const EXEC_LOCK_KEY = 'exec-run';
export const SCHEDULER_LOCK_KEY = 'scheduler';

export interface LockBackend {
  acquire(key: string, owner: LockOwnerInfo, policy?: BusyPolicy): Promise<AcquireResult>;
  status(key: string): Promise<LockStatus>;
  /** `onWatch`: told when a live holder on this host is watched (up to a TTL) before the
   * verdict, since such a holder is judged by its heartbeat on this host's clock (SPEC §4.4). */
  breakStale(key: string, onWatch?: (holder: string, forMs: number) => void): Promise<BreakResult>;
  /** The keys starting with `prefix` that have a lock record (held, stale or released): with a
   * database there is one scheduler key per host (`scheduler@<host>`). */
  keys(prefix: string): Promise<string[]>;
  /** The waiting line of each lock name (line.ts): arrival order across processes. */
  line?: WaitLine;
  /** Whether `key` is held now: one look, without what `status` adds for people (children,
   * times); what a waiter asks to count a lock's free slots. */
  holds?(key: string): Promise<boolean>;
}
