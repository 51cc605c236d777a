// A routine's own index, `history/<id>.index` (SPEC §3): its record folded from its history, with
// where the fold stopped (inode, size, modification time, last bytes) and the ids of the newest
// lines. It is a cache of the history: lost, stale or garbled, it only makes the next reader fold
// a few more lines. Whoever records a fact of the routine rewrites it (file-store.ts; a running
// scheduler once its history has grown 16 KiB past it).
// (Over 300 lines: the index's format and checks, and the fold that judges a history against it,
// grown, rotated or cut in place, belong together.)

import type { Stats } from 'node:fs';
import { childPath } from '../fs/names.js';
import type { Project } from '../config/load.js';
import { checkFolder, readFileChecked, trustRoot } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { historyPath, parseHistory, readHistoryBytes, readHistoryText, unheard, warnUnreadable } from './history.js';
import { writeChecksummed } from '../fs/durable.js';
import { readChecksummed } from '../checksum.js';
import { checkRecord, foldLines, type Folded, type RoutineRecord } from './routine-state.js';
import type { Warn } from './store.js';
import { isObj } from '../is-object.js';

export function indexPath(project: Project, routineId: string): string {
  return `${historyPath(project.stateDir, routineId).slice(0, -'.jsonl'.length)}.index`;
}

/** Where a fold of a history file stopped: the file (inode), its size and modification time
 * then (a file rewritten to the same size is folded again). */
export interface FoldedAt {
  ino: number;
  size: number;
  mtime: number;
}

export const unmoved = (at: FoldedAt, st: { ino: number; size: number; mtimeMs: number }): boolean =>
  at.ino === st.ino && at.size === st.size && at.mtime === st.mtimeMs;

/** A routine's own index: its record and the bookkeeping to fold on from where it stopped. */
export interface RoutineIndex extends FoldedAt {
  record: RoutineRecord;
  /** The last up to 64 bytes folded (base64): the file must still have them where they were. */
  tail: string;
  /** Ids of the newest lines folded (a line re-appended across a rotation counts once). */
  recent: string[];
  /** The first up to 64 bytes of the file (base64): a file that no longer starts with them was
   * cut or overwritten in place, not grown. Absent in indexes written before it was kept. */
  head?: string;
}

/** A record of the routine kept outside its index (routine-state.json's, which a running scheduler
 * keeps current) and where in the history it was folded to; asked only of a history cut in place,
 * by callers that can read it (this module cannot import state-file.ts, which imports it). */
export type KeptElsewhere = () => { record: RoutineRecord; at: FoldedAt } | null;

export const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

function checkIndex(v: unknown): RoutineIndex | string {
  if (!isObj(v) || v.version !== 1) return 'not a routine index';
  const record = checkRecord(v.record);
  if (
    !record ||
    !isCount(v.ino) ||
    !isCount(v.size) ||
    !Number.isFinite(v.mtime) ||
    typeof v.tail !== 'string' ||
    !Array.isArray(v.recent)
  )
    return 'not a routine index';
  return {
    record,
    ino: v.ino,
    size: v.size,
    mtime: v.mtime as number,
    tail: v.tail,
    recent: v.recent.filter((x): x is string => typeof x === 'string').slice(-64),
    ...(typeof v.head === 'string' ? { head: v.head } : {}),
  };
}

/** The routine's record as its history holds it: from `base` (its index) when the file is still
 * the one folded to that point, folded on from there when it only grew, else folded whole. null
 * when it has no history file. */
