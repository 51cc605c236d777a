// Pure timing decisions of the scheduler loop (STYLE lesson 1): what is due, how long to sleep,
// whether the wall clock jumped, what a catch-up should fire. Times are epoch milliseconds.

import type { Schedule } from './schedule.js';

/** Longest single sleep: the loop re-reads the wall clock at least this often, so a suspend,
 * a resume or a clock step is noticed within it (croner caps its own waits the same way). */
export const MAX_SLEEP_MS = 30_000;

export function nextFire(schedule: Schedule, afterMs: number): number | null {
  return schedule.next(new Date(afterMs))?.getTime() ?? null;
}

/** Ids whose next fire time has come, in the order given. */
export function dueIds(next: ReadonlyMap<string, number | null>, nowMs: number): string[] {
  const due: string[] = [];
  for (const [id, at] of next) if (at !== null && at <= nowMs) due.push(id);
  return due;
}

export function sleepMs(next: ReadonlyMap<string, number | null>, nowMs: number): number {
  let soonest = Infinity;
  for (const at of next.values()) if (at !== null && at < soonest) soonest = at;
  return Math.max(0, Math.min(soonest - nowMs, MAX_SLEEP_MS));
}

/** A backward step of the wall clock (NTP, a manual `date -s`): fire times computed before it
 * would wait out the difference, so the loop recomputes them. */
export function clockWentBack(previousNowMs: number, nowMs: number, toleranceMs = 1000): boolean {
  return nowMs < previousNowMs - toleranceMs;
}

/** `catchUp: "latest"`: the most recent scheduled time, if it passed after the last recorded
 * one (missed while no scheduler ran). A routine with no record has nothing to catch up. */
export function catchUpTime(schedule: Schedule, lastScheduledAt: string | null, nowMs: number): Date | null {
  if (lastScheduledAt === null) return null;
  const last = Date.parse(lastScheduledAt);
  const prev = schedule.previous(new Date(nowMs));
  return prev && prev.getTime() > last ? prev : null;
}
