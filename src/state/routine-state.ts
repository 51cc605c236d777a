// `routine-state.json` (SPEC §6): the last result and counters of every routine, and whether it
// is paused. It is an index of the history files (history.ts), which hold the facts; the
// reducers here fold those facts into records, so the index can always be rebuilt (SPEC §3).
// (Over 300 lines: the record's type, its checks and the reducers that must agree with them.)

import { isObj } from '../is-object.js';

/** A pause note's length at most, in characters (code points): `routine pause --note` and the
 * HTTP pause action alike. */
export const PAUSE_NOTE_MAX = 500;

export type RoutineResult = 'success' | 'failure' | 'skipped';

export interface RoutineRecord {
  last_result: RoutineResult | null;
  last_reason: string | null;
  last_scheduled_at: string | null;
  last_started_at: string | null;
  last_finished_at: string | null;
  last_duration_ms: number | null;
  last_exit_code: number | null;
  last_run_id: string | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  last_skipped_at: string | null;
  counts: { success: number; failure: number; skipped: number };
  consecutive_failures: number;
  /** Busy skips since the routine last ran (success or failure): ticks that met the exec lock
   * held by something else; at the routine's `starvedAfterSkips` it is starved (SPEC §10). A
   * tick skipped because its own previous run still goes (or the scheduler stopped) is counted
   * in `counts.skipped` but not here: the routine is not kept from running. */
  consecutive_skips: number;
  paused: boolean;
  paused_note: string | null;
  /** Fires that have started and not been recorded yet (SPEC §6: each is recorded exactly once,
   * by its own process or, when that process is gone, by the next one that reconciles). */
  open_fires?: OpenFire[];
}

/** A fire in progress: written before its work starts, closed by the fire's record. */
export interface OpenFire {
  id: string;
  scheduled_at: string;
  started_at: string;
  run_id: string | null;
  trigger: 'schedule' | 'manual' | 'retry';
  attempt?: number;
  /** The process that runs it (a scheduler, or `routine run`); a scheduler that claimed the tick
   * on a shared database names its claimer (its lease): gone, another host records the fire. */
  owner: {
    pid: number;
    host: string;
    boot_id: string | null;
    start_time: string | null;
    pid_ns?: string | null;
    claimer?: string;
  };
}

export interface RoutineStateFile {
  version: 1;
  routines: Record<string, RoutineRecord>;
}

/** One firing of a routine, as recorded in state and history. */
export interface Fire {
  result: RoutineResult;
  reason: string | null;
  scheduled_at: string;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  exit_code: number | null;
  run_id: string | null;
  trigger?: 'schedule' | 'manual' | 'retry';
  attempt?: number;
  /** Who started a manual fire, or stopped one: `cli, pid 4711`, `http, 127.0.0.1`. */
  by?: string;
  /** The open fire this record closes. */
  closes?: string;
  /** Identifies a record that closes no open fire (a skip, a fire that could not start), so
   * that recording it again after a lost answer from the database stores it once. */
  key?: string;
  /** The fire never started (its open marker's answer was lost, or writing it failed): the
   * marker it closes may never have been stored. Not a history field; the spool keeps it. */
  unstarted?: true;
}

export const emptyState = (): RoutineStateFile => ({ version: 1, routines: {} });

export const emptyRecord = (): RoutineRecord => ({
  last_result: null,
  last_reason: null,
  last_scheduled_at: null,
  last_started_at: null,
  last_finished_at: null,
  last_duration_ms: null,
  last_exit_code: null,
  last_run_id: null,
  last_success_at: null,
  last_failure_at: null,
  last_skipped_at: null,
  counts: { success: 0, failure: 0, skipped: 0 },
  consecutive_failures: 0,
  consecutive_skips: 0,
  paused: false,
  paused_note: null,
});

/** Whether a skip is one that starves the routine: its lock was busy (`exec busy`, or `<name>
 * busy` for a named lock: held by something else, or not freed within a wait). Its own previous
 * run still going is not starvation. */
export const starvingSkip = (fire: Pick<Fire, 'result' | 'reason'>): boolean =>
  fire.result === 'skipped' && /^[a-z0-9][a-z0-9_-]* busy\b/.test(fire.reason ?? 'exec busy');

const INTERRUPTED = 'interrupted: ';

/** Whether a fire is one whose outcome was lost with its process (interruptedFire): its duration
 * is not known. */
export const isInterrupted = (fire: Pick<Fire, 'result' | 'reason'>): boolean =>
  fire.result === 'failure' && fire.reason !== null && fire.reason.startsWith(INTERRUPTED);

