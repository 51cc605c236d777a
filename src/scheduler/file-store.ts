// Routine state in files (SPEC §3, §6). The history files hold the facts — every fire, every
// pause and resume, every open marker — appended with one O_APPEND write each. Two indexes sit
// on top, and both may be lost, stale or garbled at any moment without losing anything:
// - `history/<id>.index`, one per routine: its record folded from its history, with where
//   the fold stopped (inode, size, last bytes) and the ids of the newest lines. Whoever records a
//   fact of the routine rewrites it (atomically; no lock: a writer that puts back an older copy
//   only makes the next reader fold a few more lines).
// - `routine-state.json`: every routine's record and where each was folded to, rewritten now
//   and then by the scheduler (coalesced), never per fire.
// Readers take a routine's record from routine-state.json when its history file is still the
// size it was folded at, else from its own index, folded forward from its history — so no reader
// ever shows less than the history holds, and a fire costs the same with 1 or 1 000 routines
// (SPEC §3 "The cost of a fire does not grow with the project").
// (Over 300 lines: one store, the RoutineStore contract for files — history, both indexes, open
// markers and their reconciliation — whose parts share the folder's locking.)

import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { StateIOError, stateWriteError } from '../errors.js';
import { acquireFileLease } from '../lock/wait.js';
import { checkFolder, lstatQuiet, randomHex, readFileChecked, trustRoot, unlinkQuiet, writeNewFile } from '../fs/files.js';
import {
  historyTrimBytes,
  appendHistoryLine,
  fireLine,
  historyIds,
  historyPath,
  openLine,
  parseHistory,
  pauseLine,
  readFireEntries,
  readHistoryBytes,
  readHistoryText,
  rotateHistory,
  unreadableMessage,
  type HistoryEntry,
} from '../state/history.js';
import { readChecksummed } from '../checksum.js';
import { writeChecksummed } from '../state/durable.js';
import { corruptMessage, ensureStateRoot, readJsonState, writeJsonDurable } from '../state/json-file.js';
import { checkRecord, foldLines, interruptedFire, type Fire, type Folded, type OpenFire, type RoutineRecord, type RoutineStateFile } from '../state/routine-state.js';
import type { PauseChange, RoutineStore, Warn } from './store.js';
import { recentFiresInFiles } from './recent-fires.js';

export function statePath(project: Project): string {
  return join(project.stateDir, 'routine-state.json');
}

export function indexPath(project: Project, routineId: string): string {
  return `${historyPath(project.stateDir, routineId).slice(0, -'.jsonl'.length)}.index`;
}

const checkRec = (v: unknown) => checkRecord(v);

/** Where a fold of a history file stopped: the file (inode), its size and modification time
 * then (a file rewritten to the same size is folded again). */
interface FoldedAt {
  ino: number;
  size: number;
  mtime: number;
}

const unmoved = (at: FoldedAt, st: { ino: number; size: number; mtimeMs: number }): boolean => at.ino === st.ino && at.size === st.size && at.mtime === st.mtimeMs;

