// Reading and updating routine-state.json and the history files. Every update is a
// read-modify-write under a short lock (`routine-state`, the same lease mechanism as the exec
// lock), so concurrent writers — the scheduler and a manual `routine run`, `routine pause` —
// never lose each other's updates.

import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { StateIOError } from '../errors.js';
import { acquireFileLease } from '../lock/acquire.js';
import { appendHistory, historyPath, readHistory } from '../state/history.js';
import { corruptMessage, readJsonState, writeJsonAtomic } from '../state/json-file.js';
import {
  applyFire,
  checkRoutineState,
  emptyState,
  setPaused,
  type Fire,
  type RoutineStateFile,
} from '../state/routine-state.js';
import type { RoutineStore } from './store.js';

export const STATE_LOCK_KEY = 'routine-state';

export function statePath(project: Project): string {
  return join(project.stateDir, 'routine-state.json');
}

/** The current state; a corrupt file is moved aside (reported through `warn`), never fatal. */
export function readRoutineState(project: Project, warn: (message: string) => void = () => {}): RoutineStateFile {
  const path = statePath(project);
  const r = readJsonState(path, checkRoutineState);
  if (r.kind === 'ok') return r.value;
  if (r.kind === 'corrupt') warn(corruptMessage(path, r));
  return emptyState();
}

async function withStateLock<T>(project: Project, fn: () => Promise<T>): Promise<T> {
  const got = await acquireFileLease({
    lockDir: project.lockDir,
    key: STATE_LOCK_KEY,
    ttlMs: 30_000,
    refreshMs: 10_000,
    owner: { command: 'routine state' },
    ifBusy: 'wait',
    waitTimeoutMs: 30_000,
  });
  if (!got.ok) throw new StateIOError(`cannot update ${statePath(project)}: its lock is ${got.why}`);
  try {
    return await fn();
  } finally {
    await got.lease.release();
  }
}

export async function updateRoutineState(
  project: Project,
  change: (state: RoutineStateFile) => RoutineStateFile,
  warn?: (message: string) => void,
): Promise<RoutineStateFile> {
  return withStateLock(project, async () => {
    const next = change(readRoutineState(project, warn));
    await writeJsonAtomic(statePath(project), next);
    return next;
  });
}

/** Records one fire in routine-state.json and in the routine's history. */
export async function recordFire(project: Project, routineId: string, fire: Fire, warn?: (m: string) => void): Promise<void> {
  await withStateLock(project, async () => {
    const state = readRoutineState(project, warn);
    state.routines[routineId] = applyFire(state.routines[routineId], fire);
    await writeJsonAtomic(statePath(project), state);
    appendHistory(historyPath(project.stateDir, routineId), fire);
  });
}

export async function pauseRoutine(project: Project, routineId: string, paused: boolean, note: string | null): Promise<void> {
  await updateRoutineState(project, (s) => ({ ...s, routines: { ...s.routines, [routineId]: setPaused(s.routines[routineId], paused, note) } }));
}

export function fileRoutineStore(project: Project): RoutineStore {
  return {
    read: async (warn) => readRoutineState(project, warn),
    recordFire: (id, fire, warn) => recordFire(project, id, fire, warn),
    setPaused: (id, paused, note) => pauseRoutine(project, id, paused, note),
    history: async (id) => readHistory(historyPath(project.stateDir, id)),
    // one scheduler per project (the `scheduler` lock): every tick is ours
    claimTick: async () => true,
  };
}
