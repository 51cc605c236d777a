// One fire's record as a history line or a database row holds it (SPEC §12: input, whoever
// wrote it): checked field by field and rebuilt from the fields it may have.

import { isBy, type RoutineResult } from './routine-state.js';

/** One fire, as `routine history` shows it. */
export interface HistoryEntry {
  scheduled_at: string;
  started_at: string;
  finished_at: string;
  result: RoutineResult;
  reason: string | null;
  exit_code: number | null;
  run_id: string | null;
  /** What started it: the schedule, a person (`routine run`), or a retry. */
  trigger?: 'schedule' | 'manual' | 'retry';
  attempt?: number;
  /** Who started it by hand: `cli, pid 4711`, `http, 127.0.0.1`. */
  by?: string;
  /** Unique per line. */
  id?: string;
  /** The open fire (its `open` line's id) this entry records. */
  closes?: string;
  /** The record's own id when it closes no open fire (Fire.key). */
  key?: string;
  /** When the line was appended, if that was more than LATE_LINE_MS after the fire finished (a
   * record retried through a full disk): readers from the end stop by it (recent-fires.ts). */
  recorded_at?: string;
  /** Recorded while the fire shown last had started in the recorder's future (the wall clock
   * stepped back since): the newest fire whatever its times (routine-state.ts foldLines). */
  newest?: true;
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const RESULTS = new Set(['success', 'failure', 'skipped']);
const TRIGGERS = new Set(['schedule', 'manual', 'retry']);

/** The longest reason kept from a line or row; ours are short, a longer one was written by hand. */
export const REASON_MAX = 1_000;
/** A time (ours are toISOString's 24 characters) and an id: short strings. */
const isTime = (v: unknown): v is string => typeof v === 'string' && v.length <= 64;
const isToken = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 256;

/**
 * One fire's record from a history line or a database row (SPEC §12: input, whoever wrote it),
 * rebuilt from the fields it may have, each checked: null when it is not a fire. A reason past
 * REASON_MAX is cut (with `…`); fields it may lack and that are not what they should be are left
 * out. Nothing else of the value is kept, so no view shows more than the record says.
 */
export function checkFireEntry(v: unknown): HistoryEntry | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (!isTime(o.scheduled_at) || !isTime(o.started_at) || !isTime(o.finished_at) || !RESULTS.has(o.result as string))
    return null;
  const reason = o.reason ?? null;
  const runId = o.run_id ?? null;
  const exit = o.exit_code ?? null;
  if ((reason !== null && !isStr(reason)) || (runId !== null && !isToken(runId))) return null;
  if (exit !== null && !(Number.isSafeInteger(exit) && Math.abs(exit as number) <= 0xffff)) return null;
  return {
    scheduled_at: o.scheduled_at,
    started_at: o.started_at,
    finished_at: o.finished_at,
    result: o.result as HistoryEntry['result'],
    reason: reason !== null && reason.length > REASON_MAX ? `${reason.slice(0, REASON_MAX)}…` : reason,
    exit_code: exit as number | null,
    run_id: runId,
    ...(TRIGGERS.has(o.trigger as string) ? { trigger: o.trigger as HistoryEntry['trigger'] } : {}),
    ...(Number.isSafeInteger(o.attempt) && (o.attempt as number) > 0 ? { attempt: o.attempt as number } : {}),
    ...(isBy(o.by) ? { by: o.by } : {}),
    ...(isToken(o.id) ? { id: o.id } : {}),
    ...(isToken(o.closes) ? { closes: o.closes } : {}),
    ...(isToken(o.key) ? { key: o.key } : {}),
    ...(isTime(o.recorded_at) ? { recorded_at: o.recorded_at } : {}),
    ...(o.newest === true ? { newest: true as const } : {}),
  };
}
