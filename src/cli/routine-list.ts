// `routine list` (SPEC §6, §10): its rows, the scheduler line, a table that fits an 80-column
// terminal, `--json` and `--check`, for the command (routine-list-command.ts) whether its routines
// came from the validated config's cache or from validating the config.
//
// Keep this module light: the command loads it at start-up, whose whole budget is a few ms.
// (Over 300 lines: rows, table, --json and --check are one output format.)

import { printable } from '../printable.js';
import { processGone } from '../process/identity.js';
import type { SchedulerState } from '../control/status.js';
import { schedulerLine } from './scheduler-line.js';
import {
  applyFire,
  applyLateFire,
  emptyRecord as emptyRecordOf,
  interruptedFire,
  isLate,
  newestAfterStep,
  type OpenFire,
  type RoutineRecord,
} from '../state/routine-state.js';
import { delayedFor, type DelayedFor, type Phase, type PhaseBoard } from '../state/phases.js';
import { ExitCode } from '../errors.js';
import { err, humanDuration, out, paint, useColor, type Colour, type ZoneTime } from './io.js';
import { shortDuration } from '../duration.js';
import { own } from '../is-object.js';
export { shortDuration };

/** What the config says of a routine; null when not known (the config is invalid or not at hand). */
export interface RoutineFacts {
  id: string;
  schedule: string | null;
  timezone: string | null;
  action: string | null;
  enabled: boolean | null;
  /** The lock it takes: "exec", a named lock, "none" ("exclusive": false). */
  lock: string | null;
}

/** A routine as the list knows it: from the config, or (config invalid) only from the state. */
export interface ListedRoutine extends RoutineFacts {
  starvedAfterSkips: number;
  /** The next fire time in the routine's zone; null when none (disabled, unknown). */
  next: ZoneTime | null;
  /** Not in the config (a reload removed it), listed while a fire of it runs on. */
  removed?: true;
}

/** Whether a scheduler runs for the project, and the words for the first line. */
export interface SchedulerLine {
  running: boolean;
  text: string;
}

/** A `routine list --json` row: the routine-state record plus what the config says, whether it
 * is starved and since when a fire of it is running. */
export type ListRow = RoutineFacts & {
  next_run_at: string | null;
} & Omit<RoutineRecord, 'open_fires'> & {
    /** Its last run failed (`consecutive_failures > 0`), whatever skips came after (SPEC §6). */
    failing: boolean;
    starved: boolean;
    running_since: string | null;
    /** Where a fire of it is now (SPEC §6): held back by its jitter or a retry's back-off
     * (delayed), queued in its scheduler's queue for its lock, waiting for its lock held by
     * someone else, or running; null when none is under way. From the records the scheduler
     * writes (its open marker, its board of phases), never guessed. */
    phase: 'delayed' | 'queued' | 'waiting' | 'running' | null;
    phase_since: string | null;
    /** What it waits for: the routine it is queued behind, the lock and its holder, or the time
     * it is held back until (and why). */
    waiting_for: { behind: string } | { lock: string; holder: string } | DelayedFor | null;
    /** Present (true) on the row of a routine the config no longer has, listed while a fire of
     * it runs on (withRemovedRunning). */
    removed?: true;
  };

/** `routines` and, after them, each routine the config no longer has (a reload removed it) while
 * a fire of it runs on, holding its lock slot, as systemd lists a unit whose file is gone while
 * it runs: no schedule, action or next run, only its record. */
export function withRemovedRunning(
  routines: readonly ListedRoutine[],
  records: Record<string, RoutineRecord>,
  gone: (o: OpenFire['owner']) => boolean = processGone,
): ListedRoutine[] {
  const known = new Set(routines.map((r) => r.id));
  const removed: ListedRoutine[] = [];
  for (const id of Object.keys(records)) {
    if (known.has(id) || runningSince(records[id]!.open_fires, gone) === null) continue;
    removed.push({ ...stateOnlyRoutine(id, Number.POSITIVE_INFINITY), removed: true });
  }
  return removed.length === 0 ? (routines as ListedRoutine[]) : [...routines, ...removed];
}

