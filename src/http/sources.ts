// What the HTTP server reads, as small provider functions handed in by whoever starts it (the
// scheduler, or `serve`): the server never opens a backend or loads a config itself, so it
// serves the same rows as `routine list --json`, `lock status --json` and `exec runs --json`.

import type { TaskStatus } from '../exec/registry.js';
import type { UnreadableRun } from '../exec/views.js';
import type { RunState } from '../exec/run-state.js';
import type { LockStatus } from '../lock/status.js';
import type { HistoryEntry } from '../state/history.js';
import { starvingSkip, type RoutineRecord } from '../state/routine-state.js';
import type { DelayedFor } from '../state/phases.js';
import type { Health } from './health.js';
import { monotonicMs } from '../clock.js';

/** A `routine list --json` row: the fields the page and the metrics read (`starved` and
 * `running_since` are shown when present). */
export interface RoutineView extends RoutineRecord {
  id: string;
  /** Null (with action and enabled) only on the row of a routine the config no longer has,
   * listed while a fire of it runs on (`removed`). */
  schedule: string | null;
  timezone: string | null;
  action: string | null;
  enabled: boolean | null;
  removed?: true;
  /** The lock it takes: "exec", a named lock, "none" (absent: not known). */
  lock?: string | null;
  next_run_at: string | null;
  starved?: boolean;
  running_since?: string | null;
  /** A fire before it runs: queued behind a routine, or waiting for its lock (routine list). */
  phase?: 'delayed' | 'queued' | 'waiting' | 'running' | null;
  phase_since?: string | null;
  waiting_for?: { behind: string } | { lock: string; holder: string } | DelayedFor | null;
}

/** An `exec runs --json` row: the run without its tasks, with their counts; or a run whose
 * state cannot be read, with why. */
export type RunView =
  (Omit<RunState, 'tasks'> & { summary: Record<TaskStatus, number> & { total: number } }) | UnreadableRun;

/** A fire as `routine history --json` shows it (without the files' bookkeeping). */
export type FireView = Omit<HistoryEntry, 'id' | 'closes' | 'key'>;

/** One run's output, as `routine logs ID --run RUN --lines N` prints it. */
export interface RunOutput {
  run_id: string;
  /** The run's section of the log (its frames included), as text; shown escaped. */
  text: string;
  /** The most lines shown; `cut_lines` says whether earlier ones were left out. */
  lines: number;
  cut_lines: boolean;
  /** What `routine logs` says on stderr about it (bytes left out of a long run's middle). */
  notices: string[];
}

/** The answer to the run action: how far the run got before the answer went out. */
export type RunAnswer =
  | { state: 'started'; run_id: string | null }
  | { state: 'waiting'; why: string }
  /** The routine's ifBusy is skip: nothing recorded (a manual run is not a tick). */
  | { state: 'skipped'; reason: string }
  /** Refused: the holder, as `routine run` names it. Nothing recorded. */
  | { state: 'busy'; error: string }
  /** It ended before it started its work (its tasks could not be read, the lock's store was
   * away): recorded as `routine run` records it. */
  | { state: 'finished'; result: string; reason: string | null; run_id: string | null };

/** What the actions do (SPEC §11): exactly what `routine run|pause|resume` do. */
export interface RoutineActions {
  /** `address`: the client's, kept with the record (who started it). */
  run(id: string, address: string): Promise<RunAnswer>;
  pause(id: string, note: string | null): Promise<{ was_paused: boolean; note: string | null }>;
  resume(id: string): Promise<{ was_paused: boolean }>;
  /** As `routine stop ID`; `address`: the client's, for the record (who stopped it). */
  stopFire(id: string, address: string): Promise<StopAnswer>;
}

/** The answer to the stop action, as `routine stop` says it. */
export type StopAnswer =
  | { state: 'idle' }
  | { state: 'elsewhere'; host: string; pid: number }
  | { state: 'not-found'; run_id: string | null }
  | { state: 'stopped'; run_id: string; killed: boolean; recorded: boolean; waited_ms: number }
  | { state: 'refused'; error: string }
  /** Not in the config, and no fire of it open (a routine a reload removed keeps its running
   * fire stoppable until it ends). */
  | { state: 'unknown' };

export type RecentResult = Pick<HistoryEntry, 'result' | 'scheduled_at' | 'finished_at' | 'reason' | 'run_id'>;

export interface RecentResults {
  /** The newest STRIP_LENGTH results, oldest first. */
  results: RecentResult[];
  /** Busy skips since the last fire that ran (the whole history, not only the strip). */
  trailing_skips: number;
}

export interface ServerInfo {
  project: string;
  host: string;
  backend: 'file' | 'postgres';
  /** `scheduler`: this process fires routines; `serve`: it only shows them. */
  mode: 'scheduler' | 'serve';
  pid: number;
}

/** A fire whose process is gone before it was recorded (its open marker is all there is). */
export interface LostFire {
  started_at: string;
  pid: number;
  host: string;
}