/** A routine's own index: its record and the bookkeeping to fold on from where it stopped. */
interface RoutineIndex extends FoldedAt {
  record: RoutineRecord;
  /** The last up to 64 bytes folded (base64): the file must still have them where they were. */
  tail: string;
  /** Ids of the newest lines folded (a line re-appended across a rotation counts once). */
  recent: string[];
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

function checkIndex(v: unknown): RoutineIndex | string {
  if (!isObj(v) || v.version !== 1) return 'not a routine index';
  const record = checkRecord(v.record);
  if (!record || !isCount(v.ino) || !isCount(v.size) || !Number.isFinite(v.mtime) || typeof v.tail !== 'string' || !Array.isArray(v.recent)) return 'not a routine index';
  return { record, ino: v.ino, size: v.size, mtime: v.mtime as number, tail: v.tail, recent: v.recent.filter((x): x is string => typeof x === 'string').slice(-64) };
}

/** routine-state.json: the records, and where each routine's history was folded to. */
interface StateFile {
  routines: Record<string, RoutineRecord>;
  at: Record<string, FoldedAt>;
}

function checkStateFile(v: unknown): StateFile | string {
  if (!isObj(v)) return 'not an object';
  if (v.version !== 1) return `unknown version ${JSON.stringify(v.version)}`;
  if (!isObj(v.routines)) return 'no "routines" object';
  const routines: Record<string, RoutineRecord> = {};
  for (const [id, rec] of Object.entries(v.routines)) {
    const checked = checkRecord(rec);
    if (!checked) return `routines.${id} is not an object`;
    routines[id] = checked;
  }
  const at: Record<string, FoldedAt> = {};
  if (isObj(v.history_at)) {
    for (const [id, pos] of Object.entries(v.history_at)) {
      if (Array.isArray(pos) && isCount(pos[0]) && isCount(pos[1]) && Number.isFinite(pos[2])) at[id] = { ino: pos[0], size: pos[1], mtime: pos[2] };
    }
  }
  return { routines, at };
}

/** The routine's record as its history holds it: from `base` (its index) when the file is still
 * the one folded to that point, folded on from there when it only grew, else folded whole. null
 * when it has no history file. */
function foldHistory(project: Project, id: string, base: RoutineIndex | null, warn: Warn): RoutineIndex | null {
  const file = historyPath(project.stateDir, id);
  const st = lstatQuiet(file);
  if (!st || !st.isFile()) return null;
  if (base && unmoved(base, st)) return base;
  // the bytes from `start` to the end, folded on top of `from`
  let read: { bytes: Buffer; start: number; ino: number; size: number; mtimeMs: number } | null = null;
  let from: Folded | undefined;
  if (base && base.ino === st.ino && base.size < st.size) {
    const tail = Buffer.from(base.tail, 'base64');
    const start = Math.max(0, base.size - tail.length);
    const bytes = readHistoryBytes(file, start);
    if (bytes && bytes.bytes.subarray(0, tail.length).equals(tail)) {
      read = { ...bytes, bytes: bytes.bytes.subarray(tail.length), start: base.size };
      from = { record: base.record, recent: base.recent };
    }
  }
  if (!read) {
    const whole = readHistoryBytes(file, 0);
    if (!whole) return null;
    read = { ...whole, start: 0 };
  }
  const parsed = parseHistory(read.bytes.toString('utf8'), checkRec);
  if (parsed.unreadable.length > 0) warn(unreadableMessage(file, from ? lineNumbers(file, base!.size, parsed.unreadable) : parsed.unreadable));
  const folded = foldLines(parsed.lines, from);
  return { record: folded.record, recent: folded.recent, ino: read.ino, size: read.size, mtime: read.mtimeMs, tail: tailOf(file, read) };
}

/** The last up to 64 bytes of the file as read (base64): from the bytes in hand when they
 * reach back that far, else read again. */
function tailOf(file: string, read: { bytes: Buffer; start: number; size: number }): string {
  const want = Math.min(64, read.size);
  if (read.size - read.start >= want) return read.bytes.subarray(read.bytes.length - want).toString('base64');
  const again = readHistoryBytes(file, read.size - want);
  return again ? again.bytes.subarray(0, want).toString('base64') : '';
}

/** Line numbers in the whole file of lines numbered from `offset`. */
function lineNumbers(file: string, offset: number, relative: number[]): number[] {
  const head = readHistoryText(file, 0)?.text.slice(0, offset) ?? '';
  const before = head.split('\n').length - 1;
  return relative.map((n) => n + before);
}

function readIndex(project: Project, id: string): RoutineIndex | null {
  let content;
  try {
    content = readFileChecked(indexPath(project, id), 1024 * 1024);
  } catch {
    return null; // not ours, not a file: rebuilt from the history, and replaced by the next writer
  }
  const text = content && readChecksummed(content.text);
  if (!text) return null;
  try {
    const v = checkIndex(JSON.parse(text));
    return typeof v === 'string' ? null : v;
  } catch {
    return null;
  }
}

/** Indexes this process wrote or read last, per routine: a base to fold on from without reading
 * the index file again (the history decides: a cached index only saves reading, never answers
 * for a file that moved on). */
export type IndexCache = Map<string, RoutineIndex>;

/** One routine's current record (O(1) in the number of routines). */
function readRoutineIndexed(project: Project, id: string, warn: Warn, cache?: IndexCache): RoutineIndex | null {
  const cached = cache?.get(id);
  let base = cached ?? null;
  if (cached) {
    const st = lstatQuiet(historyPath(project.stateDir, id));
    if (!st || st.ino !== cached.ino || st.size < cached.size) base = null;
  }
  const folded = foldHistory(project, id, base ?? readIndex(project, id), warn);
  if (cache) {
    if (folded) cache.set(id, folded);
    else cache.delete(id);
  }
  return folded;
}

function checkFolders(project: Project): void {
  trustRoot(project.stateDir);
  checkFolder(project.stateDir);
  checkFolder(join(project.stateDir, 'history'));
}

/** One routine's record as the history holds it; undefined when it has none. */
export function readRoutine(project: Project, id: string, warn: Warn = () => {}, cache?: IndexCache): RoutineRecord | undefined {
  checkFolders(project);
  return readRoutineIndexed(project, id, warn, cache)?.record;
}

/** Every routine's record: from routine-state.json where a routine's history has not moved since
 * it was written, else from the routine's own index and history. Nothing is written. */
export function readRoutineState(project: Project, warn: Warn = () => {}): RoutineStateFile {
  return readWithPositions(project, warn, false).state;
}

function readWithPositions(project: Project, warn: Warn, moveAside: boolean): { state: RoutineStateFile; at: Record<string, FoldedAt> } {
  checkFolders(project);
  const path = statePath(project);
  const r = readJsonState(path, checkStateFile, { moveAside });
  if (r.kind === 'corrupt') warn(corruptMessage(path, r, 'rebuilt from the history files'));
  const file = r.kind === 'ok' ? r.value : { routines: {}, at: {} };
  const routines = { ...file.routines };
  const at: Record<string, FoldedAt> = {};
  for (const id of historyIds(project.stateDir)) {
    const st = lstatQuiet(historyPath(project.stateDir, id));
    if (!st || !st.isFile()) continue;
    const pos = file.at[id];
    if (pos && unmoved(pos, st) && routines[id]) {
      at[id] = pos;
      continue;
    }
    const folded = readRoutineIndexed(project, id, warn);
    if (!folded) continue;
    routines[id] = folded.record;
    at[id] = { ino: folded.ino, size: folded.size, mtime: folded.mtime };
  }
  return { state: { version: 1, routines }, at };
}

/** Rewrites routine-state.json from the history (the scheduler does, now and then: SPEC §3
 * allows the shared index to be refreshed lazily). A corrupt one is moved aside first. */
export function writeRoutineState(project: Project, warn: Warn = () => {}): number {
  ensureStateRoot(project.stateDir);
  const { state, at } = readWithPositions(project, warn, true);
  const history_at = Object.fromEntries(Object.entries(at).map(([id, p]) => [id, [p.ino, p.size, p.mtime]]));
  writeJsonDurable(statePath(project), { version: 1, routines: state.routines, history_at }, { cleanTemps: true });
  return Object.keys(state.routines).length;
}

/** After a fact was appended: brings the routine's own index up to date (rotating a history
 * file that grew past its bound). The fact is safe in the history already: an index that cannot
 * be written is only a warning (it is rebuilt from the history by the next reader). */
async function indexAfterAppend(project: Project, id: string, warn: Warn, cache?: IndexCache): Promise<RoutineIndex | null> {
  let folded = readRoutineIndexed(project, id, warn, cache);
  if (folded && folded.size > historyTrimBytes(project.config.retention.historyLines)) {
    folded = await rotate(project, id, warn);
    if (cache && folded) cache.set(id, folded);
  }
  if (!folded) return null;
  try {
    // a cache of the history, rewritten in place with a checksum: a torn one reads as missing,
    // and is rebuilt from the history
    writeChecksummed(indexPath(project, id), JSON.stringify({ version: 1, ...folded }));
  } catch (err) {
    warn(`${(err as Error).message}; the fact is recorded in ${historyPath(project.stateDir, id)} and the index is rebuilt from it later`);
  }
  return folded;
}

/** Rotates the routine's history file (history.ts), one rotator at a time: a per-routine lock
 * taken only for this, once per about a thousand lines. */
async function rotate(project: Project, id: string, warn: Warn): Promise<RoutineIndex | null> {
  const got = await acquireFileLease({
    lockDir: project.lockDir,
    key: `history-${id}`,
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
    } catch (err) {
      warn(`could not rotate ${file}: ${(err as Error).message}`);
      return folded;
    }
    return readRoutineIndexed(project, id, warn);
  } finally {
    await got.lease.release();
  }
}

/** Appends the fact, then brings the routine's index up to date. A full disk that stops the
 * append is an error (the fact is not recorded: exit 74). */
async function recordFact(project: Project, id: string, line: string, warn: Warn, cache?: IndexCache): Promise<RoutineIndex | null> {
  checkFolders(project);
  ensureStateRoot(project.stateDir);
  appendHistoryLine(historyPath(project.stateDir, id), line);
  return indexAfterAppend(project, id, warn, cache);
}

export async function recordFire(project: Project, routineId: string, fire: Fire, warn: Warn = () => {}, cache?: IndexCache): Promise<void> {
  await recordFact(project, routineId, fireLine(fire), warn, cache);
}

/** The open marker is a fact appended on its own (one O_APPEND write: appends never interleave
 * within a line); readers learn of it from the history. */
export async function openFire(project: Project, routineId: string, open: OpenFire, _warn: Warn = () => {}): Promise<void> {
  checkFolders(project);
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
      // `state` may predate the owner's own record: it may have closed the fire and ended between
      // the read and the judgement. Judged gone, it appends nothing more: still open now means
      // its outcome is lost.
      if (!readRoutine(project, id, warn)?.open_fires?.some((o) => o.id === open.id)) continue;
      await recordFire(project, id, interruptedFire(open, now), warn);
      closed++;
    }
  }
  return closed;
}

