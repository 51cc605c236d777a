// Routine state in files (SPEC §3, §6). The history files hold the facts — every fire, every
// pause and resume, appended — and routine-state.json is their index, rewritten after each
// change under a short lock (`routine-state`). Readers check the index against the history files
// (inode and size: one lstat per routine) and fold in whatever it is missing, so:
// - a lost, garbled or truncated index is rebuilt from history, counts and paused state included;
// - a writer that stalls between reading and writing the index (its lock expired meanwhile) can
//   at worst put back an older index, and the next reader folds the newer facts in again: no
//   update is ever lost, because no fact lives only in the index.

import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { StateIOError } from '../errors.js';
import { acquireFileLease } from '../lock/acquire.js';
import { checkFolder, lstatQuiet, trustRoot } from '../lock/files.js';
import {
  HISTORY_LIMIT,
  TRIM_AT_BYTES,
  appendHistoryLine,
  fireLine,
  historyIds,
  historyPath,
  openLine,
  parseHistory,
  pauseLine,
  readHistoryBytes,
  readHistoryText,
  rotateHistory,
  unreadableMessage,
  type HistoryEntry,
} from '../state/history.js';
import { corruptMessage, ensureStateRoot, readJsonState, writeJsonDurable } from '../state/json-file.js';
import { checkRecord, checkRoutineState, emptyState, foldLines, interruptedFire, type Fire, type Folded, type OpenFire, type RoutineStateFile } from '../state/routine-state.js';
import type { PauseChange, RoutineStore, Warn } from './store.js';

export const STATE_LOCK_KEY = 'routine-state';

export function statePath(project: Project): string {
  return join(project.stateDir, 'routine-state.json');
}

const checkRec = (v: unknown) => checkRecord(v);

interface Reading {
  state: RoutineStateFile;
  /** The index on disk no longer matches the history (rebuilt or folded forward). */
  stale: boolean;
}

/** The current state: the index, checked against every history file. `write`: the caller is
 * about to rewrite the index (under the lock), so a corrupt one is moved aside. */
export function readRoutineStateChecked(project: Project, warn: Warn, mode: 'view' | 'write' = 'view'): Reading {
  trustRoot(project.stateDir);
  checkFolder(project.stateDir);
  checkFolder(join(project.stateDir, 'history'));
  const path = statePath(project);
  const r = readJsonState(path, checkRoutineState, { moveAside: mode === 'write' });
  let state: RoutineStateFile;
  let stale = false;
  if (r.kind === 'ok') state = r.value;
  else {
    state = emptyState();
    stale = true;
    if (r.kind === 'corrupt') warn(corruptMessage(path, r, 'rebuilt from the history files'));
  }
  // An index written before history files carried pauses (no `sources`): its records are the
  // truth as they stand, and it is simply marked up to date.
  const legacy = r.kind === 'ok' && state.sources === undefined;
  const sources = { ...(state.sources ?? {}) };
  const routines = { ...state.routines };
  for (const id of historyIds(project.stateDir)) {
    const file = historyPath(project.stateDir, id);
    const st = lstatQuiet(file);
    if (!st || !st.isFile()) continue;
    if (legacy && routines[id]) {
      sources[id] = { ino: st.ino, size: st.size, recent: [] };
      stale = true;
      continue;
    }
    const src = sources[id];
    if (r.kind === 'ok' && src && src.ino === st.ino && src.size === st.size) continue;
    stale = true;
    // Forward from where the index stopped, when it is the same file and it only grew;
    // otherwise the whole file (rotated, truncated, or no index).
    let forward = r.kind === 'ok' && src !== undefined && src.ino === st.ino && src.size < st.size && routines[id] !== undefined && src.tail !== undefined;
    let read: { text: string; ino: number; size: number } | null = null;
    if (forward) {
      const tail = Buffer.from(src!.tail!, 'base64');
      const bytes = readHistoryBytes(file, Math.max(0, src!.size - tail.length));
      if (bytes && bytes.bytes.subarray(0, tail.length).equals(tail)) {
        read = { text: bytes.bytes.subarray(tail.length).toString('utf8'), ino: bytes.ino, size: bytes.size };
      } else forward = false;
    }
    if (!forward) read = readHistoryText(file, 0);
    if (!read) continue;
    const parsed = parseHistory(read.text, checkRec);
    if (parsed.unreadable.length > 0) {
      const numbers = forward ? lineNumbers(file, src!.size, parsed.unreadable) : parsed.unreadable;
      warn(unreadableMessage(file, numbers));
    }
    const base: Folded | undefined = forward ? { record: routines[id]!, recent: src!.recent } : undefined;
    const folded = foldLines(parsed.lines, base);
    routines[id] = folded.record;
    sources[id] = { ino: read.ino, size: read.size, recent: folded.recent, tail: tailOf(file, read.size) };
  }
  return { state: { version: 1, routines, sources }, stale };
}

/** The last up to 64 bytes before `size`, base64. */
function tailOf(file: string, size: number): string {
  const start = Math.max(0, size - 64);
  const read = readHistoryBytes(file, start);
  return read ? read.bytes.subarray(0, size - start).toString('base64') : '';
}

/** Line numbers in the whole file of lines numbered from `offset`. */
function lineNumbers(file: string, offset: number, relative: number[]): number[] {
  const head = readHistoryText(file, 0)?.text.slice(0, offset) ?? '';
  const before = head.split('\n').length - 1;
  return relative.map((n) => n + before);
}