/** Records one fire. A skip never counts as a failure and leaves `consecutive_failures` alone. */
export function applyFire(prior: RoutineRecord | undefined, fire: Fire): RoutineRecord {
  const r = prior ?? emptyRecord();
  const next: RoutineRecord = {
    ...r,
    last_result: fire.result,
    last_reason: fire.reason,
    last_scheduled_at: fire.scheduled_at,
    last_started_at: fire.started_at,
    last_finished_at: fire.finished_at,
    last_duration_ms: isInterrupted(fire) ? null : fire.duration_ms,
    last_exit_code: fire.exit_code,
    last_run_id: fire.run_id,
    counts: { ...r.counts },
  };
  switch (fire.result) {
    case 'success':
      next.counts.success++;
      next.last_success_at = fire.finished_at;
      next.consecutive_failures = 0;
      next.consecutive_skips = 0;
      break;
    case 'failure':
      next.counts.failure++;
      next.last_failure_at = fire.finished_at;
      next.consecutive_failures = r.consecutive_failures + 1;
      next.consecutive_skips = 0;
      break;
    case 'skipped':
      next.counts.skipped++;
      next.last_skipped_at = fire.finished_at;
      next.consecutive_skips = (r.consecutive_skips ?? 0) + (starvingSkip(fire) ? 1 : 0);
      break;
  }
  return next;
}

/** Records a fire that reaches the record after a newer one (it waited in the spool through a
 * database outage, SPEC §6): it counts, but the last result stays the newer fire's, so a
 * failure recorded meanwhile still shows in `routine list --check`. A run that began after
 * every run on record had ended is the newest run all the same — a run that outlasts its
 * interval is recorded after the ticks skipped while it ran ("previous run still running"): its
 * outcome is whether the routine is failing (SPEC §6: until a run succeeds) or starved. */
export function applyLateFire(prior: RoutineRecord, fire: Fire): RoutineRecord {
  const later = (a: string | null, b: string): string => (a !== null && a > b ? a : b);
  const next: RoutineRecord = { ...prior, counts: { ...prior.counts } };
  if (fire.result !== 'skipped' && newestRun(prior, fire)) {
    next.consecutive_failures = fire.result === 'failure' ? prior.consecutive_failures + 1 : 0;
    // busy skips recorded after it ended (another process's, while it waited in a spool) still
    // count towards starving
    if (prior.last_skipped_at === null || Date.parse(prior.last_skipped_at) <= Date.parse(fire.finished_at))
      next.consecutive_skips = 0;
  }
  if (fire.result === 'success') {
    next.counts.success++;
    next.last_success_at = later(prior.last_success_at, fire.finished_at);
  } else if (fire.result === 'failure') {
    next.counts.failure++;
    next.last_failure_at = later(prior.last_failure_at, fire.finished_at);
  } else {
    next.counts.skipped++;
    next.last_skipped_at = later(prior.last_skipped_at, fire.finished_at);
  }
  return next;
}

/** Whether `fire` began once every run on record had ended (runs of a routine by one process
 * never overlap: a run that began before another ended is the older). */
function newestRun(prior: RoutineRecord, fire: Fire): boolean {
  const began = Date.parse(fire.started_at);
  return [prior.last_success_at, prior.last_failure_at].every((t) => t === null || Date.parse(t) <= began);
}

/** Whether `fire`, recorded at `nowMs`, is the newest fire whatever its times: the fire the record
 * shows last started over a second in the future (the wall clock stepped back since) and this one
 * did not (a fire of the fast clock still finishing is not). HistoryEntry.newest. */
export const newestAfterStep = (
  prior: Pick<RoutineRecord, 'last_started_at'> | null | undefined,
  fire: Pick<Fire, 'started_at'>,
  nowMs: number,
): boolean =>
  prior?.last_started_at != null &&
  Date.parse(prior.last_started_at) - nowMs > 1_000 &&
  Date.parse(fire.started_at) - nowMs <= 1_000;

/** Whether `fire` started before the fire the record shows last, or is of an earlier tick (a
 * fire that waited for its lock, or a retry, starts after the ticks it made skip: its record
 * never takes the last tick back, which catch-up reads). */
export const isLate = (prior: RoutineRecord | undefined, fire: Fire): boolean =>
  (prior?.last_started_at != null && Date.parse(fire.started_at) < Date.parse(prior.last_started_at)) ||
  (prior?.last_scheduled_at != null && Date.parse(fire.scheduled_at) < Date.parse(prior.last_scheduled_at));

