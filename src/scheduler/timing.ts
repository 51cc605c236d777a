// Pure timing decisions of the scheduler loop (no I/O, so they are tested as plain functions): what is due, how long to sleep,
// whether the wall clock jumped, what a catch-up should fire. Times are epoch milliseconds.

import type { Schedule } from '../config/schedule.js';

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

/** How far behind its time a wake-up of the loop may be and still fire every time it missed:
 * a stall (a loaded machine, a GC pause, a short SIGSTOP), not a suspend or a clock step, which
 * forwardStep tells apart. cron does the same for the minutes it slept through. */
export const STALL_REPLAY_MS = 5_000;

/** The times to fire now for a routine due at `firstMs`, when the loop woke at `nowMs` with no
 * clock step: each time it missed, when the first is at most STALL_REPLAY_MS old (each is then a
 * tick of its own: claimed, fired or recorded as a skip, never silently passed over); else only
 * the first (one late fire; the rest is the routine's catchUp rule). */
export function missedTimes(
  schedule: Schedule,
  firstMs: number,
  nowMs: number,
  covered: readonly Covered[],
  sinceMs?: number,
): number[] {
  const out = [firstMs];
  if (nowMs - firstMs > STALL_REPLAY_MS) return out;
  for (
    let t = nextUncovered(schedule, firstMs, covered, sinceMs);
    t !== null && t <= nowMs && out.length <= STALL_REPLAY_MS / 1000;
    t = nextUncovered(schedule, t, covered, sinceMs)
  )
    out.push(t);
  return out;
}

/** At most this many slept-through times of one routine are recorded at one wake-up (an hour
 * of a per-second routine stopped would be 3 600 lines); the rest are counted in a warning. */
export const SLEPT_RECORD_CAP = 600;

/** The times of a routine a loop slept through — it woke later than STALL_REPLAY_MS after
 * `firstMs` with no clock step (stopped, paused, overloaded: its monotonic clock moved): every
 * time after the first (which fires, late) up to `nowMs`, never one already dealt with; at most
 * SLEPT_RECORD_CAP, and how many more there were. Each is recorded as a skip that says why. */
export function sleptThrough(
  schedule: Schedule,
  firstMs: number,
  nowMs: number,
  covered: readonly Covered[],
  sinceMs?: number,
): { times: number[]; more: number } {
  const times: number[] = [];
  let more = 0;
  if (nowMs - firstMs <= STALL_REPLAY_MS) return { times, more };
  for (
    let t = nextUncovered(schedule, firstMs, covered, sinceMs);
    t !== null && t <= nowMs;
    t = nextUncovered(schedule, t, covered, sinceMs)
  ) {
    if (times.length < SLEPT_RECORD_CAP) times.push(t);
    else if (++more > 1_000_000) break;
  }
  return { times, more };
}

/** A backward step of the wall clock (NTP, a manual `date -s`): fire times computed before it
 * would wait out the difference, so the loop recomputes them. */
export function clockWentBack(previousNowMs: number, nowMs: number, toleranceMs = 1000): boolean {
  return nowMs < previousNowMs - toleranceMs;
}

/** A reading of both clocks, taken each time the loop wakes. */
export interface ClockReading {
  wall: number;
  mono: number;
}

/** How far the wall clock stepped back between two readings (ms, > 0), or 0: the wall clock
 * advanced less than the monotonic one by more than the tolerance. A monotonic clock that went
 * back itself (a faked one) cannot tell, and the wall clock alone is judged. */
export function backwardStep(before: ClockReading, after: ClockReading, toleranceMs = 1000): number {
  const wall = after.wall - before.wall;
  const mono = after.mono - before.mono;
  const step = mono >= 0 ? mono - wall : -wall;
  return step > toleranceMs ? step : 0;
}

/** How far the wall clock stepped forward between two readings (ms, > 0), or 0: the wall clock
 * advanced more than the monotonic one by more than the tolerance (NTP, `date -s`, a suspend:
 * the monotonic clock stands still while the machine sleeps). */
export function forwardStep(before: ClockReading, after: ClockReading, toleranceMs = 1000): number {
  const wall = after.wall - before.wall;
  const mono = after.mono - before.mono;
  if (mono < 0) return 0; // a monotonic clock that went back (a faked one) cannot tell
  const step = wall - mono;
  return step > toleranceMs ? step : 0;
}

/** Scheduled times this scheduler has already dealt with (fired, queued, skipped or passed over
 * as late), as intervals (from, to]: after a backward clock step none of them fires again, while
 * every time outside them does (SPEC §6 "Clock steps"). */
export interface Covered {
  from: number;
  to: number;
}

/** The covered intervals after a backward step from `beforeMs` to `nowMs`, given that every time
 * in (epochStartMs, beforeMs] was dealt with; merged, and without intervals wholly in the past. */
export function coverAfterStep(
  covered: readonly Covered[],
  epochStartMs: number,
  beforeMs: number,
  nowMs: number,
): Covered[] {
  const all = [...covered, { from: epochStartMs, to: beforeMs }]
    .filter((c) => c.to > nowMs && c.to > c.from)
    .sort((a, b) => a.from - b.from);
  const merged: Covered[] = [];
  for (const c of all) {
    const last = merged[merged.length - 1];
    if (last && c.from <= last.to) last.to = Math.max(last.to, c.to);
    else merged.push({ ...c });
  }
  return merged;
}

/** The first fire time after `afterMs` that no covered interval holds. `sinceMs`: the routine
 * was scheduled by this process then (times before it were never its own to deal with). */
export function nextUncovered(
  schedule: Schedule,
  afterMs: number,
  covered: readonly Covered[],
  sinceMs = -Infinity,
): number | null {
  let t = nextFire(schedule, afterMs);
  for (let i = 0; t !== null && i <= covered.length; i++) {
    const hit = covered.find((c) => t! > Math.max(c.from, sinceMs) && t! <= c.to);
    if (!hit) return t;
    t = nextFire(schedule, hit.to);
  }
  return t;
}

/** `catchUp: "latest"`: the most recent scheduled time, if it passed after the last recorded
 * one (missed while no scheduler ran). A routine with no record has nothing to catch up. */
export function catchUpTime(schedule: Schedule, lastScheduledAt: string | null, nowMs: number): Date | null {
  if (lastScheduledAt === null) return null;
  const last = Date.parse(lastScheduledAt);
  const prev = schedule.previous(new Date(nowMs));
  return prev && prev.getTime() > last ? prev : null;
}