/** The state as read-only views show it (nothing is written). */
export function readRoutineState(project: Project, warn: Warn = () => {}): RoutineStateFile {
  return readRoutineStateChecked(project, warn).state;
}

async function withStateLock<T>(project: Project, fn: () => Promise<T>): Promise<T> {
  ensureStateRoot(project.stateDir);
  const got = await acquireFileLease({
    lockDir: project.lockDir,
    key: STATE_LOCK_KEY,
    // as short as the project's lock: a writer that stalls loses it as soon as the exec lock would
    ttlMs: Math.min(30_000, project.lockTtlMs),
    refreshMs: Math.min(10_000, project.lockRefreshMs),
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

/** Under the lock: appends the fact, then brings the index up to date (and rotates a history
 * file that grew past its bound). A full disk that stops the append is an error (the fact is not
 * recorded: exit 74); one that only stops the index is a warning (the index is rebuilt later). */
async function recordFact(project: Project, id: string, line: string, warn: Warn): Promise<RoutineStateFile> {
  return withStateLock(project, async () => {
    const file = historyPath(project.stateDir, id);
    appendHistoryLine(file, line);
    const { state } = readRoutineStateChecked(project, warn, 'write');
    const src = state.sources?.[id];
    if (src && src.size > TRIM_AT_BYTES) {
      try {
        rotateHistory(file, state.routines[id]!, src.recent, new Date().toISOString());
        const st = lstatQuiet(file);
        if (st) state.sources![id] = { ino: st.ino, size: st.size, recent: src.recent, tail: tailOf(file, st.size) };
      } catch (err) {
        warn(`could not rotate ${file}: ${(err as Error).message}`);
      }
    }
    try {
      writeJsonDurable(statePath(project), state, { cleanTemps: true });
    } catch (err) {
      warn(`${(err as Error).message}; the fact is recorded in ${file} and the index is rebuilt from it later`);
    }
    return state;
  });
}

export async function recordFire(project: Project, routineId: string, fire: Fire, warn: Warn = () => {}): Promise<void> {
  await recordFact(project, routineId, fireLine(fire), warn);
}

/** The open marker is a fact appended on its own (one O_APPEND write, no lock: appends never
 * interleave within a line); the index learns of it from the history at the next read or write. */
export async function openFire(project: Project, routineId: string, open: OpenFire, _warn: Warn = () => {}): Promise<void> {
  trustRoot(project.stateDir);
  ensureStateRoot(project.stateDir);
  appendHistoryLine(historyPath(project.stateDir, routineId), openLine(open));
}

/** Closes every open fire whose process is gone, as a failure: its outcome was lost. */
export async function reconcileOpenFires(project: Project, isGone: (owner: OpenFire['owner'], open: OpenFire) => boolean, now: Date, warn: Warn = () => {}): Promise<number> {
  const state = readRoutineState(project, warn);
  let closed = 0;
  for (const [id, record] of Object.entries(state.routines)) {
    for (const open of record.open_fires ?? []) {
      if (!isGone(open.owner, open)) continue;
      await recordFire(project, id, interruptedFire(open, now), warn);
      closed++;
    }
  }
  return closed;
}

/** Pauses or resumes. Pausing again without a note keeps the note given first. */
export async function pauseRoutine(project: Project, routineId: string, paused: boolean, note: string | null, warn: Warn = () => {}): Promise<PauseChange> {
  const before = readRoutineState(project, warn).routines[routineId];
  const wasPaused = before?.paused === true;
  const keptNote = paused ? (note ?? (wasPaused ? (before?.paused_note ?? null) : null)) : null;
  await recordFact(project, routineId, pauseLine(paused, keptNote, new Date().toISOString()), warn);
  return { wasPaused, note: keptNote };
}

/** Every fire in the routine's history (the rotated file too), oldest first. */
export function readFires(project: Project, routineId: string, warn: Warn = () => {}): HistoryEntry[] {
  const file = historyPath(project.stateDir, routineId);
  const out: HistoryEntry[] = [];
  const seen = new Set<string>();
  for (const f of [`${file}.1`, file]) {
    const read = readHistoryText(f, 0);
    if (!read) continue;
    const parsed = parseHistory(read.text, checkRec);
    if (parsed.unreadable.length > 0 && f === file) warn(unreadableMessage(f, parsed.unreadable));
    for (const l of parsed.lines) {
      if (l.kind !== 'fire') continue;
      if (l.id) {
        if (seen.has(l.id)) continue;
        seen.add(l.id);
      }
      out.push(l.entry);
    }
  }
  return out.slice(-HISTORY_LIMIT);
}

export function fileRoutineStore(project: Project): RoutineStore {
  return {
    read: async (warn) => readRoutineState(project, warn),
    recordFire: (id, fire, warn) => recordFire(project, id, fire, warn),
    openFire: (id, open, warn) => openFire(project, id, open, warn),
    reconcile: (isGone, now, warn) => reconcileOpenFires(project, isGone, now, warn),
    setPaused: (id, paused, note) => pauseRoutine(project, id, paused, note),
    history: async (id, warn) => readFires(project, id, warn),
    // one scheduler per project (the `scheduler` lock): every tick is ours
    claimTick: async () => true,
    releaseClaim: async () => false,
  };
}
