// The PostgreSQL backend (SPEC §9): lock and state in one database shared by several hosts.

import type { Backend } from '../backend.js';
import type { Project } from '../config/load.js';
import { SCHEDULER_LOCK_KEY } from '../lock/backend.js';
import { connect } from './connect.js';
import { pgExecStore } from './exec-store.js';
import { pgLockBackend } from './lease.js';
import { pgRoutineStore } from './routine-store.js';

export async function postgresBackend(project: Project): Promise<Backend> {
  if (project.backend.type !== 'postgres') throw new Error('not a postgres project');
  const { url, project: name } = project.backend;
  const db = await connect(url);
  return {
    kind: 'postgres',
    lock: pgLockBackend({ db, project: name, lockDir: project.lockDir, ttlMs: project.lockTtlMs, refreshMs: project.lockRefreshMs }),
    exec: pgExecStore(db, project as Project & { backend: { type: 'postgres'; url: string; project: string } }),
    routines: pgRoutineStore(db, name),
    // one scheduler per host; the ticks are shared out through routinely_ticks
    schedulerKey: (host) => `${SCHEDULER_LOCK_KEY}@${host}`,
    close: () => db.close(),
  };
}
