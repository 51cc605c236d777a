// Run state (SPEC §5): a snapshot (`run.json`) plus an append-only journal of events. Recording
// one task transition is one appended line, whatever the size of the run; the snapshot is
// rewritten only when a run starts, resumes and ends. Every event carries the lock generation of
// its writer, and a reader ignores events older than the newest generation it has seen: a
// holder that lost the lock can append, never overwrite a newer holder's state (SPEC §4.7).

import { TASK_STATUSES, type TaskStatus } from './registry.js';
import type { ProcessIdentity } from '../process/identity.js';
import { own } from '../is-object.js';

export const RUN_STATUSES = ['RUNNING', 'SUCCEEDED', 'FAILED', 'ABORTED', 'INTERRUPTED'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export type WhyCode =
  | 'LOCK_LOST'
  | 'LOCK_CONFLICT'
  | 'TASK_FAILED'
  | 'TASK_TIMEOUT'
  | 'INTERRUPTED'
  | 'OWNER_DEAD'
  | 'DEPENDENCY_FAILED'
  | 'SPAWN_FAILED'
  | 'RUN_TIMEOUT'
  | 'RETIRED'
  | 'SUCCEEDED_SINCE'
  | 'STATE_WRITE_FAILED'
  | 'LOG_WRITE_FAILED'
  | 'NOT_RECORDED';

/** Explainability for every non-success (SPEC §5). */
export interface Why {
  why_code: WhyCode;
  why: string;
  next: string;
}

export interface TaskRun extends Partial<Why> {
  status: TaskStatus;
  provider: string;
  /** Times started within this run (resume starts unfinished tasks again). */
  attempts: number;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
  exit_code: number | null;
  signal: string | null;
  /** Log file name inside the run folder. */
  log: string;
  /** Bytes of the task's output left out of its log (retention.runLogBytes; absent: none). */
  output_cut_bytes?: number;
  /** Bytes of the task's output that could not be written to its log (a full disk; absent:
   * none): a task that succeeded all the same keeps its success, and says so. */
  output_lost_bytes?: number;
  /** Definition hash when the task joined the run. */
  hash: string;
  /** Lock generation of the writer that last set this task's status (the registry folds a task
   * only from a generation at least as new as the one it has: SPEC §4.7); cut off: its start's. */
  gen?: number;
}

export interface RunState extends Partial<Why> {
  version: 1;
  run_id: string;
  status: RunStatus;
  command: string;
  routine: string | null;
  /** Lock generation of the newest writer (fencing token). */
  generation: number;
  lock_id: string;
  owner: ProcessIdentity;
  /** 1 for the first execution, +1 per resume. */
  attempt: number;
  parallel: number;
  created_at: string;
  /** When the latest resume began (absent before the first resume): a resumed run's duration
   * is counted from here, not from `created_at`. */
  resumed_at?: string;
  updated_at: string;
  finished_at: string | null;
  tasks: Record<string, TaskRun>;
}

interface EventBase {
  gen: number;
  at: string;
}

export type RunEvent =
  /** The run as created: the journal alone can rebuild the run if run.json is lost. */
  | (EventBase & { type: 'run-created'; state: RunState })
  | (EventBase & { type: 'task-started'; task: string })
  | (EventBase & {
      type: 'task-finished';
      task: string;
      status: TaskStatus;
      exit_code: number | null;
      signal: string | null;
      duration_ms: number | null;
      /** Output left out of the task's log (retention.runLogBytes). */
      output_cut_bytes?: number;
      /** Output that could not be written to the task's log (a full disk). */
      output_lost_bytes?: number;
    } & Partial<Why>)
  | (EventBase & { type: 'run-finished'; status: RunStatus } & Partial<Why>)
  | (EventBase & {
      type: 'run-resumed';
      lock_id: string;
      owner: ProcessIdentity;
      command: string;
      routine: string | null;
      parallel: number;
      /** Tasks set back to pending (all but those that succeeded), with their current hashes. */
      reset: Record<string, string>;
    });

const LOCK_ID = /^[0-9a-f]{32}$/;
const EVENT_TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const TEXT_CAP = 8192;
const str = (v: unknown, cap = TEXT_CAP): v is string => typeof v === 'string' && v.length <= cap;
const strOrNull = (v: unknown, cap = TEXT_CAP): boolean => v === null || v === undefined || str(v, cap);
const intOrNull = (v: unknown): boolean => v === null || v === undefined || Number.isSafeInteger(v);

/** Why an owner read from a record cannot be believed, or null (SPEC §12): a pid of 0 or 1 would
 * make a run look alive for ever (and name every process to signal). */
export function ownerProblem(o: unknown): string | null {
  if (!o || typeof o !== 'object') return 'malformed owner';
  const w = o as Partial<ProcessIdentity>;
  if (!Number.isSafeInteger(w.pid) || (w.pid as number) <= 1 || (w.pid as number) > 4_194_304)
    return `owner pid ${JSON.stringify(w.pid)} is not a process id above 1`;
  if (!str(w.host, 255) || !strOrNull(w.boot_id, 128) || !strOrNull(w.start_time, 64) || !strOrNull(w.pid_ns, 128))
    return 'malformed owner';
  return null;
}

/** Checks an event read back (from a journal or a database row) field by field before it is
 * applied (SPEC §12), as file records are: a forged owner, lock id or command is refused. */
export function checkEvent(v: unknown): RunEvent | string {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return 'not an object';
  const e = v as Record<string, unknown>;
  if (!Number.isSafeInteger(e.gen) || (e.gen as number) < 0 || !str(e.at, 64)) return 'malformed gen or at';
  const why = (): string | null =>
    strOrNull(e.why_code, 64) && strOrNull(e.why) && strOrNull(e.next) ? null : 'malformed why';
  switch (e.type) {
    case 'run-created':
      return e.state && typeof e.state === 'object' ? (v as RunEvent) : 'malformed state';
    case 'task-started':
      return str(e.task) && EVENT_TASK_ID.test(e.task) ? (v as RunEvent) : 'malformed task id';
    case 'task-finished':
      if (!str(e.task) || !EVENT_TASK_ID.test(e.task)) return 'malformed task id';
      if (!(TASK_STATUSES as readonly unknown[]).includes(e.status))
        return `unknown task status ${JSON.stringify(e.status)}`;
      if (
        !intOrNull(e.exit_code) ||
        !strOrNull(e.signal, 32) ||
        !intOrNull(e.duration_ms) ||
        !intOrNull(e.output_cut_bytes) ||
        !intOrNull(e.output_lost_bytes)
      )
        return 'malformed task result';
      return why() ?? (v as RunEvent);
    case 'run-finished':
      if (!(RUN_STATUSES as readonly unknown[]).includes(e.status))
        return `unknown run status ${JSON.stringify(e.status)}`;
      return why() ?? (v as RunEvent);
    case 'run-resumed': {
      if (!str(e.lock_id) || !LOCK_ID.test(e.lock_id)) return 'lock_id is not 32 hex digits';
      const owner = ownerProblem(e.owner);
      if (owner) return owner;
      if (!str(e.command, 4096) || !strOrNull(e.routine, 128) || !Number.isSafeInteger(e.parallel))
        return 'malformed command, routine or parallel';
      if (
        !e.reset ||
        typeof e.reset !== 'object' ||
        Object.entries(e.reset).some(([k, h]) => !EVENT_TASK_ID.test(k) || !str(h, 128))
      )
        return 'malformed reset';
      return v as RunEvent;
    }
    default:
      return `unknown event type ${JSON.stringify(e.type)}`;
  }
}

/** Applies one event. Pure (copies what it changes). Events older than the state's generation
 * are fenced off. */
export function applyEvent(state: RunState, ev: RunEvent): RunState {
  const copy: RunState = { ...state, tasks: { ...state.tasks } };
  applyEventInPlace(copy, ev);
  return copy;
}

/** The same, changing `state` itself: replaying or recording N events stays O(N), not O(N²). */
export function applyEventInPlace(state: RunState, ev: RunEvent): void {
  if (ev.gen < state.generation) return;
  const setWhy = (target: Partial<Why>, e: Partial<Why>): void => {
    delete target.why_code;
    delete target.why;
    delete target.next;
    if (e.why_code) Object.assign(target, { why_code: e.why_code, why: e.why ?? '', next: e.next ?? '' });
  };
  if (ev.type === 'run-created') {
    Object.assign(state, structuredClone(ev.state));
    return;
  }
  state.generation = ev.gen;
  state.updated_at = ev.at;
  switch (ev.type) {
    case 'task-started': {
      const t = own(state.tasks, ev.task);
      if (!t) return;
      state.tasks[ev.task] = {
        status: 'running',
        provider: t.provider,
        attempts: t.attempts + 1,
        started_at: ev.at,
        finished_at: null,
        duration_ms: null,
        exit_code: null,
        signal: null,
        log: t.log,
        hash: t.hash,
        gen: ev.gen,
      };
      return;
    }
    case 'task-finished': {
      const t = own(state.tasks, ev.task);
      if (!t) return;
      const finished: TaskRun = {
        status: ev.status,
        provider: t.provider,
        attempts: t.attempts,
        started_at: t.started_at,
        finished_at: ev.at,
        duration_ms: ev.duration_ms,
        exit_code: ev.exit_code,
        signal: ev.signal,
        log: t.log,
        hash: t.hash,
        gen: ev.gen,
        ...(ev.output_cut_bytes ? { output_cut_bytes: ev.output_cut_bytes } : {}),
        ...(ev.output_lost_bytes ? { output_lost_bytes: ev.output_lost_bytes } : {}),
      };
      setWhy(finished, ev);
      state.tasks[ev.task] = finished;
      return;
    }
    case 'run-finished': {
      // cut off with its run, in the generation it started under (not that of who records it)
      for (const [id, t] of Object.entries(state.tasks))
        if (t.status === 'running') state.tasks[id] = { ...t, status: 'interrupted' };
      state.status = ev.status;
      state.finished_at = ev.at;
      setWhy(state, ev);
      return;
    }
    case 'run-resumed': {
      for (const [id, hash] of Object.entries(ev.reset)) {
        const t = own(state.tasks, id);
        if (t)
          state.tasks[id] = {
            status: 'pending',
            provider: t.provider,
            attempts: t.attempts,
            started_at: null,
            finished_at: null,
            duration_ms: null,
            exit_code: null,
            signal: null,
            log: t.log,
            hash,
            gen: ev.gen,
          };
      }
      Object.assign(state, {
        status: 'RUNNING',
        lock_id: ev.lock_id,
        owner: ev.owner,
        command: ev.command,
        routine: ev.routine,
        parallel: ev.parallel,
        attempt: state.attempt + 1,
        resumed_at: ev.at,
        finished_at: null,
      });
      setWhy(state, {});
      return;
    }
  }
}

export function summarize(state: RunState): Record<TaskStatus, number> & { total: number } {
  const counts = { total: 0, pending: 0, running: 0, succeeded: 0, failed: 0, skipped_dependency: 0, interrupted: 0 };
  for (const t of Object.values(state.tasks)) {
    counts.total++;
    counts[t.status]++;
  }
  return counts;
}
