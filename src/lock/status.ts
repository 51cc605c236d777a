// What `lock status` and `lock break` answer (SPEC §4.8), whichever backend keeps the lock: the
// file lock (file-lock/status.ts) and the database lease (pg/lease.ts) both return these.

import type { LockRecord } from './record.js';
import type { StaleReason } from './stale.js';

export interface LockStatus {
  key: string;
  path: string;
  state: 'free' | 'held' | 'stale';
  /** The holder's record with its latest heartbeat, children and run. */
  record: LockRecord | null;
  /** The last generation handed out for this key (0 when never acquired). */
  generation: number;
  holder: string | null;
  heartbeat_age_s: number | null;
  expires_in_s: number | null;
  stale_reason: StaleReason | null;
  why: string | null;
}

/** What ending a stale holder's process groups did. */
export interface OrphanReport {
  /** Group ids that were signalled. */
  ended: number[];
  /** Group ids that needed SIGKILL after the grace period. */
  killed: number[];
}

export type BreakResult =
  | {
      broken: true;
      why: string;
      /** null: the record could not be read, so none was kept */ staleFile: string | null;
      orphans: OrphanReport;
    }
  | { broken: false; reason: 'FREE' | 'NOT_STALE' | 'CHANGED'; why: string; status: LockStatus };
