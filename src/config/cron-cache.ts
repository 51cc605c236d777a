// croner's parsed patterns, and which are kept: a trick that buys memory and start-up figures
// (docs/benchmarks.md). croner holds a 10 000-entry year table per pattern (≈ 80 KB): the
// long-running scheduler keeps only the 16 it used last (recentCron: 100 routines would otherwise
// pin ≈ 8 MB, and one firing every second is not parsed again each time, 0.3 ms), and the read
// commands keep every one they parse (keepCrons: `routine list` and `validate` parse each pattern
// once, not once for validation and once for next-run times).

import { Cron } from 'croner';
import { cronerPattern } from './dialect.js';

const crons = new Map<string, Cron>();
let keep = false;

/** Keep parsed patterns for reuse by this process: the read commands (`routine list`,
 * `validate`) parse each pattern once for validation and once for next-run times otherwise.
 * Off by default, because croner holds a 10 000-entry year table per pattern (≈ 80 KB): the
 * long-running scheduler lets them die young instead (100 routines would pin ≈ 8 MB and grow
 * its RSS by far more). */
export function keepCrons(): void {
  keep = true;
}

/** croner as a calculator for `pattern` in our dialect (Vixie's fixed-time rule, dialect.ts). */
export function cronFor(pattern: string, timezone?: string): Cron {
  const key = `${timezone ?? ''}\u0000${pattern.trim()}`;
  let cron = crons.get(key);
  if (!cron) {
    cron = croner(cronerPattern(pattern, timezone), timezone);
    if (keep) crons.set(key, cron);
  }
  return cron;
}

/** A croner calculator for a pattern cronerPattern has already translated. */
export function croner(translated: string, timezone?: string): Cron {
  return new Cron(translated, { mode: '5-or-6-parts', timezone, paused: true, fixedTimeRule: 'no-wildcard' });
}

/** Parsed patterns the long-running scheduler keeps: the few it used last (the routines that
 * fire often), not one per routine. */
const RECENT_CRONS = 16;
const recentCrons = new Map<string, Cron>();

export function recentCron(translated: string, timezone: string | undefined): Cron {
  const key = `${timezone ?? ''}\u0000${translated}`;
  let cron = recentCrons.get(key);
  if (cron) recentCrons.delete(key);
  else cron = croner(translated, timezone);
  recentCrons.set(key, cron);
  if (recentCrons.size > RECENT_CRONS) recentCrons.delete(recentCrons.keys().next().value!);
  return cron;
}

/** Drops the kept patterns (≈ 85 KB each): the idle scheduler's memory (settle-heap.ts); the
 * routines that fire parse theirs again, once. */
export function forgetRecentCrons(): void {
  recentCrons.clear();
}
