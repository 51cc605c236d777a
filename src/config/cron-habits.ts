// Cron habits that misfire (SPEC §10 `validate`): a 6-field expression is seconds first, so
// `0 3 * * * *` — a crontab line's `0 3 * * *` with one `*` too many — fires every hour at
// minute 3, not daily at 03:00. Such a schedule is valid and may be meant; `validate` warns,
// showing both readings. No croner here: the fast `validate` path prints the same warning. So is
// a jitter as long as the time between two fires: the next tick meets the fire still waiting.

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

/** `60 s`, `5 min`, `2 h`, `1 day`: a time between fires as a person would say it. */
function spanWords(ms: number): string {
  const day = 86_400_000;
  if (ms % day === 0) return `${ms / day} day${ms === day ? '' : 's'}`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 100) / 10} s`;
}

/** The warning for a jitter (seconds) not shorter than the least time between the given fire
 * times (ms, ascending), or null: a fire still waiting out its jitter when the next tick comes
 * makes that tick a skip, so about every other tick is lost. */
export function jitterWarning(jitterSeconds: number, times: readonly number[]): string | null {
  if (!(jitterSeconds > 0) || times.length < 2) return null;
  let gap = Infinity;
  for (let i = 1; i < times.length; i++) gap = Math.min(gap, times[i]! - times[i - 1]!);
  if (jitterSeconds * 1000 < gap) return null;
  return `jitterSeconds ${jitterSeconds} is not shorter than the ${spanWords(gap)} between its fires: a tick that comes while a fire still waits out its jitter is skipped ("previous run still running"); keep the jitter under that time`;
}

/** `validate`'s warnings (stderr; it still exits 0) for the routines whose schedules read so,
 * and, given each routine's next fire times (ms), those whose jitter reaches the next fire. */
export function habitWarnings(
  routines: readonly { id: string; schedule: string; jitter?: number }[],
  times?: readonly (readonly number[])[],
): string[] {
  const warnings: string[] = [];
  routines.forEach((r, i) => {
    const w = extraFieldWarning(r.schedule);
    if (w) warnings.push(`routinely: warning: routine ${r.id}: ${w}`);
    const j = r.jitter && times?.[i] ? jitterWarning(r.jitter, times[i]) : null;
    if (j) warnings.push(`routinely: warning: routine ${r.id}: ${j}`);
  });
  return warnings;
}
