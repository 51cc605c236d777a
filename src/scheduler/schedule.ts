// Schedule math behind a one-method interface (STYLE lesson 3, supercronic's Expression):
// croner is used as a calculator only; the scheduler loop owns every timer.

import { Cron } from 'croner';

export interface Schedule {
  /** The first fire time strictly after `from`, or null when there is none. */
  next(from: Date): Date | null;
}

export function cronSchedule(pattern: string, timezone?: string): Schedule {
  const cron = new Cron(pattern.trim(), { mode: '5-or-6-parts', timezone, paused: true });
  return { next: (from) => cron.nextRun(from) };
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