/** A routine known only from the state (an invalid config, or one the config no longer has):
 * no schedule, action or next run. */
export function stateOnlyRoutine(id: string, starvedAfterSkips: number): ListedRoutine {
  return {
    id,
    schedule: null,
    timezone: null,
    action: null,
    enabled: null,
    lock: null,
    starvedAfterSkips,
    next: null,
  };
}

/** When the oldest fire still in progress started (its process is alive, or lives on another
 * host where it cannot be told); null when none runs. */
export function runningSince(
  open: readonly OpenFire[] | undefined,
  gone: (o: OpenFire['owner']) => boolean = processGone,
): string | null {
  let since: string | null = null;
  for (const o of open ?? []) {
    if (gone(o.owner)) continue;
    if (since === null || o.started_at < since) since = o.started_at;
  }
  return since;
}

/** `record` as a view shows it: a fire whose process is gone (on this host; SIGKILL, a crash)
 * lost its outcome, and shows as the interrupted failure that the next scheduler or `routine
 * run` records (SPEC §6) — not as never having run until then. Nothing is written. */
export function withLostFires(
  record: RoutineRecord,
  gone: (o: OpenFire['owner'], openId: string) => boolean = (o) => processGone(o),
): RoutineRecord {
  const open = record.open_fires;
  if (!open || open.length === 0) return record;
  const lost = open.filter((o) => gone(o.owner, o.id));
  if (lost.length === 0) return record;
  const left = open.filter((o) => !lost.includes(o));
  let shown: RoutineRecord = { ...record };
  if (left.length > 0) shown.open_fires = left;
  else delete shown.open_fires;
  for (const o of lost) {
    const fire = interruptedFire(o);
    // as its record will be folded (history.ts fireLine: newest after a clock step back)
    const late = !newestAfterStep(shown, fire, Date.now()) && isLate(shown, fire);
    shown = late ? applyLateFire(shown, fire) : applyFire(shown, fire);
  }
  return shown;
}

/** Each routine's phase on the boards of the schedulers that live (phases.ts): the newest. */
export function phasesOf(boards: readonly PhaseBoard[]): Record<string, Phase> {
  const out: Record<string, Phase> = {};
  for (const b of boards)
    for (const [id, p] of Object.entries(b.routines)) if (!own(out, id) || rather(p, out[id]!)) out[id] = p;
  return out;
}

/** Of two phases of a routine: a tick queued or waiting (another host's) before a fire held
 * back (its retry waits its back-off here), else the newer. */
const rather = (p: Phase, than: Phase): boolean =>
  (p.phase === 'delayed') !== (than.phase === 'delayed') ? than.phase === 'delayed' : than.since < p.since;

/** The phases views show: the schedulers' boards over the manual fires waiting in their locks'
 * lines (manual-waits.ts), but a manual wait over a fire a board only holds back (delayed):
 * the wait is what goes on now. */
export function withWaits(waits: Record<string, Phase>, boards: Record<string, Phase>): Record<string, Phase> {
  const out = { ...waits };
  for (const [id, p] of Object.entries(boards)) if (!(p.phase === 'delayed' && own(waits, id))) out[id] = p;
  return out;
}

