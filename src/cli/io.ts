// Terminal output helpers for the CLI layer.

export const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

export const err = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** Colour only on a TTY and only when NO_COLOR is unset (https://no-color.org). */
export function useColor(stream: { isTTY?: boolean } = process.stdout): boolean {
  return Boolean(stream.isTTY) && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
}

const codes = { red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36, gray: 90, bold: 1 } as const;
export type Colour = keyof typeof codes;

export function paint(text: string, colour: Colour, enabled: boolean): string {
  return enabled ? `\x1b[${codes[colour]}m${text}\x1b[0m` : text;
}

/** "3s", "4m 10s", "2h 5m", "3d 4h". */
export function humanDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 10_000) return `${(abs / 1000).toFixed(1)}s`;
  const s = Math.round(abs / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m}m ${s % 60}s` : `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 ? `${h}h ${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d}d ${h % 24}h` : `${d}d`;
}

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

export function formatInZone(date: Date, timeZone?: string): string {
  let fmt = formatters.get(timeZone ?? '');
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-CA', {
      timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit',
      second: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
    });
    formatters.set(timeZone ?? '', fmt);
  }
  const parts = fmt.formatToParts(date);
  const get = (t: string): string => parts.find((p) => p.type === t)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}:${get('second')} ${get('timeZoneName')}`;
}
