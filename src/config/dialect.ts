// The schedule dialect on top of croner: the nicknames, and Vixie cron's fixed-time rule for DST.
//
// Vixie cron (cron.c, entry.c) calls a job "wild" when its minute or its hour field starts with
// `*`; every other job is fixed-time. A fixed-time job runs once when a local time repeats (DST
// fall back) and, for a time in a skipped hour (spring forward), at the first minute after it.
// croner knows both behaviours, but by default it counts only single values as fixed-time, so
// `0 1,13 * * *` ran twice on a fall-back night. Its `fixedTimeRule: "no-wildcard"` covers lists
// and ranges, not steps (`0 0-23/2`) nor a seconds field with `*`: for those, cronerPattern
// spells the time fields out as plain lists, which that rule does count, with the same times.

import { CronPattern } from 'croner';

/** The nicknames croner accepts, as the 5-field patterns they stand for. */
export const NICKNAMES: ReadonlyMap<string, string> = new Map([
  ['@yearly', '0 0 1 1 *'],
  ['@annually', '0 0 1 1 *'],
  ['@monthly', '0 0 1 * *'],
  ['@weekly', '0 0 * * 0'],
  ['@daily', '0 0 * * *'],
  ['@midnight', '0 0 * * *'],
  ['@hourly', '0 * * * *'],
]);

/** Vixie's rule: neither the minute nor the hour field starts with `*` (or `?`, croner's other
 * spelling of it). A 6-field pattern has seconds first; they do not count, as cron has none. */
export function isFixedTime(pattern: string): boolean {
  const fields = fieldsOf(pattern);
  if (!fields) return false;
  const [minute, hour] = fields.length === 6 ? [fields[1]!, fields[2]!] : [fields[0]!, fields[1]!];
  return !isWild(minute) && !isWild(hour);
}

/** The pattern to hand croner (with `fixedTimeRule: "no-wildcard"`) so that it treats exactly
 * the fixed-time jobs of isFixedTime as fixed-time. Usually the pattern itself; a fixed-time
 * pattern with `*`, `?` or a step in its seconds, minutes or hours comes back with those three
 * fields as lists of plain values and ranges. Throws croner's error for an invalid pattern it
 * had to parse. */
export function cronerPattern(pattern: string, timezone?: string): string {
  const trimmed = pattern.trim();
  const fields = fieldsOf(trimmed);
  if (!fields || trimmed.startsWith('@') || !isFixedTime(trimmed)) return trimmed;
  const time = fields.length === 6 ? fields.slice(0, 3) : fields.slice(0, 2);
  if (!time.some((f) => /[*?/]/.test(f))) return trimmed;
  // croner parses the fields, so they mean exactly what croner reads in them.
  const parsed = new CronPattern(trimmed, timezone, { mode: '5-or-6-parts' });
  return [valueList(parsed.second), valueList(parsed.minute), valueList(parsed.hour), ...fields.slice(-3)].join(' ');
}

function fieldsOf(pattern: string): string[] | null {
  const trimmed = pattern.trim();
  const text = trimmed.startsWith('@') ? NICKNAMES.get(trimmed.toLowerCase()) : trimmed;
  const fields = text?.split(/\s+/);
  return fields && (fields.length === 5 || fields.length === 6) ? fields : null;
}

const isWild = (field: string): boolean => field.startsWith('*') || field.startsWith('?');

/** `0,2,4` or `0-59`: the set values of a croner field table, as runs. */
function valueList(table: readonly number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < table.length; i++) {
    if (!table[i]) continue;
    let end = i;
    while (end + 1 < table.length && table[end + 1]) end++;
    runs.push(end === i ? `${i}` : `${i}-${end}`);
    i = end;
  }
  return runs.join(',');
}
