// What differs between the backends, decided once for a project's backend (SPEC §9): code outside
// the backends asks these, never which backend it is. Imports nothing, so the commands that start
// from the cache and the backends alike can ask it.

/** What differs between the backends, as the code outside them needs to know it. */
export interface BackendCaps {
  /** One scheduler per project, kept out by its lock: a scheduler that loses it stops (files).
   * Otherwise one per host, every tick claimed once across them, and a lost lease is taken
   * again (a database); the hosts then schedule a routine without `timezone` in one zone (UTC),
   * so that they claim the same times. */
  schedulerPerProject: boolean;
  /** Its clock is shared by every host (the database's, measured): views say which clock. */
  sharedClock: boolean;
  /** The state is this host's files: the short commands (`routine list`) read it, and the cache
   * of the schedules written beside it, without opening a backend. */
  localState: boolean;
}

export function backendCaps(backend: { type: 'file' | 'postgres' }): BackendCaps {
  return backend.type === 'file'
    ? { schedulerPerProject: true, sharedClock: false, localState: true }
    : { schedulerPerProject: false, sharedClock: true, localState: false };
}
