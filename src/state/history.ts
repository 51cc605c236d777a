// `history/<routine-id>.jsonl` (SPEC §3, §6): the facts about a routine, one line each — every
// fire, every pause and resume — appended and never rewritten in place. `routine-state.json` is
// an index of these files and is rebuilt from them when it is lost or damaged.
// Bounded (retention.historyLines): past historyTrimBytes() a file is rotated, under the
// routine-state lock: it becomes `<id>.jsonl.1` (replacing the previous one) and a new file starts
// with a summary line carrying the routine's record so far (counts, the paused state). Every line
// has an id: one re-appended because a rotation came while it was written is counted once.
// (Over 300 lines: the line formats, their reading and the rotation share one file's layout.)

import { checkFireEntry, type HistoryEntry } from './fire-entry.js';
import { dirname, join, sep } from 'node:path';
import { asStorageError, stateWriteError, UnsafePathError } from '../errors.js';
import { linkNew, namesIn, readFileChecked, readFileFrom, STATE_FILE_CAP, unlinkQuiet } from '../fs/files.js';
import { randomHex } from '../fs/random-ids.js';
import { lstatQuiet } from '../fs/look.js';
import { closeFd, renameOver } from '../fs/names.js';
import { appendLineToFile, ensureFolderOf, openAppendTo, writeFileDurable } from '../fs/durable.js';
import { checkOpenFire, newestAfterStep, type Fire, type OpenFire, type RoutineRecord } from './routine-state.js';
import { beginAppend, endAppend } from './history-stamp.js';

/** Rotate when the file is this many bytes: ≈ 1.5 × the lines kept at ≈ 250 bytes a line (so
 * the file and its rotated predecessor hold at least `historyLines` fires), and never less than
 * 32 KiB, so a small limit does not rotate at every fire. */
export function historyTrimBytes(historyLines: number): number {
  return Math.max(32 * 1024, historyLines * 384);
}
/** Ids of the newest lines a summary remembers, to count a re-appended line once. */
const RECENT_IDS = 64;

export type { HistoryEntry } from './fire-entry.js';

/** A fire line appended later than this after its fire finished says when it was appended. */
export const LATE_LINE_MS = 60_000;

export type HistoryLine =
  | { kind: 'fire'; id: string | null; entry: HistoryEntry }
  | { kind: 'pause'; id: string | null; paused: boolean; note: string | null; at: string }
  | { kind: 'open'; id: string | null; open: OpenFire }
  | { kind: 'summary'; id: string | null; record: RoutineRecord; recent: string[]; at: string };

/** The config's routine id pattern (SPEC §2): no `/`, and never `.` or `..` alone (it starts
 * with a letter or digit), so `<id>.jsonl` is always a name in the history folder — `a..b`
 * included, which the config accepts. */
const ROUTINE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function historyPath(stateDir: string, routineId: string): string {
  if (!ROUTINE_ID.test(routineId)) throw new Error(`invalid routine id ${JSON.stringify(routineId)}`);
  // the folder joined once (a view asks for 1 000 paths: path.join normalizes each, 1.7 µs);
  // the id has no separator, so appending it is the same join
  if (stateDir !== joined.stateDir) joined = { stateDir, dir: join(stateDir, 'history') };
  return `${joined.dir}${sep}${routineId}.jsonl`;
}
let joined = { stateDir: '', dir: '' };

/** The names in the history folder (none when there is none). */
export function historyListing(stateDir: string): string[] {
  try {
    return namesIn(join(stateDir, 'history'));
  } catch (err) {
    // a folder that cannot be listed must not read as "no history" (never ran, 0/0/0)
    throw asStorageError(err);
  }
}

/** Routine ids that have a history file (in `names`, a listing of the folder). */
export function historyIds(stateDir: string, names: readonly string[] = historyListing(stateDir)): string[] {
  const ids: string[] = [];
  for (const n of names) {
    const id = historyIdOf(n);
    if (id !== null) ids.push(id);
  }
  return ids;
}

/** The routine whose history file is named `name` (`<id>.jsonl`), or null for any other name. */
export function historyIdOf(name: string): string | null {
  if (!name.endsWith('.jsonl')) return null;
  const id = name.slice(0, -6);
  return ROUTINE_ID.test(id) ? id : null;
}

/** `prior`: the routine's record as last seen; one whose last fire started over a second in the
 * future (the clock stepped back since) may make this line the newest (newestAfterStep). */
