// Spans of time as people read them: the formatters of every view (the CLI, the pages, the
// run lines, the logs, the lock's and the database's messages), in a module that depends on
// nothing. Five forms, each for its reader: humanDuration for views, shortDuration for one-unit
// columns, tenthsOfSeconds for what a run took (logs, records), seconds for settings and ages in
// messages, stepText for a clock step in the scheduler's log.

/** The one formatter of spans in every view (cli/io.ts re-exports it). Self-contained: the
 * pages' script carries its source (page-script.ts). */
// "3.2s" under 10 s, then "42s", "4m 10s", "2h 5m", "3d 4h" (the sign is dropped).
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

/** One unit, rounded, as `systemctl list-timers` would: `<1s`, `45s`, `12m`, `6h`, `3d`. */
export function shortDuration(ms: number): string {
  if (ms < 1000) return '<1s';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.round(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.round(h / 24)}d`;
}

/** Seconds to the tenth, as a log line or a record says what a run took: `3.0s`, `62.4s` (never
 * minutes: a log line is read beside timestamps). */
export const tenthsOfSeconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** Seconds with no more digits than they need, to the tenth: `4s`, `2.5s` (a TTL, a time-out, a
 * heartbeat's age in a lock's or the database's message). */
export const seconds = (ms: number): string => `${Math.round(ms / 100) / 10}s`;

/** `2h0m0s`, `3m20s`, `45s` (whole seconds, as the log shows a clock step). */
export function stepText(ms: number): string {
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h}h${m}m${s % 60}s`;
  if (m > 0) return `${m}m${s % 60}s`;
  return `${s}s`;
}