export function listRows(
  routines: readonly ListedRoutine[],
  records: Record<string, RoutineRecord>,
  emptyRecord: () => RoutineRecord,
  phases: Record<string, Phase> = {},
  spooled: (openId: string) => boolean = () => false,
): ListRow[] {
  const lost = (o: OpenFire['owner'], id: string): boolean => processGone(o) && !spooled(id);
  return routines.map((r) => {
    const kept = own(records, r.id);
    const stored = kept ? withLostFires(kept, lost) : undefined;
    const record = stored ?? emptyRecord();
    const starved = r.enabled !== false && record.consecutive_skips >= r.starvedAfterSkips;
    const running = runningSince(record.open_fires);
    const p = own(phases, r.id);
    // a board's phase of the very fire the record shows ended is past (a board written a moment
    // after the record); a later tick's record (a skip, `previous run still running`) is not,
    // nor is a retry of the tick the record shows, queued or waiting since its failed attempt
    // ended (a retry keeps its tick's scheduled time) (and a tick queued while its routine is
    // paused, or disabled in the config, will not fire: at its turn it is dropped)
    const ended =
      p !== undefined &&
      record.last_scheduled_at === p.scheduled_at &&
      !(record.last_finished_at !== null && Date.parse(record.last_finished_at) < Date.parse(p.since));
    const current =
      p && !running && !ended && !(p.phase !== 'waiting' && (record.paused || r.enabled === false)) ? p : undefined;
    const waiting_for =
      current?.phase === 'queued'
        ? { behind: current.behind }
        : current?.phase === 'waiting'
          ? { lock: current.lock, holder: current.holder }
          : current?.phase === 'delayed'
            ? delayedFor(current)
            : null;
    const next_run_at = r.next && r.enabled && !record.paused ? new Date(r.next.at).toISOString() : null;
    // the record's keys (all of them, in its order, but open_fires) after the config's facts:
    // one literal when they are the keys this version writes, in its order (every record it
    // wrote, and the empty one); copied key by key otherwise (a newer writer's). The literal is
    // what buys the list's start-up (issue 52): 2 µs a row, where copying took 8
    const row: ListRow = {
      id: r.id,
      schedule: r.schedule,
      timezone: r.timezone,
      action: r.action,
      enabled: r.enabled,
      lock: r.lock,
      next_run_at,
      last_result: record.last_result,
      last_reason: record.last_reason,
      last_scheduled_at: record.last_scheduled_at,
      last_started_at: record.last_started_at,
      last_finished_at: record.last_finished_at,
      last_duration_ms: record.last_duration_ms,
      last_exit_code: record.last_exit_code,
      last_run_id: record.last_run_id,
      last_success_at: record.last_success_at,
      last_failure_at: record.last_failure_at,
      last_skipped_at: record.last_skipped_at,
      counts: record.counts,
      consecutive_failures: record.consecutive_failures,
      consecutive_skips: record.consecutive_skips,
      paused: record.paused,
      paused_note: record.paused_note,
      failing: record.consecutive_failures > 0,
      starved,
      running_since: running,
      phase: running ? 'running' : (current?.phase ?? null),
      phase_since: running ?? current?.since ?? null,
      waiting_for,
    };
    const shown = stored && !hasRecordKeys(stored) ? copiedRow(row, stored) : row;
    if (r.removed) shown.removed = true;
    return shown;
  });
}

/** The keys of a record as this version writes them, in order: emptyRecord's (the callers pass
 * it; its keys are these, test/cli/routine-list.test.ts). */
const RECORD_KEYS: readonly string[] = Object.keys(emptyRecordOf());

/** Whether `record` has exactly RECORD_KEYS, in that order (and perhaps open_fires). */
function hasRecordKeys(record: RoutineRecord): boolean {
  let i = 0;
  // (for…in: no array of keys a row)
  for (const k in record) {
    if (k === 'open_fires') continue;
    if (k !== RECORD_KEYS[i++]) return false;
  }
  return i === RECORD_KEYS.length;
}

/** `row` with the keys of a record that has other keys than this version's (a newer writer's):
 * every one of them, in its order, in place of this version's. */
