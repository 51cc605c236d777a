// Routine state in files (SPEC §3, §6). The history files hold the facts (every fire, pause,
// resume and open marker, one O_APPEND write each); two indexes on top, `history/<id>.index`
// (routine-index.ts) and routine-state.json (state-file.ts), may be lost, stale or garbled without
// losing anything. No reader shows less than the history holds, and a fire costs the same with 1
// or 1 000 routines (docs/design.md "Routine state in files").
// (Over 300 lines: every fact's append, its index and the reconcile of open fires share the
// routine's history file and its one writer's cache.)

import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { StateIOError, stateWriteError } from '../errors.js';
import { acquireFileLease } from '../file-lock/wait.js';
import { checkFolder, linkNew, trustRoot, unlinkQuiet, writeNewFile } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { randomHex } from '../fs/random-ids.js';
import {
  historyTrimBytes,
  appendHistoryLine,
  fireLine,
  historyPath,
  openLine,
  pauseLine,
  readFireEntries,
  rotateHistory,
  summaryLine,
  type HistoryEntry,
  unheard,
} from './history.js';
import { removeLeftoverTemps, writeFileDurable } from '../fs/durable.js';
import { keepMarksBetweenAppends, parkAllHeldMarks } from './history-stamp.js';
import { ensureStateRoot } from './json-file.js';
import { processGone } from '../process/identity.js';
import { phasesPath, readPhasesFile } from './phases.js';
import { checkRecord, interruptedFire, type Fire, type OpenFire, type RoutineRecord } from './routine-state.js';
import type { PauseChange, RoutineStore, Warn } from './store.js';
import { recentFiresInFiles } from './recent-fires.js';
import {
  checkedStateDir,
  indexLags,
  newerOf,
  readRoutine,
  readIndex,
  readRoutineIndexed,
  writeIndex,
  writeLaggingIndexes,
  type IndexCache,
  type IndexWrites,
  type RoutineIndex,
} from './routine-index.js';
import { readRoutineState, recordOnFile, StatePublisher } from './state-file.js';

export { indexPath, readRoutine, type IndexCache } from './routine-index.js';
export { publishRoutineState, readRoutineState, readRoutineStateShown, statePath } from './state-file.js';

/** After a fact was appended: brings the routine's own index up to date (rotating a history
 * file that grew past its bound). The fact is safe in the history already: an index that cannot
 * be written is only a warning (it is rebuilt from the history by the next reader). */
async function indexAfterAppend(
  project: Project,
  id: string,
  warn: Warn,
  cache?: IndexCache,
  writes?: IndexWrites,
): Promise<RoutineIndex | null> {
  let folded = readRoutineIndexed(project, id, warn, cache, () => recordOnFile(project, id));
  if (folded && folded.size > historyTrimBytes(project.config.retention.historyLines)) {
    folded = await rotate(project, id, warn);
    if (cache && folded) cache.set(id, folded);
  }
  if (!folded) return null;
  if (!indexLags(folded, writes?.get(id))) writeIndex(project, id, folded, warn, writes);
  return folded;
}

/** How old a temp beside a history file is before a rotation removes it as a killed writer's. */
const LEFTOVER_AGE_MS = 60_000;

/** Rotates the routine's history file (history.ts), one rotator at a time: a per-routine lock
 * taken only for this, once per about a thousand lines. */
async function rotate(project: Project, id: string, warn: Warn): Promise<RoutineIndex | null> {
  const got = await acquireFileLease({
    lockDir: project.lockDir,
    // (a lock key holds no "..": `a..b`, a valid routine id, is `history-a__b`; routines whose
    // ids differ only there share a rotation lock, which orders their rotations, nothing more)
    key: `history-${id.replace(/\.\./g, '__')}`,
    ttlMs: Math.min(30_000, project.lockTtlMs),
    refreshMs: Math.min(10_000, project.lockRefreshMs),
    owner: { command: 'history rotation', routine: id },
    ifBusy: 'wait',
    waitTimeoutMs: 30_000,
  });
  if (!got.ok) throw new StateIOError(`cannot rotate ${historyPath(project.stateDir, id)}: its lock is ${got.why}`);
  try {
    const folded = readRoutineIndexed(project, id, warn);
    if (!folded || folded.size <= historyTrimBytes(project.config.retention.historyLines)) return folded; // another writer rotated it
    const file = historyPath(project.stateDir, id);
    try {
      rotateHistory(file, folded.record, folded.recent, new Date().toISOString());
      // temps of writers killed between writing and placing them (a re-seed of a removed
      // history, an earlier rotation): nothing else ever collects them
      for (const name of [file, `${file}.1`]) removeLeftoverTemps(name, LEFTOVER_AGE_MS);
    } catch (err) {
      warn(`could not rotate ${file}: ${(err as Error).message}`);
      return folded;
    }
    return readRoutineIndexed(project, id, warn);
  } finally {
    await got.lease.release();
  }
}

