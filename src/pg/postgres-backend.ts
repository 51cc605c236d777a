// The PostgreSQL backend (SPEC §9): lock and state in one database shared by several hosts.

import type { Backend } from '../backend-types.js';
import { backendCaps } from '../config/backend-caps.js';
import type { Project } from '../config/load.js';
import { SCHEDULER_LOCK_KEY } from '../lock/lock-backend.js';
import { connect } from './connect.js';
import { DbClock, skewWarning } from './db-clock.js';
import { pgExecStore } from './exec-store.js';
import { pgLockBackend } from './lease.js';
import { pgRoutineStore } from './routine-store.js';
import { SpoolingStore } from '../state/spooling-store.js';

/** How often the offset to the database clock is measured again, at most. */
const CLOCK_REFRESH_MAX_MS = 30_000;

export async function postgresBackend(
  project: Project,
  skewNotice: (message: string) => void = () => {},
): Promise<Backend> {
  if (project.backend.type !== 'postgres') throw new Error('not a postgres project');
  const { url, project: name, poolSize } = project.backend;
  const db = await connect(url, { poolSize, ttlMs: project.lockTtlMs });
  // Times that other hosts read (ticks, history, run ids) follow the database clock, measured
  // now (three round trips, the shortest wins) and again about as often as a lease heartbeat.
  const clock = new DbClock(db);
  try {
    await clock.measure(3);
  } catch (err) {
    await db.close();
    throw err;
  }
  const warning = skewWarning(clock.offsetMs ?? 0);
  if (warning) skewNotice(warning);
  clock.startRefreshing(Math.max(1000, Math.min(project.lockRefreshMs, CLOCK_REFRESH_MAX_MS)));
  const lock = pgLockBackend({
    db,
    project: name,
    lockDir: project.lockDir,
    ttlMs: project.lockTtlMs,
    refreshMs: project.lockRefreshMs,
  });
  return {
    kind: 'postgres',
    caps: backendCaps(project.backend),
    schedulerLocks: async () => Promise.all((await lock.keys(`${SCHEDULER_LOCK_KEY}@`)).map((k) => lock.status(k))),
    lock,
    exec: pgExecStore(db, project as Project & { backend: { type: 'postgres'; url: string; project: string } }),
    // what the database does not take waits in this host's spool (SPEC §6)
    routines: new SpoolingStore(pgRoutineStore(db, name, project.config.retention.historyLines), project.stateDir),
    // one scheduler per host; the ticks are shared out through routinely_ticks
    schedulerKey: (host) => `${SCHEDULER_LOCK_KEY}@${host}`,
    clock,
    dbClock: clock,
    close: () => {
      clock.stopRefreshing();
      return db.close();
    },
  };
}
