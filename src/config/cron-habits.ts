// Cron habits that misfire (SPEC §10 `validate`): a 6-field expression is seconds first, so
// `0 3 * * * *` — a crontab line's `0 3 * * *` with one `*` too many — fires every hour at
// minute 3, not daily at 03:00. Such a schedule is valid and may be meant; `validate` warns,
// showing both readings. No croner here: the fast `validate` path prints the same warning.

const PLAIN = /^\d{1,2}$/;
const SIX_FIELDS = /^\s*\S+(?:\s+\S+){5}\s*$/;
const HOURS = /^\d{1,2}(?:[,-]\d{1,2})*$/;

const two = (n: string): string => n.padStart(2, '0');

/** The warning for a schedule that reads like a 5-field one with a field too many, or null. */
export function extraFieldWarning(schedule: string): string | null {
  // most schedules have 5 fields: told apart without splitting (validate of 1 000 routines)
  if (!SIX_FIELDS.test(schedule)) return null;
  const f = schedule.trim().split(/\s+/);
  const [sec, min, hour, dom, month, dow] = f as [string, string, string, string, string, string];
  // Seconds-first with the hour left `*` and a "minute" that is a plain value which would be an
  // hour in the 5-field reading: `S M * … *`. A real seconds-first daily names its hour.
  if (!PLAIN.test(sec) || Number(sec) > 59 || !HOURS.test(min) || hour !== '*' || dow !== '*') return null;
  if (min.split(/[,-]/).some((h) => Number(h) > 23)) return null;
  const five = [sec, min, dom, month, '*'].join(' ');
  const daily = dom === '*' && month === '*';
  const meant =
    PLAIN.test(min) && daily
      ? `daily at ${two(min)}:${two(sec)}`
      : `minute ${sec} of hour ${min}${daily ? ', every day' : ''}`;
  const got = `second ${sec} of minute ${min}, every hour${daily ? '' : ` (day-of-month ${dom}, month ${month})`}`;
  return `"${schedule.trim()}" has 6 fields, so it is seconds first: ${got}. If "${five}" (5 fields: ${meant}) was meant, drop the last field`;
}

/** `validate`'s warnings (stderr; it still exits 0) for the routines whose schedules read so. */
export function habitWarnings(routines: readonly { id: string; schedule: string }[]): string[] {
  const warnings: string[] = [];
  for (const r of routines) {
    const w = extraFieldWarning(r.schedule);
    if (w) warnings.push(`routinely: warning: routine ${r.id}: ${w}`);
  }
  return warnings;
}
