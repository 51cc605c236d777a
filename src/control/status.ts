// Whether a scheduler runs for the project (SPEC §10 `scheduler status`, the first line of
// `routine list`, `routine list --check`): read from the scheduler lock, without side effects —
// one lock per project with files, one per host with a database. A lock whose holder is gone
// (stale) means no scheduler runs; it is reported with why, for the person who wonders.

import type { Backend } from '../backend-types.js';
import { samePidSpace, systemProbe, type LivenessProbe } from '../process/identity.js';
import { checkLockRecord, type LockRecord } from '../lock/record.js';
import type { LockStatus } from '../lock/status.js';

export interface SchedulerInstance {
  /** Its lock key: `scheduler`, or `scheduler@<host>` with a database. */
  key: string;
  pid: number;
  host: string;
  /** When it took its lock (ISO). */
  since: string;
  heartbeat_age_s: number | null;
  /** Its pid means a process here (same host, boot and pid namespace): `scheduler stop` may
   * signal it from this host. */
  here: boolean;
  /** The config file it runs with, when its lock records one. */
  config: string | null;
  /** It is shutting down: stopped firing, lets running routines finish (SPEC §6 "Stop"). */
  stopping: boolean;
  /** The lock record, validated (SPEC §12); what `scheduler stop` checks the process against. */
  record: LockRecord;
}

export interface StaleScheduler {
  key: string;
  pid: number | null;
  host: string | null;
  /** Why its holder counts as gone (`owner pid 4711 is not running`, `heartbeat expired …`). */
  why: string;
}

export interface SchedulerState {
  running: boolean;
  backend: Backend['kind'];
  /** The schedulers running (at most one with files). */
  schedulers: SchedulerInstance[];
  /** Scheduler locks left by schedulers that are gone. */
  stale: StaleScheduler[];
}

function instance(s: LockStatus, probe: LivenessProbe): SchedulerInstance | null {
  // Rows of a shared database are input (SPEC §12): only a record that validates is used.
  const record = s.record && checkLockRecord(s.record);
  if (!record) return null;
  const o = record.owner;
  return {
    key: s.key,
    pid: o.pid,
    host: o.host,
    since: new Date(record.created_at * 1000).toISOString(),
    heartbeat_age_s: s.heartbeat_age_s,
    here: samePidSpace(o, probe),
    config: typeof o.config === 'string' ? o.config : null,
    stopping: o.stopping === true,
    record,
  };
}

/** The project's schedulers, from their locks. Cheap (a folder listing and a read, or two small
 * queries) and read-only: nothing is reclaimed, moved or written. */
export async function readSchedulerState(
  backend: Backend,
  probe: LivenessProbe = systemProbe(),
): Promise<SchedulerState> {
  return stateOf(await backend.schedulerLocks(probe), backend.kind, probe);
}

/** The state from the scheduler locks' statuses (also `routine list` from the cache, which reads
 * the one file lock itself). */
export function stateOf(
  statuses: readonly LockStatus[],
  kind: Backend['kind'],
  probe: LivenessProbe = systemProbe(),
): SchedulerState {
  const schedulers: SchedulerInstance[] = [];
  const stale: StaleScheduler[] = [];
  for (const s of statuses) {
    if (s.state === 'free') continue;
    const i = instance(s, probe);
    if (s.state === 'held' && i) schedulers.push(i);
    else
      stale.push({
        key: s.key,
        pid: i?.pid ?? null,
        host: i?.host ?? null,
        why: s.why ?? (i ? 'unknown' : 'the lock record is unreadable'),
      });
  }
  // this host's first, then by host
  schedulers.sort((a, b) => Number(b.here) - Number(a.here) || a.host.localeCompare(b.host));
  return { running: schedulers.length > 0, backend: kind, schedulers, stale };
}