/** The state folder checked (made if missing) before a history append (which checks its own). */
function beforeAppend(project: Project): void {
  trustRoot(project.stateDir);
  if (!checkFolder(project.stateDir)) ensureStateRoot(project.stateDir);
}

/** Appends a fact to the routine's history. A history file removed (by hand) while its index
 * is left starts again from the record the index keeps (a summary line, as a rotation writes):
 * the routine's counts and last result go on from there, as every view showed them meanwhile
 * (state-file.ts), instead of from zero. A new routine (no index either) starts empty. */
function appendFact(project: Project, id: string, line: string, warn: Warn, cache?: IndexCache): void {
  beforeAppend(project);
  const path = historyPath(project.stateDir, id);
  if (!lstatQuiet(path)) {
    // while its index is there: from the newest fold of the file known (this process's own, a
    // scheduler's, is ahead of the index it writes only every 16 KiB); the index gone too, the
    // routine starts again (docs/state.md)
    const index = readIndex(project, id);
    let kept = index ? newerOf(cache?.get(id), index) : null;
    // a command beside a scheduler, or after a SIGKILLed one: routine-state.json, which the
    // scheduler keeps current, may be further on in the same file than the index it rewrites
    // only every 16 KiB
    if (kept && !cache?.has(id)) {
      const onFile = recordOnFile(project, id);
      if (onFile && onFile.at.ino === kept.ino && onFile.at.size > kept.size) kept = { ...kept, record: onFile.record };
    }
    if (kept) {
      // complete in a file of its own, then linked as the history (link fails if the name is
      // there): a writer appending at the same moment never meets an empty file, and its line is
      // never overwritten
      const temp = `${path}.tmp-${randomHex(8)}`;
      try {
        writeNewFile(temp, `${summaryLine(kept.record, kept.recent, new Date().toISOString())}\n`);
        if (linkNew(temp, path))
          warn(
            `${path} was gone (removed?): started again from the record its index kept (${countsText(kept.record)})`,
          );
        // else another writer started it first: its lines are the history
      } catch (err) {
        // anything else fails the append below the same way, and is said there
        warn(`could not start ${path} from its index: ${(err as Error).message}`);
      } finally {
        unlinkQuiet(temp);
      }
    }
  }
  appendHistoryLine(path, line);
}

/** `3 succeeded, 1 failed, 0 skipped` */
function countsText(r: RoutineRecord): string {
  return `${r.counts.success} succeeded, ${r.counts.failure} failed, ${r.counts.skipped} skipped`;
}

/** Appends the fact, then brings the routine's index up to date. A full disk that stops the
 * append is an error (the fact is not recorded: exit 74). */
async function recordFact(
  project: Project,
  id: string,
  line: string,
  warn: Warn,
  cache?: IndexCache,
  writes?: IndexWrites,
): Promise<RoutineIndex | null> {
  appendFact(project, id, line, warn, cache);
  return indexAfterAppend(project, id, warn, cache, writes);
}

export async function recordFire(
  project: Project,
  routineId: string,
  fire: Fire,
  warn: Warn = unheard,
  cache?: IndexCache,
  writes?: IndexWrites,
): Promise<void> {
  // the record as last folded (the index when this process keeps no fold: it may lag a fire or
  // two, which is all the same for a clock that stepped back)
  const prior = (cache?.get(routineId) ?? readIndex(project, routineId))?.record;
  await recordFact(project, routineId, fireLine(fire, {}, Date.now(), prior), warn, cache, writes);
}

