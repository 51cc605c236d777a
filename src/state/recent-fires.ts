// The newest fires of some routines from their history files (`routine history`, SPEC §6), at a
// cost that follows what is shown, not the project: each file is read from its end, and reading
// stops once a line was written before the oldest fire kept (docs/design.md "Reading the history
// from its end"). What is shown is what reading the files whole shows, tested against it.

import { linesFromEnd } from '../fs/lines-from-end.js';
import { LATE_LINE_MS, parseHistoryLine, historyPath, readFireEntries, unheard, type HistoryEntry } from './history.js';
import { checkRecord } from './routine-state.js';
import type { FireQuery, ShownFire, Warn } from './store.js';

/** How far a recorded time may go back from one line to the next (a clock stepped back). */
const CLOCK_MARGIN_MS = 10 * 60_000;

interface Found {
  e: HistoryEntry;
  at: number;
  started: number;
  /** Its place in the files (larger: later); ties on time keep that order. */
  pos: number;
}

const asc = (x: Found, y: Found): number => x.at - y.at || x.started - y.started || x.pos - y.pos;

/** The newest `q.limit` fires of `routineId` that match `q`, oldest first; at most the newest
 * `historyLines` of its history are looked at (as readFireEntries keeps them). `shown`: the
 * scheduled time (ms) that fires already found elsewhere put the cut at — nothing older is
 * wanted. A fire recorded twice (a line re-appended across a rotation, two reconciles at once)
 * or a torn line is read whole instead: the first record counts, and a torn line is named by its
 * number, which only a reader from the start knows. */
export function newestFires(
  stateDir: string,
  routineId: string,
  q: FireQuery,
  historyLines: number,
  warn: Warn = unheard,
  shown = -Infinity,
): HistoryEntry[] {
  if (!(q.limit > 0)) return [];
  const file = historyPath(stateDir, routineId);
  const wanted = (at: number, e: HistoryEntry): boolean =>
    at >= q.since && at < q.until && at >= shown && (q.result === undefined || e.result === q.result);
  const seen = new Set<string>();
  let kept: Found[] = [];
  let fires = 0;
  let pos = 0;
  /** Open fires that counted records close, whose open line is further back. */
  const unresolved = new Set<string>();
  /** The scheduled time no fire of the newest `limit` is older than, once there are that many
   * (here or, with `shown`, among the fires found before). */
  let floor = shown;
  const trim = (): void => {
    kept = kept.sort(asc).slice(-q.limit);
    if (kept.length === q.limit) floor = Math.max(shown, kept[0]!.at);
  };
  read: for (const f of [file, `${file}.1`]) {
    for (const text of linesFromEnd(f)) {
      pos--;
      if (text.trim().length === 0) continue; // blank (see parseHistory)
      const line = parseHistoryLine(text, checkRecord);
      // a torn line of the current file is reported with its number (SPEC §3), which only a
      // reader from the start knows
      if (!line && f === file) return readWhole(file, q, historyLines, shown, warn);
      if (!line) continue;
      if (line.kind === 'open') unresolved.delete(line.id ?? '');
      if (line.kind !== 'fire') continue;
      const e = line.entry;
      const written = Math.max(
        Date.parse(e.finished_at) + LATE_LINE_MS,
        e.recorded_at ? Date.parse(e.recorded_at) : -Infinity,
      );
      if (written + CLOCK_MARGIN_MS < Math.max(q.since, floor)) break read;
      for (const k of [line.id ? `id:${line.id}` : null, e.closes ? `closes:${e.closes}` : null]) {
        if (k === null) continue;
        if (seen.has(k)) return readWhole(file, q, historyLines, shown, warn);
        seen.add(k);
      }
      // at the bound of what is kept, a record whose fire opened further back may still be a
      // second one of a fire recorded earlier (and then not count): only the whole files say
      if (++fires > historyLines) {
        if (unresolved.size > 0) return readWhole(file, q, historyLines, shown, warn);
        break read;
      }
      if (e.closes) unresolved.add(e.closes);
      const found: Found = { e, at: Date.parse(e.scheduled_at), started: Date.parse(e.started_at), pos };
      if (found.at < floor || !wanted(found.at, e)) continue;
      kept.push(found);
      if (kept.length >= 2 * q.limit || (kept.length === q.limit && floor === shown)) trim();
    }
  }
  trim();
  return kept.map((c) => c.e);
}

/** The same answer from the whole files (readFireEntries). */
function readWhole(file: string, q: FireQuery, historyLines: number, shown: number, warn: Warn): HistoryEntry[] {
  const all = readFireEntries(file, historyLines, checkRecord, warn)
    .map((e, pos): Found => ({ e, at: Date.parse(e.scheduled_at), started: Date.parse(e.started_at), pos }))
    .filter(
      (c) => c.at >= q.since && c.at < q.until && c.at >= shown && (q.result === undefined || c.e.result === q.result),
    );
  return all
    .sort(asc)
    .slice(-q.limit)
    .map((c) => c.e);
}

/** The newest `q.limit` fires of `routines` together, oldest first, each with its routine. Once
 * `limit` are found, the next routines are read only as far back as could beat the oldest of
 * them (with 1 000 routines, a line or two each). Ties keep the routines' order. */
export function recentFiresInFiles(
  stateDir: string,
  routines: readonly string[],
  q: FireQuery,
  historyLines: number,
  warn: Warn,
): ShownFire[] {
  if (!(q.limit > 0)) return [];
  let all: { f: ShownFire; at: number; started: number; pos: number }[] = [];
  let shown = -Infinity;
  let order = 0;
  const sorted = (): typeof all => all.sort((x, y) => x.at - y.at || x.started - y.started || x.pos - y.pos);
  for (const routine of routines) {
    for (const e of newestFires(stateDir, routine, q, historyLines, warn, shown)) {
      all.push({
        f: { routine, ...e },
        at: Date.parse(e.scheduled_at),
        started: Date.parse(e.started_at),
        pos: order++,
      });
    }
    if (Number.isFinite(q.limit) && all.length >= 2 * q.limit) {
      all = sorted().slice(-q.limit);
      shown = all[0]!.at;
    }
  }
  const out = sorted().map((x) => x.f);
  return Number.isFinite(q.limit) ? out.slice(-q.limit) : out;
}