/** Pauses or resumes. Pausing again without a note keeps the note given first. */
export async function pauseRoutine(project: Project, routineId: string, paused: boolean, note: string | null, warn: Warn = () => {}): Promise<PauseChange> {
  const before = readRoutine(project, routineId, warn);
  const wasPaused = before?.paused === true;
  const keptNote = paused ? (note ?? (wasPaused ? (before?.paused_note ?? null) : null)) : null;
  await recordFact(project, routineId, pauseLine(paused, keptNote, new Date().toISOString()), warn);
  return { wasPaused, note: keptNote };
}

/** The routine's newest `retention.historyLines` fires (from the rotated file too), oldest first. */
export function readFires(project: Project, routineId: string, warn: Warn = () => {}): HistoryEntry[] {
  return readFireEntries(historyPath(project.stateDir, routineId), project.config.retention.historyLines, checkRec, warn);
}

/** Creates a file with a byte of data in the history folder, and removes it: what every fire
 * needs (a new lock slot, an appended line) in the smallest form. Throws the error. */
export function probeWritable(project: Project): void {
  const dir = join(project.stateDir, 'history');
  ensureStateRoot(project.stateDir);
  checkFolder(dir); // still the folder checked at start (a replaced one is refused)
  const path = join(dir, `.probe-${process.pid}-${randomHex(4)}`);
  try {
    writeNewFile(path, '\n');
  } catch (err) {
    throw stateWriteError(err, dir, 'creating a file in');
  } finally {
    unlinkQuiet(path);
  }
}