export function fireLine(
  fire: Fire,
  extra: { trigger?: HistoryEntry['trigger']; attempt?: number } = {},
  nowMs = Date.now(),
  prior?: Pick<RoutineRecord, 'last_started_at'> | null,
): string {
  const entry: HistoryEntry = {
    ...historyEntryOf({ ...fire, trigger: fire.trigger ?? extra.trigger, attempt: fire.attempt ?? extra.attempt }),
    ...(nowMs - Date.parse(fire.finished_at) > LATE_LINE_MS ? { recorded_at: new Date(nowMs).toISOString() } : {}),
    ...(newestAfterStep(prior, fire, nowMs) ? { newest: true as const } : {}),
    id: randomHex(8),
  };
  return JSON.stringify(entry);
}

/** A fire as the history keeps it, in both backends (a file line adds its id). */
export function historyEntryOf(fire: Fire): HistoryEntry {
  return {
    scheduled_at: fire.scheduled_at,
    started_at: fire.started_at,
    finished_at: fire.finished_at,
    result: fire.result,
    reason: fire.reason,
    exit_code: fire.exit_code,
    run_id: fire.run_id,
    ...(fire.trigger ? { trigger: fire.trigger } : {}),
    ...(fire.attempt ? { attempt: fire.attempt } : {}),
    ...(fire.by ? { by: fire.by } : {}),
    ...(fire.closes ? { closes: fire.closes } : {}),
    ...(fire.key ? { key: fire.key } : {}),
  };
}

/** The line that opens a fire (written before its work starts). */
export function openLine(open: OpenFire): string {
  return JSON.stringify({ event: 'open', ...open });
}

export function pauseLine(paused: boolean, note: string | null, at: string): string {
  return JSON.stringify(
    paused ? { event: 'paused', at, note, id: randomHex(8) } : { event: 'resumed', at, id: randomHex(8) },
  );
}

const isStr = (v: unknown): v is string => typeof v === 'string';
/** Parses one line; null when it is torn or not a history line. */
export function parseHistoryLine(text: string, checkRecord: (v: unknown) => RoutineRecord | null): HistoryLine | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  const id = isStr(o.id) ? o.id : null;
  if (o.event === 'paused' || o.event === 'resumed') {
    if (!isStr(o.at)) return null;
    return { kind: 'pause', id, paused: o.event === 'paused', note: isStr(o.note) ? o.note : null, at: o.at };
  }
  if (o.event === 'open') {
    const open = checkOpenFire(o);
    return open ? { kind: 'open', id: open.id, open } : null;
  }
  if (o.event === 'summary') {
    const record = checkRecord(o.record);
    if (!record || !isStr(o.at)) return null;
    const recent = Array.isArray(o.recent) ? o.recent.filter(isStr) : [];
    return { kind: 'summary', id, record, recent, at: o.at };
  }
  const entry = checkFireEntry(o);
  return entry ? { kind: 'fire', id, entry } : null;
}

export interface ParsedHistory {
  lines: HistoryLine[];
  /** 1-based numbers of lines that could not be read. */
  unreadable: number[];
}

export function parseHistory(
  text: string,
  checkRecord: (v: unknown) => RoutineRecord | null,
  firstLine = 1,
): ParsedHistory {
  const lines: HistoryLine[] = [];
  const unreadable: number[] = [];
  const raw = text.split('\n');
  raw.forEach((l, i) => {
    // blank: an empty line, or the spaces of an append cut short and repaired (durable.ts)
    if (l.trim().length === 0) return;
    const parsed = parseHistoryLine(l, checkRecord);
    if (parsed) lines.push(parsed);
    else unreadable.push(firstLine + i);
  });
  return { lines, unreadable };
}

/** Says which lines of a history file could not be read, once per process for the same file
 * (inode) and lines (a scheduler folds a file again and again); said to no one is not said. */
export function warnUnreadable(warn: (message: string) => void, path: string, ino: number, numbers: number[]): void {
  const key = `${path}\0${ino}\0${numbers.join(',')}`;
  if (warn === unheard || saidUnreadable.has(key)) return;
  saidUnreadable.add(key);
  const shown = numbers.slice(0, 5).join(', ');
  warn(
    `${path}: line${numbers.length > 1 ? 's' : ''} ${shown}${numbers.length > 5 ? ` and ${numbers.length - 5} more` : ''} could not be read (torn or corrupt) and ${numbers.length > 1 ? 'were' : 'was'} skipped`,
  );
}
const saidUnreadable = new Set<string>();
/** The warning sink of a caller that gives none. */
export const unheard = (_message: string): void => {};

