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

const byTime = (x: HistoryEntry, y: HistoryEntry): number => Date.parse(x.scheduled_at) - Date.parse(y.scheduled_at) || Date.parse(x.started_at) - Date.parse(y.started_at);

/** The newest `q.limit` fires of `routineId` that match `q`, oldest first; at most the newest
 * `historyLines` of its history are looked at (as `readFires` keeps them). */
export function newestFires(stateDir: string, routineId: string, q: FireQuery, historyLines: number, warn: Warn = () => {}): HistoryEntry[] {
  const file = historyPath(stateDir, routineId);
  const seen = new Set<string>();
  let kept: HistoryEntry[] = [];
  let fires = 0;
  let torn = 0;
  /** The scheduled time (ms) no fire of the newest `limit` is older than, once there are that many. */
  let floor = -Infinity;
  const trim = (): void => {
    kept.sort((a, b) => byTime(b, a));
    kept = kept.slice(0, q.limit);
    floor = Date.parse(kept[kept.length - 1]!.scheduled_at);
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
      if (finished < q.since || (kept.length >= q.limit && finished < floor)) break read;
      const at = Date.parse(e.scheduled_at);
      if (at < q.since || at >= q.until || (q.result !== undefined && e.result !== q.result)) continue;
      kept.push(e);
      if (kept.length >= 2 * q.limit || (kept.length === q.limit && floor === -Infinity)) trim();
    }
  }
  if (torn > 0) warn(`${file}: ${torn} line${torn === 1 ? '' : 's'} could not be read (torn or corrupt) and ${torn === 1 ? 'was' : 'were'} skipped`);
  if (kept.length > q.limit) trim();
  return kept.sort(byTime);
}

/** The newest `q.limit` fires of `routines` together, oldest first, each with its routine. */
export function recentFiresInFiles(stateDir: string, routines: readonly string[], q: FireQuery, historyLines: number, warn: Warn): ShownFire[] {
  const all = routines.flatMap((routine) => newestFires(stateDir, routine, q, historyLines, warn).map((e) => ({ routine, ...e })));
  all.sort(byTime);
  return Number.isFinite(q.limit) ? all.slice(-q.limit) : all;
}