function copiedRow(row: ListRow, record: RoutineRecord): ListRow {
  const from = row as unknown as Record<string, unknown>;
  const keys = Object.keys(row);
  const first = keys.indexOf(RECORD_KEYS[0]!);
  const last = keys.indexOf(RECORD_KEYS.at(-1)!);
  const copy: Record<string, unknown> = {};
  for (const k of keys.slice(0, first)) copy[k] = from[k];
  for (const k in record) if (k !== 'open_fires') copy[k] = record[k as keyof RoutineRecord];
  for (const k of keys.slice(last + 1)) copy[k] = from[k];
  return copy as unknown as ListRow;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

/** The next fire time, absolute in the routine's zone and relative: `03:00 GMT+1, in 6h`; a
 * day or more ahead with its weekday (`Mon 04:00 UTC, in 3d`), a week or more with its date
 * (`Dec 25 04:00 UTC, in 25d`). Seconds only when the time has them. */
export function nextText(next: ZoneTime, nowMs: number, countdown = true): string {
  const time = next.time.endsWith(':00') ? next.time.slice(0, 5) : next.time;
  const ahead = next.at - nowMs;
  // the date's parts only when a day or more ahead (most lines of a long list are not)
  const part = (from: number, to: number): number => Number(next.date.slice(from, to));
  let date = '';
  if (ahead >= 7 * 86_400_000) date = `${MONTHS[part(5, 7) - 1]} ${next.date.slice(8, 10)} `;
  else if (ahead >= 86_400_000)
    date = `${WEEKDAYS[new Date(Date.UTC(part(0, 4), part(5, 7) - 1, part(8, 10))).getUTCDay()]} `;
  return `${date}${time}${next.zone ? ` ${next.zone}` : ''}${countdown ? `, in ${shortDuration(Math.max(0, ahead))}` : ''}`;
}

interface Cell {
  text: string;
  /** What the cell says when `text` does not fit, before it is cut with `…`. */
  short?: string;
  colour?: Colour;
}

/** Skips after the last run, in words: `2 skips`. */
const skipsText = (n: number): string => `${n} skip${n === 1 ? '' : 's'}`;

function lastCell(r: ListRow, nowMs: number): Cell {
  if (r.running_since)
    return { text: `running ${humanDuration(Math.max(0, nowMs - Date.parse(r.running_since)))}`, colour: 'cyan' };
  // a time ahead of this clock (recorded before it was stepped back) is said so, not "<1s ago"
  const agoOf = (at: string | null): string => {
    const t = at ? Date.parse(at) : null;
    return t === null
      ? ''
      : t > nowMs + 1000
        ? ` ${shortDuration(t - nowMs)} in the future`
        : ` ${shortDuration(Math.max(0, nowMs - t))} ago`;
  };
  const ago = agoOf(r.last_finished_at);
  // Failing until a run succeeds: skips after a failure never make it look fine (SPEC §6). The
  // time is the failure's; busy skips after it are counted in the cell, other skips (its previous
  // run still running, a missed tick) said by --check (the cell has no room)
  if (r.consecutive_failures > 0) {
    const times = r.consecutive_failures > 1 ? ` x${r.consecutive_failures}` : '';
    const skips =
      r.last_result !== 'skipped'
        ? agoOf(r.last_failure_at ?? r.last_finished_at)
        : r.consecutive_skips > 0
          ? ` (then ${skipsText(r.consecutive_skips)})`
          : agoOf(r.last_failure_at);
    return { text: `failing${times}${skips}`, colour: 'red' };
  }
  // starved on a named lock: which one (SPEC §4.16)
  if (r.starved)
    return {
      text: `starved: ${r.consecutive_skips} skips${r.lock && r.lock !== 'exec' && r.lock !== 'none' ? ` (${r.lock} busy)` : ''}`,
      colour: 'magenta',
    };
  // a fire queued or waiting (a problem above wins in 80 columns: --json and the page show both)
  const since = r.phase_since ? shortDuration(Math.max(0, nowMs - Date.parse(r.phase_since))) : '';
  if (r.waiting_for && 'behind' in r.waiting_for)
    return {
      text: `queued ${since} behind ${r.waiting_for.behind}`,
      short: `queued behind ${r.waiting_for.behind}`,
      colour: 'cyan',
    };
  if (r.waiting_for && 'lock' in r.waiting_for)
    return {
      text: `waiting ${since}: ${r.waiting_for.lock} busy`,
      short: `waiting: ${r.waiting_for.lock} busy`,
      colour: 'yellow',
    };
  if (!r.last_result) return { text: 'never', colour: 'gray' };
  if (r.last_result === 'success') return { text: `ok${ago}`, colour: 'green' };
  if (r.last_result === 'skipped') return { text: `skipped${ago}`, colour: 'yellow' };
  return { text: `failed${ago}`, colour: 'red' };
}

/** `scheduling`: a scheduler runs (else no countdown to a run nobody will start: what would be,
 * as the status page says it). */
function nextCell(r: ListRow, routine: ListedRoutine, nowMs: number, scheduling: boolean): Cell {
  if (r.paused) return { text: `paused${r.paused_note ? `: ${printable(r.paused_note)}` : ''}`, colour: 'yellow' };
  if (r.enabled === false) return { text: 'disabled', colour: 'gray' };
  // held back on purpose: when it fires (its tick's time is past; the next tick's is not next)
  if (r.waiting_for && 'until' in r.waiting_for) {
    const w = r.waiting_for;
    const left = shortDuration(Math.max(0, Date.parse(w.until) - nowMs));
    return w.why === 'jitter'
      ? { text: `jitter, fires in ${left}`, colour: 'cyan' }
      : { text: `retry ${w.attempt} of ${w.of} in ${left}`, colour: 'cyan' };
  }
  if (!routine.next || r.enabled === null) return { text: '-' };
  if (!scheduling) return { text: `none, would be ${nextText(routine.next, nowMs, false)}`, colour: 'gray' };
  return { text: nextText(routine.next, nowMs) };
}

/** Shortens `text` to `width` characters with an ellipsis. */
function cut(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

const HEADER = ['ROUTINE', 'SCHEDULE', 'NEXT', 'LAST', 'OK/FAIL/SKIP'];
const GAP = '  ';
/** Narrowest a shortened column gets, and the order they give way in when the table is too
 * wide: a long pause note first, then the id, the last run (a phase without its duration first),
 * the schedule (a cut schedule says little). */
const MIN = [12, 9, 20, 17, 12];
const SHRINK = [2, 0, 3, 1];

/** The table's lines (no trailing newline), at most `width` columns where the content allows. */
export function renderTable(
  routines: readonly ListedRoutine[],
  rows: readonly ListRow[],
  scheduler: SchedulerLine | null,
  nowMs: number,
  o: { color: boolean; width: number; fromState?: boolean },
): string[] {
  const lines: string[] = [];
  if (scheduler) lines.push(`scheduler: ${scheduler.text}`);
  if (rows.length === 0) {
    lines.push(o.fromState ? 'no routines recorded in the state' : 'no routines in the config');
    return lines;
  }
  const table = rows.map((r, i) => {
    const routine = routines[i]!;
    const schedule = r.schedule ?? (r.removed ? '(removed)' : '-');
    return [
      { text: r.id },
      { text: schedule },
      nextCell(r, routine, nowMs, scheduler?.running !== false),
      lastCell(r, nowMs),
      { text: `${r.counts.success}/${r.counts.failure}/${r.counts.skipped}` },
    ] as Cell[];
  });
  // loops, not spreads and maps over the rows: 1 000 routines' table is made in a cold process
  // (issue 52: `routine list` at start-up)
  const widths = HEADER.map((h) => h.length);
  // a pause note gives way first, but the next times stay whole
  const min = [...MIN];
  min[2] = 12;
  for (let r = 0; r < table.length; r++) {
    const t = table[r]!;
    for (let i = 0; i < t.length; i++) if (t[i]!.text.length > widths[i]!) widths[i] = t[i]!.text.length;
    if (!rows[r]!.paused && t[2]!.text.length > min[2]) min[2] = t[2]!.text.length;
    // a phase drops its duration before it is cut (`queued behind heartbeat`)
    const short = t[3]!.short?.length ?? 0;
    if (short > min[3]!) min[3] = short;
  }
  min[3] = Math.min(20, min[3]!);
  const total = (): number => widths.reduce((a, b) => a + b, 0) + GAP.length * (widths.length - 1);
  // Too wide: shorten NEXT (a long pause note), then ROUTINE, LAST, SCHEDULE, down to their minimum.
  for (const col of SHRINK) {
    const over = total() - o.width;
    if (over <= 0) break;
    widths[col] = Math.max(Math.min(min[col]!, widths[col]!), HEADER[col]!.length, widths[col]! - over);
  }
  const line = (cells: Cell[]): string => {
    let text = '';
    for (let i = 0; i < cells.length; i++) {
      const c = cells[i]!;
      const width = widths[i]!;
      const fits = c.text.length > width && c.short ? c.short : c.text;
      let cell = fits.length <= width ? fits : cut(fits, width);
      if (i < cells.length - 1 && cell.length < width) cell = cell.padEnd(width);
      text += i === 0 ? '' : GAP;
      text += c.colour && o.color ? paint(cell, c.colour, true) : cell;
    }
    return text.trimEnd();
  };
  lines.push(line(HEADER.map((text) => ({ text }))));
  for (const t of table) lines.push(line(t));
  return lines;
}

/** What `--check` fails on (SPEC §10): failed, starved, or no scheduler while routines are
 * enabled. One line each; none when all is well. */
export function checkProblems(rows: readonly ListRow[], scheduler: SchedulerLine | null): string[] {
  const problems: string[] = [];
  // (a routine the config no longer has is not monitored, though a fire of it runs on)
  const watched = rows.filter((r) => !r.removed);
  for (const r of watched) {
    if (r.enabled === false) continue;
    if (r.consecutive_failures > 0) {
      const why =
        r.last_result === 'failure'
          ? printable(r.last_reason ?? 'failed')
          : `${r.consecutive_failures > 1 ? `${r.consecutive_failures} failures in a row, the last` : 'failed'} at ${r.last_failure_at ?? 'an unknown time'}, then ${r.consecutive_skips > 0 ? skipsText(r.consecutive_skips) : `skipped (${printable(r.last_reason ?? 'skipped')})`}`;
      problems.push(`failing routine: ${r.id} (${why})`);
    }
    if (r.starved && !r.paused) problems.push(`starved routine: ${r.id} (${r.consecutive_skips} busy skips in a row)`);
  }
  const enabled = watched.filter((r) => r.enabled !== false && !r.paused).length;
  if (scheduler && !scheduler.running && enabled > 0) {
    problems.push(
      `no scheduler is running (${enabled} enabled routine${enabled === 1 ? '' : 's'} will not fire): start one with \`routinely scheduler start\``,
    );
  }
  return problems;
}

/** The first line, and whether a scheduler runs (`--check`). */
export function schedulerLineOf(state: SchedulerState): SchedulerLine {
  return { running: state.running, text: schedulerLine(state, false).slice('scheduler: '.length) };
}

/** Where the list goes: stdout and stderr lines (collected when stdout is no terminal). */
export interface ListSink {
  out(line: string): void;
  err(line: string): void;
}

const consoleSink: ListSink = { out, err };

/** Prints the list (or its JSON) and answers --check. */
export function printList(
  routines: ListedRoutine[],
  rows: ListRow[],
  scheduler: SchedulerLine,
  nowMs: number,
  flags: { json?: boolean; check?: boolean },
  fromState = false,
  sink: ListSink = consoleSink,
  tty: { isTTY: boolean; columns?: number } = process.stdout,
): number {
  if (flags.json) sink.out(JSON.stringify(rows, null, 2));
  else {
    const width = tty.isTTY && tty.columns ? tty.columns : 80;
    for (const l of renderTable(routines, rows, scheduler, nowMs, { color: useColor(tty), width, fromState }))
      sink.out(l);
  }
  if (!flags.check) return ExitCode.OK;
  const problems = checkProblems(rows, scheduler);
  for (const p of problems) sink.err(`routinely: ${p}`);
  return problems.length > 0 ? ExitCode.FAILED : ExitCode.OK;
}