/** The open marker is a fact appended on its own (one O_APPEND write: appends never interleave
 * within a line); readers learn of it from the history. */
export async function openFire(
  project: Project,
  routineId: string,
  open: OpenFire,
  warn: Warn = unheard,
  cache?: IndexCache,
): Promise<void> {
  appendFact(project, routineId, openLine(open), warn, cache);
}

/** Closes every open fire whose process is gone, as a failure: its outcome was lost. */
export async function reconcileOpenFires(
  project: Project,
  isGone: (owner: OpenFire['owner'], open: OpenFire, routineId: string) => boolean,
  warn: Warn = unheard,
  recorded: (id: string, fire: Fire, prior: RoutineRecord | undefined) => void = () => {},
): Promise<number> {
  const state = readRoutineState(project, warn);
  let closed = 0;
  for (const [id, record] of Object.entries(state.routines)) {
    for (const open of record.open_fires ?? []) {
      if (!isGone(open.owner, open, id)) continue;
      // `state` may predate the owner's own record (it closed the fire and ended since); judged
      // gone, it appends nothing more: still open now means its outcome is lost
      const before = readRoutine(project, id, warn, undefined, () => recordOnFile(project, id));
      if (!before?.open_fires?.some((o) => o.id === open.id)) continue;
      // keyed: of two processes reconciling it at once, both append, the fold counts the first
      // line, and only the process whose line that is counts and announces the fire
      const fire: Fire = { ...interruptedFire(open), key: randomHex(8) };
      await recordFire(project, id, fire, warn);
      if (readFires(project, id, () => {}).find((e) => e.closes === open.id)?.key !== fire.key) continue;
      recorded(id, fire, before);
      closed++;
    }
  }
  return closed;
}

/** Pauses or resumes. Pausing again without a note keeps the note given first. */
export async function pauseRoutine(
  project: Project,
  routineId: string,
  paused: boolean,
  note: string | null,
  warn: Warn = unheard,
): Promise<PauseChange> {
  const before = readRoutine(project, routineId, warn, undefined, () => recordOnFile(project, routineId));
  const wasPaused = before?.paused === true;
  const keptNote = paused ? (note ?? (wasPaused ? (before?.paused_note ?? null) : null)) : null;
  await recordFact(project, routineId, pauseLine(paused, keptNote, new Date().toISOString()), warn);
  return { wasPaused, note: keptNote };
}

/** The routine's newest `retention.historyLines` fires (from the rotated file too), oldest first. */
export function readFires(project: Project, routineId: string, warn: Warn = unheard): HistoryEntry[] {
  return readFireEntries(
    historyPath(checkedStateDir(project), routineId),
    project.config.retention.historyLines,
    checkRecord,
    warn,
  );
}

/** Creates a file with a byte of data in the history folder and in the lock folder, and removes
 * it: what every fire needs (a new lock slot, an appended line) in the smallest form. Throws the
 * error. (The lock folder may be elsewhere, ROUTINELY_LOCK_DIR: one that is read-only while the
 * history is not held the fires all the same, and a probe of the history alone let them go on
 * each second, to be held again at the next.) */
export function probeWritable(project: Project): void {
  const dir = join(project.stateDir, 'history');
  ensureStateRoot(project.stateDir);
  checkFolder(dir); // still the folder checked at start (a replaced one is refused)
  for (const folder of [dir, project.lockDir]) {
    const path = join(folder, `.probe-${process.pid}-${randomHex(4)}`);
    try {
      writeNewFile(path, '\n');
    } catch (err) {
      throw stateWriteError(err, folder, 'creating a file in');
    } finally {
      unlinkQuiet(path);
    }
  }
}

export interface FileStoreOptions {
  /** Where background work says what went wrong (a rewrite of routine-state.json that failed). */
  warn?: Warn;
  /** A long-running process (the scheduler): the one writer of routine-state.json while it runs
   * (StatePublisher.holdWhileRunning), which also checks it against every history once a minute. */
  longRunning?: boolean;
  /** How long after its last append a long-running store parks its history mark (2 s). */
  parkMarksAfterMs?: number;
}

/** How often a long-running store checks routine-state.json against every history. */
const SWEEP_EVERY_MS = 60_000;

