// TIME for `routine history --since/--until` (SPEC §10), as `journalctl --since` reads it:
// ISO-8601 (`2026-11-30`, `2026-11-30 22:00`, `2026-11-30T22:00Z`; without a zone this machine's
// local time), a time of today (`10:00`, `10:00:30`), `now`, `today`, `yesterday`, `tomorrow`
// (local midnight), `@EPOCH`, or a span before now: `2h`, `1h30m`, `-1h`, `2h ago`,
// `1 hour ago`, `90 min` (`+1h` is after now). Units: s, m, h, d, w, M (month), y and their
// words (sec, min, hour, day, week, month, year, plural too).

import { UsageError } from '../errors.js';

const SECOND = 1_000;
const DAY = 86_400_000;
const UNITS: [RegExp, number][] = [
  [/^(s|secs?|seconds?)$/, SECOND],
  [/^(m|mins?|minutes?)$/, 60 * SECOND],
  [/^(h|hrs?|hours?)$/, 3_600 * SECOND],
  [/^(d|days?)$/, DAY],
  [/^(w|weeks?)$/, 7 * DAY],
  // systemd's month and year: 30.44 and 365.25 days
  [/^(M|months?)$/, 2_629_800_000],
  [/^(y|years?)$/, 31_557_600_000],
];

function unitMs(unit: string): number | null {
  for (const [re, ms] of UNITS) if (re.test(unit === 'M' ? unit : unit.toLowerCase())) return ms;
  return null;
}

/** `1h30m`, `1 hour 30 min`, `90s`: the span in ms, or null when it is not one. */
function span(text: string): number | null {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) return null;
  let ms = 0;
  for (const p of parts) {
    const unit = unitMs(p[2]!);
    if (unit === null) return null;
    ms += Number(p[1]) * unit;
  }
  return ms;
}

const HINT =
  'give ISO-8601 (2026-11-30, 2026-11-30 22:00, 2026-11-30T22:00Z), a time of today (10:00), today, yesterday, or a span before now (2h, 1h30m, -1h, 2h ago, 1 hour ago)';

/** The time as ms since the epoch; a UsageError naming the flag otherwise. */
export function parseTimeArg(flag: string, text: string, nowMs: number): number {
  const t = text.trim();
  const bad = (): never => {
    throw new UsageError(`${flag} ${JSON.stringify(text)} is not a time: ${HINT}`);
  };
  if (t === '') bad();
  const word = t.toLowerCase();
  if (word === 'now') return nowMs;
  if (word === 'today' || word === 'yesterday' || word === 'tomorrow') {
    const d = new Date(nowMs);
    d.setHours(0, 0, 0, 0);
    d.setDate(d.getDate() + (word === 'yesterday' ? -1 : word === 'tomorrow' ? 1 : 0));
    return d.getTime();
  }
  const epoch = /^@(\d+(?:\.\d+)?)$/.exec(t);
  if (epoch) return Number(epoch[1]) * SECOND;
  // spans: "2h ago", "-1h", "+1h", "2h" (before now, as our views look back)
  const ago = /^(.*\S)\s+ago$/i.exec(t);
  const signed = /^([+-])\s*(.+)$/.exec(t);
  const body = ago ? ago[1]! : signed ? signed[2]! : t;
  const ms = span(body);
  if (ms !== null) return signed?.[1] === '+' && !ago ? nowMs + ms : nowMs - ms;
  if (ago || signed) bad();
  // a time of today, local
  const clock = /^(\d\d?):(\d\d)(?::(\d\d))?$/.exec(t);
  if (clock) {
    const [h, m, s] = [Number(clock[1]), Number(clock[2]), Number(clock[3] ?? 0)];
    if (h > 23 || m > 59 || s > 59) bad();
    const d = new Date(nowMs);
    d.setHours(h, m, s, 0);
    return d.getTime();
  }
  // a date alone is local midnight (Date.parse would read it as UTC)
  const iso = /^\d{4}-\d\d-\d\d$/.test(t) ? `${t}T00:00` : t;
  const at = /^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?)?(Z|[+-]\d\d:?\d\d)?$/i.test(iso)
    ? Date.parse(iso.replace(' ', 'T'))
    : NaN;
  // a day the month does not have (2026-02-31) is refused, not rolled over into March
  const [y, mo, d] = t.slice(0, 10).split('-').map(Number) as [number, number, number];
  const days = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (!Number.isFinite(at) || d > days) bad();
  return at;
}
