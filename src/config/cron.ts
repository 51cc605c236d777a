// Cron and time-zone checks for config validation. croner decides what is valid; the field
// range check in front of it only makes the common mistakes read well:
// `minute 61 out of range 0-59` instead of croner's generic wording.

import type { Cron } from 'croner';
import { cronFor } from './cron-cache.js';
import { NICKNAMES } from './dialect.js';

const FIELDS5 = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12 },
  { name: 'day-of-week', min: 0, max: 7 },
];
const SECOND = { name: 'second', min: 0, max: 59 };

/** Returns why the schedule is invalid, or null when croner accepts it; `use` gets the parsed
 * pattern when it is valid (as cronFor builds it, so its next runs follow our DST rule). */
export function cronProblem(schedule: string, timezone?: string, use?: (cron: Cron) => void): string | null {
  const trimmed = schedule.trim();
  if (trimmed.startsWith('@')) {
    if (trimmed.toLowerCase() === '@reboot') {
      return '@reboot is not a time: for work at every scheduler start give the routine its real schedule with "catchUp": "latest" (it fires once at start when a time was missed), and for work at boot use a systemd unit (Type=oneshot, WantedBy=multi-user.target) or cron\'s own @reboot';
    }
    if (!NICKNAMES.has(trimmed.toLowerCase())) {
      return `unknown nickname ${trimmed} (allowed: ${[...NICKNAMES.keys()].join(', ')})`;
    }
  } else {
    const parts = trimmed.split(/\s+/);
    if (parts.length !== 5 && parts.length !== 6) {
      return `has ${parts.length} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)`;
    }
    const fields = parts.length === 6 ? [SECOND, ...FIELDS5] : FIELDS5;
    for (let i = 0; i < parts.length; i++) {
      const problem = fieldProblem(parts[i]!, fields[i]!);
      if (problem) return problem;
    }
  }
  let cron: Cron;
  try {
    cron = cronFor(trimmed, timezone);
  } catch (err) {
    // croner's words, without its "Value: 9, Type: string" tail
    return (err as Error).message
      .replace(/^CronPattern:\s*/, '')
      .replace(/\.?\s*Value: (.*?), Type: \w+\.?$/, '; got $1');
  }
  // Valid fields that no date satisfies (30 February, 31 April) would never fire: refused, not
  // scheduled into silence.
  if (cron.nextRun() === null) return 'never fires: no date matches it (like 30 February or 31 April)';
  use?.(cron);
  return null;
}

const NAMES: Record<string, { what: string; names: string[] }> = {
  'day-of-week': { what: 'a day name', names: ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] },
  month: {
    what: 'a month name',
    names: ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'],
  },
};

function fieldProblem(field: string, spec: { name: string; min: number; max: number }): string | null {
  for (const part of field.split(',')) {
    const [range, step] = part.split('/');
    // A word where a number or name goes (croner would say "configuration entry 5 (1-fry)
    // contains illegal characters", naming neither the field nor the word).
    for (const token of (range ?? '').split('-')) {
      if (!/^[A-Za-z]+$/.test(token) || /^(L|W|LW)$/i.test(token)) continue;
      const names = NAMES[spec.name];
      if (!names)
        return `${spec.name} ${JSON.stringify(field)}: ${JSON.stringify(token)} is not a number (${spec.min}-${spec.max})`;
      if (!names.names.includes(token.toLowerCase())) {
        return `${spec.name} ${JSON.stringify(field)}: ${JSON.stringify(token)} is not ${names.what} (${names.names[0]}…${names.names[names.names.length - 1]}, or ${spec.min}-${spec.max})`;
      }
    }
    if (step !== undefined && /^\d+$/.test(step)) {
      const n = Number(step);
      if (n < 1) return `${spec.name} step ${n} must be at least 1`;
      if (n > spec.max) return `${spec.name} ${n} out of range ${spec.min}-${spec.max}`;
    }
    for (const token of (range ?? '').split('-')) {
      if (!/^\d+$/.test(token)) continue; // *, names, L, W, # are croner's to judge
      const n = Number(token);
      if (n < spec.min || n > spec.max) return `${spec.name} ${n} out of range ${spec.min}-${spec.max}`;
    }
  }
  return null;
}

const zones = new Map<string, boolean>();

/** Whether `zone` is an IANA time-zone name this runtime knows (memoized: each check builds an
 * ICU formatter, ≈ 0.5 ms). */
export function isValidTimezone(zone: string): boolean {
  let ok = zones.get(zone);
  if (ok === undefined) {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: zone });
      ok = true;
    } catch {
      ok = false;
    }
    zones.set(zone, ok);
  }
  return ok;
}