export function fileRoutineStore(project: Project, opts: FileStoreOptions = {}): RoutineStore {
  const cache: IndexCache = new Map();
  const warnStore = opts.warn ?? ((m: string) => process.stderr.write(`routinely: warning: ${m}\n`));
  const publisher = new StatePublisher({ project, cache, warn: warnStore });
  const writes: IndexWrites | undefined = opts.longRunning ? new Map() : undefined;
  if (opts.longRunning) {
    publisher.sweepEvery(SWEEP_EVERY_MS);
    publisher.holdWhileRunning();
  }
  // a fire appends twice: its history mark stays named from one append to the next, and is
  // parked before a rewrite stamps the history folder, and at the end (history-stamp.ts)
  const stopKeeping = opts.longRunning ? keepMarksBetweenAppends(opts.parkMarksAfterMs) : null;
  return {
    read: async (warn) => readRoutineState(project, warn),
    readOne: async (id, warn) => readRoutine(project, id, warn, cache, () => recordOnFile(project, id)),
    publish: async () => {
      await publisher.sync();
    },
    close: async () => {
      if (stopKeeping) {
        stopKeeping();
        parkAllHeldMarks();
      }
      await publisher.close();
      if (writes) writeLaggingIndexes(project, cache, writes, warnStore);
    },
    probeWritable: () => probeWritable(project),
    recordFire: async (id, fire, warn, opts) => {
      // Sent again (a retry after a write that failed part-way, a spooled record): stored once.
      // The history holds the facts; a line that closes the same open fire, or carries the same
      // key, is this record already (the RoutineStore contract, as the database store keeps it).
      if (opts?.again && (fire.closes || fire.key)) {
        // (what the file holds was said by the attempt before: no warning per retry)
        const seen = readFires(project, id, () => {}).some(
          (e) => (fire.closes && e.closes === fire.closes) || (fire.key && e.key === fire.key),
        );
        if (seen) return;
      }
      // A live record of a fire another process recorded first (a stalled holder's, after a
      // reclaimer recorded it interrupted): the fold keeps that first record, so this one is
      // none, and is neither appended nor counted and announced by its process, as the database
      // refuses it. Only on that evidence: while its marker is open in the fold (the usual
      // case: no history read), or when the marker is gone with no line closing it (a rotation,
      // a history removed by hand), it is appended.
      if (fire.closes && !opts?.again) {
        const now = readRoutineIndexed(
          project,
          id,
          () => {},
          cache,
          () => recordOnFile(project, id),
        );
        if (
          !now?.record.open_fires?.some((o) => o.id === fire.closes) &&
          readFires(project, id, () => {}).some((e) => e.closes === fire.closes)
        )
          return { notRecorded: true };
      }
      try {
        await recordFire(project, id, fire, warn, cache, writes);
      } finally {
        // an append that failed may have left part of a line: the file shows what there is
        publisher.touched(id);
      }
    },
    openFire: async (id, open, warn) => {
      await openFire(project, id, open, warn, cache);
      publisher.touched(id);
    },
    reconcile: (isGone, warn, recorded) =>
      reconcileOpenFires(project, isGone, warn, (id, fire, prior) => {
        publisher.touched(id);
        recorded?.(id, fire, prior);
      }),
    setPaused: async (id, paused, note) => {
      const change = await pauseRoutine(project, id, paused, note);
      publisher.touched(id);
      return change;
    },
    history: async (id, warn) => readFires(project, id, warn),
    recentFires: async (ids, q, warn) =>
      recentFiresInFiles(checkedStateDir(project), ids, q, project.config.retention.historyLines, warn),
    // one scheduler per project (the `scheduler` lock): every tick is ours
    sharedTicks: false,
    claimTick: async () => true,
    releaseClaim: async () => false,
    // one scheduler per project: one board, <stateDir>/phases.json, a view of a moment (not
    // fsynced); read only while the process that wrote it lives
    writePhases: async (board) => {
      writeFileDurable(phasesPath(project), JSON.stringify(board), { sync: false, cleanTemps: true });
    },
    readPhases: async (warn) => {
      const board = readPhasesFile(project, warn);
      return board && !processGone(board.owner) ? [board] : [];
    },
  };
}