function foldHistory(
  project: Project,
  id: string,
  base: RoutineIndex | null,
  warn: Warn,
  seen?: Stats | null,
  newest: RoutineIndex | null = base,
  elsewhere?: KeptElsewhere,
): RoutineIndex | null {
  const file = historyPath(project.stateDir, id);
  const st = seen === undefined ? lstatQuiet(file) : seen;
  if (!st) return null;
  if (!st.isFile()) {
    // never read through (a FIFO would hang, a link leads elsewhere), never taken as "never ran":
    // the record last folded of it (its index), said so
    const what = st.isFIFO() ? 'a FIFO' : st.isSymbolicLink() ? 'a symbolic link' : 'not a regular file';
    const known = newest ?? base;
    warnOnce(
      `${file}\0${st.ino}\0kind`,
      `${file} is ${what}, not read; ${known ? `${id} is shown as last recorded before it (its index)` : `nothing is known of ${id}'s fires`}`,
      warn,
    );
    return known;
  }
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
  const continued = from !== undefined;
  if (!read) {
    const whole = readHistoryBytes(file, 0);
    if (!whole) return null;
    read = { ...whole, start: 0 };
  }
  const parsed = parseHistory(read.bytes.toString('utf8'), checkRecord);
  if (parsed.unreadable.length > 0)
    warnUnreadable(
      warn,
      file,
      read.ino,
      continued ? lineNumbers(file, base!.size, parsed.unreadable) : parsed.unreadable,
    );
  let prior = continued ? null : (newest ?? base);
  // the record kept elsewhere, when folded further in the same file (a cut it was folded past)
  const other = prior && elsewhere?.();
  if (prior && other && other.at.ino === prior.ino && other.at.size > prior.size)
    prior = { ...prior, record: other.record, size: other.at.size };
  if (prior && cutInPlace(prior, read, parsed.lines)) {
    // folded on top of the newest record known of it, as a removed file goes on from it: never
    // a routine reset to "never run", a paused one resumed, a failing streak hidden
    const { record } = prior;
    from = { record, recent: prior.recent };
    warnOnce(
      `${file}\0${read.ino}\0${read.size}`,
      `${file} was cut or overwritten (it no longer holds what was folded from it): its routine goes on from the record kept of it (${record.counts.success} succeeded, ${record.counts.failure} failed, ${record.counts.skipped} skipped)`,
      warn,
    );
  }
  const folded = foldLines(parsed.lines, from);
  return {
    record: folded.record,
    recent: folded.recent,
    ino: read.ino,
    size: read.size,
    mtime: read.mtimeMs,
    tail: tailOf(file, read),
    // (an index from before heads were kept gets one at the next whole read)
    ...(read.start === 0 ? { head: headOf(read.bytes) } : base?.head !== undefined ? { head: base.head } : {}),
  };
}

/** The first up to 64 bytes of the file (base64). */
const headOf = (bytes: Buffer): string => bytes.subarray(0, 64).toString('base64');
const startsWith = (bytes: Buffer, head: string): boolean => {
  const h = Buffer.from(head, 'base64');
  return bytes.subarray(0, h.length).equals(h);
};

/** Whether the file folded before (`prior`, of the same inode) was cut or overwritten in place
 * (`: > file`, NULs after a crash of a file system that does not journal data), not grown, not
 * rotated (a rotation's file starts with the record so far, as a summary) and not edited by hand
 * (the lines left keep their ids): shorter than what was folded or starting with a NUL, no longer
 * starting as it did, and holding none of the newest lines folded. */
function cutInPlace(
  prior: RoutineIndex,
  read: { bytes: Buffer; ino: number; size: number },
  lines: readonly { id?: string | null }[],
): boolean {
  if (prior.head === undefined || prior.ino !== read.ino) return false;
  if (!(read.size < prior.size || read.bytes[0] === 0)) return false;
  if (startsWithSummary(read.bytes) || startsWith(read.bytes, prior.head)) return false;
  const recent = new Set(prior.recent);
  return !lines.some((l) => l.id && recent.has(l.id));
}

const SUMMARY_START = Buffer.from('{"event":"summary"');
const startsWithSummary = (bytes: Buffer): boolean => bytes.subarray(0, SUMMARY_START.length).equals(SUMMARY_START);

/** What this process said of a cut history file (the file, its identity and size), once — one
 * set for the process, though the CLI's start-up bundle and its full one each hold this module
 * (a `routine list` the cache could not answer reads the state twice). */