export interface StatusSources {
  info: ServerInfo;
  /** PostgreSQL backend: the measured offset to the database clock, ms (null: not yet). */
  clockOffsetMs?(): number | null;
  routines(): Promise<RoutineView[]>;
  /** What the config says of each routine beyond its list row, for routinely_routine_info. */
  routineConfig?(): Record<string, { exclusive: boolean; if_busy: string; lock: string }>;
  recent(routineIds: string[]): Promise<Record<string, RecentResults>>;
  lock(): Promise<LockStatus>;
  runs(): Promise<RunView[]>;
  health(): Promise<Health>;
  /** A routine's newest fires, newest first, at most `n`. */
  fires(id: string, n: number): Promise<FireView[]>;
  /** The fire of it running now, if any (its run id: its output grows in the log). */
  running?(id: string): Promise<{ run_id: string | null; started_at: string } | null>;
  /** Fires of it whose process is gone (on this host) and that are not recorded yet: the next
   * scheduler or routine run records each as interrupted (`routine history ID` says the same). */
  lost?(id: string): Promise<LostFire[]>;
  /** A run's last `lines` lines of output; null when the routine's log has no such run. */
  output(id: string, runId: string, lines: number): Promise<RunOutput | null>;
  /** Present when `http.actions` was on at the start. */
  actions?: RoutineActions;
  /** Whether `http.actions` is still on in the config in force (a reload may turn it off;
   * turning it on takes a restart, which checks the token). Default: on. */
  actionsOn?: () => boolean;
  /** Whether a scheduler runs: this one (healthy), or for `serve` the one holding the lock. */
  schedulerUp(): Promise<boolean>;
}

export const STRIP_LENGTH = 30;

/** The strip of a routine from its history (oldest first). */
export function recentResults(history: readonly HistoryEntry[], n = STRIP_LENGTH): RecentResults {
  let trailing = 0;
  for (let i = history.length - 1; i >= 0 && history[i]!.result === 'skipped'; i--)
    if (starvingSkip(history[i]!)) trailing++;
  const results = history.slice(-n).map(({ result, scheduled_at, finished_at, reason, run_id }) => ({
    result,
    scheduled_at,
    finished_at,
    reason,
    run_id,
  }));
  return { results, trailing_skips: trailing };
}

/** Consecutive skips of a routine: the row's own count once routine state keeps one, else the
 * skips at the end of its history (the same number, counted from the records). */
export function consecutiveSkips(row: RoutineView, recent: RecentResults | undefined): number {
  return typeof row.consecutive_skips === 'number' ? row.consecutive_skips : (recent?.trailing_skips ?? 0);
}

/** Coalesces reads: a page refreshing every 5 s in several tabs, a scrape and a probe share one
 * read of the state per `ttlMs` instead of one each. */
export function cachedSources(
  s: StatusSources,
  ttlMs = 1000,
  now: () => number = () => monotonicMs(),
): StatusSources & { forget(): void } {
  const caches: Map<string, unknown>[] = [];
  /** `whileReading`: shared only by requests that come while the read goes on, never after it. */
  const memo = <A extends unknown[], T>(
    fn: (...a: A) => Promise<T>,
    whileReading = false,
  ): ((...a: A) => Promise<T>) => {
    const cache = new Map<string, { at: number; value: Promise<T>; done: boolean }>();
    caches.push(cache);
    return (...a: A) => {
      const key = JSON.stringify(a);
      const hit = cache.get(key);
      if (hit && now() - hit.at < ttlMs && !(whileReading && hit.done)) return hit.value;
      const value = fn(...a);
      if (cache.size > 32) cache.clear();
      const entry = { at: now(), value, done: false };
      cache.set(key, entry);
      void value.then(
        () => (entry.done = true),
        () => (entry.done = true),
      );
      // a failed read is not kept: the next request tries again
      value.catch(() => {
        if (cache.get(key)?.value === value) cache.delete(key);
      });
      return value;
    };
  };
  const cached: StatusSources & { forget(): void } = {
    info: s.info,
    ...(s.clockOffsetMs ? { clockOffsetMs: s.clockOffsetMs } : {}),
    // what routines did: shared only while read (no view shows less than the history holds the
    // moment it is asked: SPEC §3), which still makes one read of a scrape and pages asking at once
    routines: memo(() => s.routines(), true),
    ...(s.routineConfig ? { routineConfig: s.routineConfig } : {}),
    recent: memo((ids: string[]) => s.recent(ids), true),
    lock: memo(() => s.lock()),
    runs: memo(() => s.runs()),
    // health is cheap and must not lag: a probe reads it fresh
    health: () => s.health(),
    // one routine's page: read when asked for, never shared
    fires: (id, n) => s.fires(id, n),
    ...(s.running ? { running: s.running } : {}),
    ...(s.lost ? { lost: s.lost } : {}),
    output: (id, run, lines) => s.output(id, run, lines),
    // the scheduler's own answer is cheap too, and must turn 0 the moment it stops (serve asks
    // the lock, which memo() spares the store)
    schedulerUp: s.info.mode === 'scheduler' ? () => s.schedulerUp() : memo(() => s.schedulerUp()),
    /** After an action: the next read shows what it changed. */
    forget: () => {
      for (const c of caches) c.clear();
    },
  };
  // the actions as the config in force has them, asked at each request
  const { actions, actionsOn } = s;
  if (actions)
    Object.defineProperty(cached, 'actions', {
      get: () => (actionsOn?.() === false ? undefined : actions),
      enumerable: true,
    });
  return cached;
}
