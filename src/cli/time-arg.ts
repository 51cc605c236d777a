// TIME for `routine history --since/--until` (SPEC §10): ISO-8601 (`2026-11-30`,
// `2026-11-30T22:00`, with or without a zone; without one it is this machine's local time, as
// journalctl reads it), or relative to now (`30m`, `2h`, `1d`, `1w`), or `today` / `yesterday`
// (local midnight).

import { UsageError } from '../errors.js';

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** The time as ms since the epoch; a UsageError naming the flag otherwise. */
export function parseTimeArg(flag: string, text: string, nowMs: number): number {
  const t = text.trim();
  const rel = /^(\d+(?:\.\d+)?)\s*([smhdw])$/i.exec(t);
  if (rel) return nowMs - Number(rel[1]) * UNITS[rel[2]!.toLowerCase()]!;
  const word = t.toLowerCase();
  if (word === 'now') return nowMs;
  if (word === 'today' || word === 'yesterday') {
    const d = new Date(nowMs);
    d.setHours(0, 0, 0, 0);
    if (word === 'yesterday') d.setDate(d.getDate() - 1);
    return d.getTime();
  }
  // a date alone is local midnight (Date.parse would read it as UTC)
  const iso = /^\d{4}-\d\d-\d\d$/.test(t) ? `${t}T00:00` : t;
  const ms = /^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?)?(Z|[+-]\d\d:?\d\d)?$/i.test(iso) ? Date.parse(iso.replace(' ', 'T')) : NaN;
  // a day the month does not have (2026-02-31) is refused, not rolled over into March
  const [y, mo, d] = t.slice(0, 10).split('-').map(Number) as [number, number, number];
  const days = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (!Number.isFinite(ms) || d > days) {
    throw new UsageError(`${flag} ${JSON.stringify(text)} is not a time: give ISO-8601 (2026-11-30, 2026-11-30T22:00, 2026-11-30T22:00Z), or 30m, 2h, 1d, 1w ago, or today, yesterday`);
  }
  return ms;
}