const ISO = (v: unknown): v is string => typeof v === 'string' && v.length <= 40 && Number.isFinite(Date.parse(v));
const SHORT = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

/** A fire read back from outside (a spool file, SPEC §12): every field checked; null when it is
 * not one. */
export function checkFire(v: unknown): Fire | null {
  if (!isObj(v)) return null;
  if (v.result !== 'success' && v.result !== 'failure' && v.result !== 'skipped') return null;
  if (!ISO(v.scheduled_at) || !ISO(v.started_at) || !ISO(v.finished_at)) return null;
  if (v.reason !== null && !SHORT(v.reason, 8192)) return null;
  if (v.run_id !== null && !(SHORT(v.run_id, 128) && /^[A-Za-z0-9._-]+$/.test(v.run_id))) return null;
  if (v.exit_code !== null && !Number.isSafeInteger(v.exit_code)) return null;
  if (!Number.isFinite(v.duration_ms) || (v.duration_ms as number) < 0) return null;
  const token = (x: unknown): x is string => typeof x === 'string' && /^[0-9a-f]{1,64}$/.test(x);
  if (v.closes !== undefined && !token(v.closes)) return null;
  if (v.key !== undefined && !token(v.key)) return null;
  return {
    result: v.result,
    reason: v.reason as string | null,
    scheduled_at: v.scheduled_at,
    started_at: v.started_at,
    finished_at: v.finished_at,
    duration_ms: v.duration_ms as number,
    exit_code: v.exit_code as number | null,
    run_id: v.run_id as string | null,
    ...(v.trigger === 'schedule' || v.trigger === 'manual' || v.trigger === 'retry' ? { trigger: v.trigger } : {}),
    ...(Number.isSafeInteger(v.attempt) && (v.attempt as number) > 0 ? { attempt: v.attempt as number } : {}),
    ...(isBy(v.by) ? { by: v.by } : {}),
    ...(v.closes !== undefined ? { closes: v.closes } : {}),
    ...(v.key !== undefined ? { key: v.key } : {}),
    ...(v.unstarted === true ? { unstarted: true as const } : {}),
  };
}

export function setPaused(prior: RoutineRecord | undefined, paused: boolean, note: string | null): RoutineRecord {
  return { ...(prior ?? emptyRecord()), paused, paused_note: paused ? note : null };
}

const count = (v: unknown): number => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : 0);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const isCountValue = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
const isStrOrNull = (v: unknown): boolean => v === null || typeof v === 'string';

const RECORD_KEYS: readonly string[] = Object.keys(emptyRecord());
const COUNT_KEYS: readonly string[] = Object.keys(emptyRecord().counts);

/** Whether `rec` is a record as this version writes it — these keys in this order (no open
 * fires), every value valid — which checkRecord would copy unchanged: used as it is (no copy of
 * 1 000 records, and their garbage, in a short command; issue 52). */
function asWritten(rec: Record<string, unknown>): boolean {
  let i = 0;
  for (const k in rec) if (k !== RECORD_KEYS[i++]) return false;
  const c = rec.counts;
  if (i !== RECORD_KEYS.length || !isObj(c)) return false;
  let n = 0;
  for (const k in c) if (k !== COUNT_KEYS[n++]) return false;
  return (
    n === COUNT_KEYS.length &&
    (rec.last_result === null ||
      rec.last_result === 'success' ||
      rec.last_result === 'failure' ||
      rec.last_result === 'skipped') &&
    isStrOrNull(rec.last_reason) &&
    isStrOrNull(rec.last_scheduled_at) &&
    isStrOrNull(rec.last_started_at) &&
    isStrOrNull(rec.last_finished_at) &&
    (rec.last_duration_ms === null || Number.isFinite(rec.last_duration_ms)) &&
    (rec.last_exit_code === null || Number.isInteger(rec.last_exit_code)) &&
    isStrOrNull(rec.last_run_id) &&
    isStrOrNull(rec.last_success_at) &&
    isStrOrNull(rec.last_failure_at) &&
    isStrOrNull(rec.last_skipped_at) &&
    isCountValue(c.success) &&
    isCountValue(c.failure) &&
    isCountValue(c.skipped) &&
    isCountValue(rec.consecutive_failures) &&
    isCountValue(rec.consecutive_skips) &&
    typeof rec.paused === 'boolean' &&
    isStrOrNull(rec.paused_note)
  );
}

/** One record, every field checked (a garbled value becomes its empty default); null when it is
 * not a record at all. One literal in emptyRecord's key order, then any field a later version
 * added (a loop of keyed stores and Object.entries cost 3 ms of reading 1 000 records in a short
 * command, issue 52). */