const SAID = Symbol.for('routinely.history-warnings');
const said: Set<string> = ((globalThis as Record<symbol, unknown>)[SAID] ??= new Set<string>()) as Set<string>;
function warnOnce(key: string, message: string, warn: Warn): void {
  if (said.has(key)) return;
  said.add(key);
  warn(message);
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

/** The routine's index file as written (null: none, or not readable). */
export function readIndex(project: Project, id: string): RoutineIndex | null {
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
export function readRoutineIndexed(
  project: Project,
  id: string,
  warn: Warn,
  cache?: IndexCache,
  elsewhere?: KeptElsewhere,
): RoutineIndex | null {
  const cached = cache?.get(id);
  // the look at the file that judged the cached base is the fold's look too (a base read from
  // the index file instead is judged by a look after that read)
  const st = cached ? lstatQuiet(historyPath(project.stateDir, id)) : undefined;
  const base = cached && st && st.ino === cached.ino && st.size >= cached.size ? cached : null;
  const index = base ? null : readIndex(project, id);
  const folded = base
    ? foldHistory(project, id, base, warn, st, base, elsewhere)
    : foldHistory(project, id, index, warn, undefined, newerOf(cached, index), elsewhere);
  if (cache) {
    if (folded) cache.set(id, folded);
    // a history removed by hand: its newest fold is kept, for the next fact to go on from while
    // its index is there (file-store.ts appendFact)
    else if (!cached || lstatQuiet(historyPath(project.stateDir, id)) !== null) cache.delete(id);
  }
  return folded;
}

/** Of two folds of a routine's history, the newer: the later one of the same file, else the
 * index (a fold of another file — before a rotation — is no newer than what the index says). */
export function newerOf(cached: RoutineIndex | undefined, index: RoutineIndex | null): RoutineIndex | null {
  if (!cached) return index;
  if (!index) return cached;
  return cached.ino === index.ino && cached.size >= index.size ? cached : index;
}

export function checkFolders(project: Project): void {
  trustRoot(project.stateDir);
  checkFolder(project.stateDir);
  checkFolder(childPath(project.stateDir, 'history'));
}

/** The state folder, once it and its history folder are checked as every writer checks them
 * (never through a symlink, ours alone): what a reader of the history files starts from. */
export function checkedStateDir(project: Project): string {
  checkFolders(project);
  return project.stateDir;
}

/** One routine's record as the history holds it; undefined when it has none. */
export function readRoutine(
  project: Project,
  id: string,
  warn: Warn = unheard,
  cache?: IndexCache,
  elsewhere?: KeptElsewhere,
): RoutineRecord | undefined {
  checkFolders(project);
  return readRoutineIndexed(project, id, warn, cache, elsewhere)?.record;
}

/** Where a long-running writer (the scheduler) last wrote each routine's index: it rewrites one
 * once the routine's history has grown INDEX_LAG_BYTES past it, not after every fact. The index
 * is a cache of the history (a reader folds at most that much more of it), and readers first
 * use routine-state.json, which a running scheduler keeps current (state-file.ts). */
export type IndexWrites = Map<string, { ino: number; size: number }>;
const INDEX_LAG_BYTES = 16 * 1024;

/** Whether the index written at `last` may stay behind the fold `folded` a while yet. */
export function indexLags(folded: RoutineIndex, last: { ino: number; size: number } | undefined): boolean {
  // (a file that shrank on the same inode was rotated and its inode number reused: written)
  return (
    last !== undefined &&
    last.ino === folded.ino &&
    folded.size >= last.size &&
    folded.size - last.size < INDEX_LAG_BYTES
  );
}

export function writeIndex(project: Project, id: string, folded: RoutineIndex, warn: Warn, writes?: IndexWrites): void {
  try {
    // a cache of the history, rewritten in place with a checksum: a torn one reads as missing,
    // and is rebuilt from the history
    writeChecksummed(indexPath(project, id), JSON.stringify({ version: 1, ...folded }));
    writes?.set(id, { ino: folded.ino, size: folded.size });
  } catch (err) {
    warn(
      `${(err as Error).message}; the fact is recorded in ${historyPath(project.stateDir, id)} and the index is rebuilt from it later`,
    );
  }
}

/** A long-running writer going away: the indexes it left behind its histories are written. */
export function writeLaggingIndexes(project: Project, cache: IndexCache, writes: IndexWrites, warn: Warn): void {
  for (const [id, last] of writes) {
    const folded = cache.get(id);
    if (folded && (folded.ino !== last.ino || folded.size !== last.size)) writeIndex(project, id, folded, warn, writes);
  }
}
