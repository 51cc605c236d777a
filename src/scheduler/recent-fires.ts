// The newest fires of some routines from their history files (`routine history`, SPEC §6), at a
// cost that follows what is shown, not the project: each file is read from its end (a project
// of 1 000 routines with full histories holds 250 MB of them; the newest 20 fires need a few
// blocks of each).
//
// When to stop reading a file: its lines are appended as fires are recorded, so each line was
// written no earlier than the fires before it finished, and a fire is scheduled before it
// finishes. Once a line finished before the oldest fire we keep was scheduled, nothing before it
// can be newer — with a margin for a wall clock stepped back while the lines were written.

import { parseHistoryLine, historyPath, linesFromEnd, type HistoryEntry } from '../state/history.js';
import { checkRecord } from '../state/routine-state.js';
import type { FireQuery, ShownFire, Warn } from './store.js';

/** How far a recorded time may go back from one line to the next (a clock stepped back). */
const CLOCK_MARGIN_MS = 10 * 60_000;

/** Sorts by scheduled, then started time, each parsed once (a comparator that parses is most of
 * the cost with 1 000 routines). */
function sortByTime<T extends HistoryEntry>(list: T[], newestFirst = false): T[] {
  const keyed = list.map((e) => ({ e, at: Date.parse(e.scheduled_at), started: Date.parse(e.started_at) }));
  keyed.sort((x, y) => x.at - y.at || x.started - y.started);
  if (newestFirst) keyed.reverse();
  return keyed.map((k) => k.e);
}

/** The newest `q.limit` fires of `routineId` that match `q`, oldest first; at most the newest
 * `historyLines` of its history are looked at (as `readFires` keeps them). `shown`: the scheduled
 * time (ms) that fires already found elsewhere put the cut at — nothing older is wanted. */
export function newestFires(stateDir: string, routineId: string, q: FireQuery, historyLines: number, warn: Warn = () => {}, shown = -Infinity): HistoryEntry[] {
  const file = historyPath(stateDir, routineId);
  const seen = new Set<string>();
  let kept: HistoryEntry[] = [];
  let fires = 0;
  let torn = 0;
  /** The scheduled time (ms) no fire of the newest `limit` is older than, once there are that many
   * (here or, with `shown`, among the fires found before). */
  let floor = shown;
  const trim = (): void => {
    kept = sortByTime(kept, true).slice(0, q.limit);
    floor = Math.max(shown, Date.parse(kept[kept.length - 1]!.scheduled_at));
  };
  read: for (const f of [file, `${file}.1`]) {
    for (const text of linesFromEnd(f)) {
      if (text.length === 0) continue;
      const line = parseHistoryLine(text, checkRecord);
      if (!line) {
        if (f === file) torn++;
        continue;
      }
      if (line.kind !== 'fire') continue;
      const e = line.entry;
      // one entry per fire (as readFires and the fold count them)
      if (line.id) {
        if (seen.has(line.id)) continue;
        seen.add(line.id);
      }
      if (e.closes) {
        if (seen.has(`closes:${e.closes}`)) continue;
        seen.add(`closes:${e.closes}`);
      }
      if (++fires > historyLines) break read;
      const finished = Date.parse(e.finished_at) + CLOCK_MARGIN_MS;
      if (finished < q.since || finished < floor) break read;
      const at = Date.parse(e.scheduled_at);
      if (at < q.since || at >= q.until || at < floor || (q.result !== undefined && e.result !== q.result)) continue;
      kept.push(e);
      if (kept.length >= 2 * q.limit || (kept.length === q.limit && floor === shown)) trim();
    }
  }
  if (torn > 0) warn(`${file}: ${torn} line${torn === 1 ? '' : 's'} could not be read (torn or corrupt) and ${torn === 1 ? 'was' : 'were'} skipped`);
  if (kept.length > q.limit) trim();
  return sortByTime(kept);
}

/** The newest `q.limit` fires of `routines` together, oldest first, each with its routine. Once
 * `limit` are found, the next routines are read only as far back as could beat the oldest of
 * them (with 1 000 routines, a line or two each). */
export function recentFiresInFiles(stateDir: string, routines: readonly string[], q: FireQuery, historyLines: number, warn: Warn): ShownFire[] {
  let all: ShownFire[] = [];
  let shown = -Infinity;
  for (const routine of routines) {
    for (const e of newestFires(stateDir, routine, q, historyLines, warn, shown)) all.push({ routine, ...e });
    if (Number.isFinite(q.limit) && all.length >= 2 * q.limit) {
      all = sortByTime(all).slice(-q.limit);
      shown = Date.parse(all[0]!.scheduled_at);
    }
  }
  const sorted = sortByTime(all);
  return Number.isFinite(q.limit) ? sorted.slice(-q.limit) : sorted;
}