export function checkRecord(rec: unknown): RoutineRecord | null {
  if (!isObj(rec)) return null;
  if (asWritten(rec)) return rec as unknown as RoutineRecord;
  const c = isObj(rec.counts) ? rec.counts : {};
  const out: RoutineRecord = {
    last_result:
      rec.last_result === 'success' || rec.last_result === 'failure' || rec.last_result === 'skipped'
        ? rec.last_result
        : null,
    last_reason: str(rec.last_reason),
    last_scheduled_at: str(rec.last_scheduled_at),
    last_started_at: str(rec.last_started_at),
    last_finished_at: str(rec.last_finished_at),
    last_duration_ms: Number.isFinite(rec.last_duration_ms) ? (rec.last_duration_ms as number) : null,
    last_exit_code: Number.isInteger(rec.last_exit_code) ? (rec.last_exit_code as number) : null,
    last_run_id: str(rec.last_run_id),
    last_success_at: str(rec.last_success_at),
    last_failure_at: str(rec.last_failure_at),
    last_skipped_at: str(rec.last_skipped_at),
    counts: { success: count(c.success), failure: count(c.failure), skipped: count(c.skipped) },
    consecutive_failures: count(rec.consecutive_failures),
    consecutive_skips: count(rec.consecutive_skips),
    paused: rec.paused === true,
    paused_note: str(rec.paused_note),
  };
  if (Array.isArray(rec.open_fires)) {
    const open = rec.open_fires.map(checkOpenFire).filter((o): o is OpenFire => o !== null);
    if (open.length > 0) out.open_fires = open;
  }
  // fields added by later versions are kept (open_fires is this version's: only the checked ones)
  for (const k of Object.keys(rec))
    if (!(k in out) && k !== 'open_fires') (out as unknown as Record<string, unknown>)[k] = rec[k];
  return out;
}

/** An open fire, every field checked; null when it is not one. */
export function checkOpenFire(v: unknown): OpenFire | null {
  if (!isObj(v) || typeof v.id !== 'string' || typeof v.scheduled_at !== 'string' || typeof v.started_at !== 'string')
    return null;
  if (v.run_id !== null && typeof v.run_id !== 'string') return null;
  const o = v.owner;
  if (!isObj(o) || !Number.isSafeInteger(o.pid) || (o.pid as number) < 1 || typeof o.host !== 'string') return null;
  const strOrNull = (x: unknown): string | null => (typeof x === 'string' ? x : null);
  return {
    id: v.id,
    scheduled_at: v.scheduled_at,
    started_at: v.started_at,
    run_id: v.run_id as string | null,
    trigger: v.trigger === 'manual' || v.trigger === 'retry' ? v.trigger : 'schedule',
    ...(Number.isSafeInteger(v.attempt) ? { attempt: v.attempt as number } : {}),
    owner: {
      pid: o.pid as number,
      host: o.host,
      boot_id: strOrNull(o.boot_id),
      start_time: strOrNull(o.start_time),
      pid_ns: strOrNull(o.pid_ns),
      ...(typeof o.claimer === 'string' ? { claimer: o.claimer } : {}),
    },
  };
}

/** The record of a fire whose outcome was lost with its process (SPEC §6). When the process died
 * is not known (it was found gone later, by whoever looked): the fire is dated at its start, with
 * no duration — the same in every view, before and after it is recorded, and never the time of
 * the look (which moved with each one) or a duration that counts the time nobody ran. */
export function interruptedFire(open: OpenFire): Fire {
  return {
    result: 'failure',
    reason: `${INTERRUPTED}pid ${open.owner.pid} on ${open.owner.host} ended before the outcome was recorded`,
    scheduled_at: open.scheduled_at,
    started_at: open.started_at,
    finished_at: open.started_at,
    duration_ms: 0,
    exit_code: null,
    run_id: open.run_id,
    trigger: open.trigger,
    ...(open.attempt ? { attempt: open.attempt } : {}),
    closes: open.id,
  };
}

/** Validates the file's shape; every record checked field by field. */
export function checkRoutineState(v: unknown): RoutineStateFile | string {
  if (!isObj(v)) return 'not an object';
  if (v.version !== 1) return `unknown version ${JSON.stringify(v.version)}`;
  if (!isObj(v.routines)) return 'no "routines" object';
  const routines: Record<string, RoutineRecord> = {};
  for (const [id, rec] of Object.entries(v.routines)) {
    const checked = checkRecord(rec);
    if (!checked) return `routines.${id} is not an object`;
    routines[id] = checked;
  }
  return { version: 1, routines };
}