/** The newest `historyLines` fires of the history `file` (its rotated `.1` first), oldest first:
 * one entry per fire — a line re-appended (same id) or a second record closing the same open fire
 * counts once, the first one, as the fold counts it (routine-state.ts foldLines). */
export function readFireEntries(
  file: string,
  historyLines: number,
  checkRecord: (v: unknown) => RoutineRecord | null,
  warn: (message: string) => void = unheard,
): HistoryEntry[] {
  const out: HistoryEntry[] = [];
  const seen = new Set<string>();
  for (const f of [`${file}.1`, file]) {
    const read = readHistoryText(f, 0);
    if (!read) continue;
    const parsed = parseHistory(read.text, checkRecord);
    if (parsed.unreadable.length > 0 && f === file) warnUnreadable(warn, f, read.ino, parsed.unreadable);
    for (const l of parsed.lines) {
      if (l.kind !== 'fire') continue;
      if (l.id) {
        if (seen.has(l.id)) continue;
        seen.add(l.id);
      }
      if (l.entry.closes) {
        if (seen.has(`closes:${l.entry.closes}`)) continue;
        seen.add(`closes:${l.entry.closes}`);
      }
      out.push(l.entry);
    }
  }
  return out.slice(-historyLines);
}

/** Appends one line to the history file (starting on a fresh line). If the file was rotated
 * while we wrote (our descriptor no longer is the file's), the line goes to the new file too;
 * its id makes the fold count it once. Marked in the folder while under way (history-stamp.ts). */
export function appendHistoryLine(path: string, line: string): void {
  const dir = dirname(path);
  ensureFolderOf(path); // checked (made again if it was removed) before a mark is renamed in it
  const mark = beginAppend(dir);
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      const f = openAppendTo(path);
      try {
        appendLineToFile(f, path, line);
      } finally {
        closeFd(f.fd);
      }
      if (lstatQuiet(path)?.ino === f.ino) return;
    }
  } finally {
    endAppend(dir, mark);
  }
}

/** Reads `path` from byte `offset` (0: all of it). */
export function readHistoryText(
  path: string,
  offset = 0,
): { text: string; ino: number; size: number; mtimeMs: number } | null {
  const r = readHistoryBytes(path, offset);
  return r ? { text: r.bytes.toString('utf8'), ino: r.ino, size: r.size, mtimeMs: r.mtimeMs } : null;
}

/** The bytes of `path` from `offset` (a regular file of ours, never through a symlink). */
export function readHistoryBytes(
  path: string,
  offset = 0,
): { bytes: Buffer; ino: number; size: number; mtimeMs: number } | null {
  if (offset === 0) {
    const c = readFileChecked(path, STATE_FILE_CAP);
    return c ? { bytes: c.bytes, ino: c.ino, size: c.bytes.length, mtimeMs: c.mtimeMs } : null;
  }
  // the same checks as a whole read, size first: a file past the cap is refused before a byte
  // of it is read (a 3 GB sparse file cost 64 MB of memory here before)
  try {
    return readFileFrom(path, offset, STATE_FILE_CAP);
  } catch (err) {
    if (err instanceof UnsafePathError) throw err;
    throw stateWriteError(err, path, 'reading');
  }
}

/** Rotates the history file (caller holds the routine-state lock): the current file becomes
 * `<id>.jsonl.1`, and a new one starts with `summary` — the record as of the current file's end.
 * The current name is never missing: `.1` is made by link + rename, then the new file (complete,
 * durable) is renamed over the current name. */
export function rotateHistory(path: string, summaryRecord: RoutineRecord, recent: string[], at: string): void {
  const old = `${path}.1`;
  const aside = `${path}.1.tmp-${randomHex(8)}`;
  try {
    if (!linkNew(path, aside)) throw Object.assign(new Error(`${aside} exists`), { code: 'EEXIST' });
    renameOver(aside, old);
  } catch (err) {
    unlinkQuiet(aside);
    throw stateWriteError(err, old);
  }
  writeFileDurable(path, `${summaryLine(summaryRecord, recent, at)}\n`);
}

/** The first line of a history file that starts from a record (a rotation; a history removed
 * while its index was left): the fold of the file starts from it. */
export function summaryLine(record: RoutineRecord, recent: string[], at: string): string {
  return JSON.stringify({ event: 'summary', at, record, recent: recent.slice(-RECENT_IDS), id: randomHex(8) });
}

export { RECENT_IDS };