export function fileRoutineStore(project: Project): RoutineStore {
  const cache: IndexCache = new Map();
  return {
    read: async (warn) => readRoutineState(project, warn),
    readOne: async (id, warn) => readRoutine(project, id, warn, cache),
    refreshIndex: async (warn) => writeRoutineState(project, warn),
    probeWritable: () => probeWritable(project),
    recordFire: async (id, fire, warn, opts) => {
      // Sent again (a retry after a write that failed part-way, a spooled record): stored once.
      // The history holds the facts; a line that closes the same open fire, or carries the same
      // key, is this record already (the RoutineStore contract, as the database store keeps it).
      if (opts?.again && (fire.closes || fire.key)) {
        const seen = readFires(project, id, warn).some((e) => (fire.closes && e.closes === fire.closes) || (fire.key && e.key === fire.key));
        if (seen) return;
      }
      await recordFire(project, id, fire, warn, cache);
    },
    openFire: (id, open, warn) => openFire(project, id, open, warn),
    reconcile: (isGone, now, warn) => reconcileOpenFires(project, isGone, now, warn),
    setPaused: (id, paused, note) => pauseRoutine(project, id, paused, note),
    history: async (id, warn) => readFires(project, id, warn),
    recentFires: async (ids, q, warn) => recentFiresInFiles(project.stateDir, ids, q, project.config.retention.historyLines, warn),
    // one scheduler per project (the `scheduler` lock): every tick is ours
    sharedTicks: false,
    claimTick: async () => true,
    releaseClaim: async () => false,
  };
}