/** A routine's record folded from its history lines, with the ids of the newest lines. */
export interface Folded {
  record: RoutineRecord;
  recent: string[];
}

const RECENT_KEPT = 64;

/** Folds history lines (history.ts) on top of `base`: a summary line starts over from the record
 * it carries, a fire applies, a pause or resume sets the paused state. A line whose id was
 * already folded (re-appended across a rotation) counts once. Pure. */
export function foldLines(lines: readonly HistoryLineLike[], base?: Folded): Folded {
  let record = base?.record ?? emptyRecord();
  let recent = [...(base?.recent ?? [])];
  let seen = new Set(recent);
  for (const l of lines) {
    if (l.kind === 'summary') {
      record = l.record;
      recent = [...l.recent];
      seen = new Set(recent);
      continue;
    }
    if (l.id) {
      if (seen.has(l.id)) continue;
      seen.add(l.id);
      recent.push(l.id);
      if (recent.length > RECENT_KEPT) recent.shift();
    }
    if (l.kind === 'open') {
      record = { ...record, open_fires: [...(record.open_fires ?? []).filter((o) => o.id !== l.open.id), l.open] };
      continue;
    }
    if (l.kind === 'fire') {
      const e = l.entry;
      if (e.closes) {
        // a second record of a fire already closed (two reconciles at once, a reconcile that
        // judged a stale read): the first counts, as the database backend stores it once
        if (seen.has(e.closes) && !(record.open_fires ?? []).some((o) => o.id === e.closes)) continue;
        const closed = (record.open_fires ?? []).find((o) => o.id === e.closes);
        const left = (record.open_fires ?? []).filter(
          (o) => o.id !== e.closes && !(closed && closesEarlier(closed, o)),
        );
        record = { ...record, open_fires: left };
        if (left.length === 0) delete record.open_fires;
      }
      const fire: Fire = {
        result: e.result,
        reason: e.reason ?? null,
        scheduled_at: e.scheduled_at,
        started_at: e.started_at,
        finished_at: e.finished_at,
        duration_ms: Math.max(0, Date.parse(e.finished_at) - Date.parse(e.started_at)) || 0,
        exit_code: e.exit_code ?? null,
        run_id: e.run_id ?? null,
      };
      // One rule for every view: the last result is the newest fire's. A fire recorded after a
      // newer one (an old fire's outcome reconciled late, a record that waited in a spool)
      // counts, and never becomes the last result — unless it was recorded while that newer one
      // lay in the recorder's future (`newest`: the wall clock stepped back since, SPEC §6 clock
      // steps), when it is the newest however its times compare.
      record = !e.newest && isLate(record, fire) ? applyLateFire(record, fire) : applyFire(record, fire);
    } else {
      record = setPaused(record, l.paused, l.note);
    }
  }
  return { record, recent };
}

/**
 * Whether closing `later` ends `earlier` too: both are ticks (or retries) of one scheduler
 * process, which never runs two fires of a routine at once, and `earlier` started first — so it
 * ended before `later` began, and its own record was lost (a damaged history line). Its outcome
 * is unknown: it is neither running nor a failure, and the damaged line was said when read.
 */
function closesEarlier(later: OpenFire, earlier: OpenFire): boolean {
  const tick = (o: OpenFire): boolean => o.trigger === 'schedule' || o.trigger === 'retry';
  return (
    tick(later) &&
    tick(earlier) &&
    earlier.owner.pid === later.owner.pid &&
    earlier.owner.host === later.owner.host &&
    earlier.owner.start_time === later.owner.start_time &&
    Date.parse(earlier.started_at) < Date.parse(later.started_at)
  );
}

/** The shape foldLines needs (history.ts's HistoryLine), stated here to keep imports one-way. */
export type HistoryLineLike =
  | {
      kind: 'fire';
      id: string | null;
      entry: {
        scheduled_at: string;
        started_at: string;
        finished_at: string;
        result: RoutineResult;
        reason?: string | null;
        exit_code?: number | null;
        run_id?: string | null;
        closes?: string;
        newest?: true;
      };
    }
  | { kind: 'open'; id: string | null; open: OpenFire }
  | { kind: 'pause'; id: string | null; paused: boolean; note: string | null; at: string }
  | { kind: 'summary'; id: string | null; record: RoutineRecord; recent: string[]; at: string };

/** Who started a fire, as a record may say it: short and printable. */
export const isBy = (x: unknown): x is string =>
  typeof x === 'string' && x.length > 0 && x.length <= 200 && !/[\u0000-\u001f\u007f]/.test(x);
