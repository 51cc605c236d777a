// Times in a routine's zone, as `routine list` and the scheduler's list cache show them; kept
// out of cli/ so that the scheduler can compute them (nothing below cli/ imports from it).

/** `2026-11-29 20:05:00 GMT+1` in the given zone (machine zone when undefined). */
const formatters = new Map<string, Intl.DateTimeFormat>();

/** A time as `routine list` shows it, in the routine's zone (machine zone when undefined):
 * `{ date: '2026-12-01', time: '03:00:00', zone: 'GMT+1' }`. The scheduler stores these with its
 * next fire times, so `routine list` can show them without loading ICU's zone data. */
export interface ZoneTime {
  at: number;
  date: string;
  time: string;
  zone: string;
}

export function zoneTime(date: Date, timeZone?: string): ZoneTime {
  const [day, time, zone] = formatInZone(date, timeZone).split(' ');
  return { at: date.getTime(), date: day!, time: time!, zone: zone ?? '' };
}

/** The machine's zone, as ICU resolves it (each look builds a formatter, ≈ 0.25 ms: the
 * scheduler's list cache and `validate` ask often); looked up again when TZ changes. */
const zoneByTz = new Map<string, string>();
export function machineZone(): string {
  const tz = process.env.TZ ?? '';
  let zone = zoneByTz.get(tz);
  // a TZ this machine does not know resolves to no zone at all: UTC, as the C library takes it
  if (zone === undefined) zoneByTz.set(tz, (zone = Intl.DateTimeFormat().resolvedOptions().timeZone ?? 'UTC'));
  return zone;
}

/** The one date-and-time format of the views, in a zone (the machine's when undefined), with
 * the zone's short name or without. Self-contained: the status page inlines its source. */
export function zoneFormat(locale: string, timeZone: string | undefined, named: boolean): Intl.DateTimeFormat {
  const name: Intl.DateTimeFormatOptions = named ? { timeZoneName: 'short' } : {};
  return new Intl.DateTimeFormat(locale, {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    ...name,
  });
}

export function formatInZone(date: Date, timeZone?: string): string {
  let fmt = formatters.get(timeZone ?? '');
  if (!fmt) formatters.set(timeZone ?? '', (fmt = zoneFormat('en-CA', timeZone, true)));
  const parts = fmt.formatToParts(date);
  const get = (t: string): string => parts.find((p) => p.type === t)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}:${get('second')} ${get('timeZoneName')}`;
}
