// Schedule math behind a small interface (as supercronic's Expression): croner is
// used as a calculator only; the scheduler loop owns every timer. Both schedules below follow
// Vixie cron's fixed-time rule on DST days (config/dialect.ts), so `validate`, `routine list`
// and the scheduler agree on every fire time.

import type { Cron } from 'croner';
import { backendCaps } from './backend-caps.js';
import { cronFor, recentCron } from './cron-cache.js';
import { cronerPattern } from './dialect.js';

export interface Schedule {
  /** The first fire time strictly after `from`, or null when there is none. */
  next(from: Date): Date | null;
  /** The latest fire time at or before `at`, or null. */
  previous(at: Date): Date | null;
}

export function cronSchedule(pattern: string, timezone?: string): Schedule {
  const cron = cronFor(pattern, timezone);
  return {
    next: (from) => cron.nextRun(from),
    // croner's previousRuns is strictly before its reference
    previous: (at) => cron.previousRuns(1, new Date(at.getTime() + 1))[0] ?? null,
  };
}

/** The same, holding no parsed pattern per routine: for the long-running scheduler, where 100
 * routines would otherwise keep ≈ 8 MB of croner tables alive (cron-cache.ts);
 * only the 16 used last are kept, so a routine that fires every second is not parsed again at
 * every fire (0.3 ms). */
export function lightSchedule(pattern: string, timezone?: string): Schedule {
  // The translated pattern is a short string; the parsed tables are what is not kept.
  const translated = cronerPattern(pattern, timezone);
  const make = (): Cron => recentCron(translated, timezone);
  return {
    next: (from) => make().nextRun(from),
    previous: (at) => make().previousRuns(1, new Date(at.getTime() + 1))[0] ?? null,
  };
}

export function nextRuns(schedule: Schedule, from: Date, count: number): Date[] {
  const out: Date[] = [];
  let cursor: Date | null = from;
  while (out.length < count && cursor) {
    cursor = schedule.next(cursor);
    if (cursor) out.push(cursor);
  }
  return out;
}

/** The zone a routine is scheduled in. With a scheduler per host (the database backend), the
 * schedulers on hosts in different zones claim the same scheduled times, so a routine without
 * `timezone` runs in UTC there (in the machine's zone with files). */
export function routineZone(
  def: { timezone?: string },
  project: { backend: { type: 'file' | 'postgres' } },
): string | undefined {
  return def.timezone ?? (backendCaps(project.backend).schedulerPerProject ? undefined : 'UTC');
}
