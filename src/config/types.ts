// The validated config's types and the constants they are made of (SPEC §2): what the library's
// users see. No zod here (it is bundled into dist/, not installed with the package), so the
// published declarations import nothing that is not installed; schema.ts validates against
// these (its SameAs check keeps TaskDef in step with the task schema).

export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const ROUTINE_ACTIONS = ['exec-auto', 'exec-resume', 'register', 'command'] as const;
export const NOTIFY_EVENTS = ['failure', 'recovery', 'starved'] as const;
export const BACKEND_TYPES = ['file', 'postgres'] as const;
/** A named lock's name (SPEC §4.16); `exec` names the project exec lock. */
export const LOCK_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** The exec lock's name on the command line and in a routine's `lock`. */
export const EXEC_LOCK_NAME = 'exec';

/** Node's timers overflow past 2^31 ms (≈ 24.8 days) and fire at once: longer timeouts are
 * refused rather than silently turned into "now". */
export const MAX_TIMER_SECONDS = 2_000_000;

/** Why `name` may not be a named lock's although it has the form of one: the keys of the project's
 * own locks, which `lock status` shows under those words (`exec-run lock: free`); a named lock so
 * called would be another lock that reads as the same. null for any other name. */
export function reservedLockName(name: string): string | null {
  if (name === 'exec-run') return '"exec-run" is the key of the project exec lock: call it "exec" (or name no lock)';
  if (name === 'scheduler') return '"scheduler" is the scheduler\'s own lock: choose another name';
  // the views' word for a routine that takes no lock (`"exclusive": false`): a lock so called
  // would be shown as none, and its busy skips counted under no lock
  if (name === 'none') return '"none" means no lock (`"exclusive": false`) in the views: choose another name';
  return null;
}
/** Slots a named lock may have (holders at once). */
export const MAX_LOCK_SLOTS = 64;

/** Bounds on what runs leave on the state disk (SPEC §3 "Output is bounded"). */
export const RETENTION_DEFAULTS = {
  runLogBytes: 4 * 1024 * 1024,
  routineLogBytes: 16 * 1024 * 1024,
  historyLines: 1000,
  execRuns: 50,
} as const;

/** One exec task (SPEC §5), as the schema above checks it. Written out rather than inferred, so
 * the published types do not need zod (bundled, not installed); `SameAs` below keeps the two
 * in step at compile time. */
export interface TaskDef {
  id: string;
  run: string;
  provider?: string | undefined;
  dependsOn?: string[] | undefined;
  timeoutSeconds?: number | undefined;
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
}
export type RoutineAction = (typeof ROUTINE_ACTIONS)[number];

export interface RoutineDef {
  id: string;
  schedule: string;
  action: RoutineAction;
  run?: string;
  timezone?: string;
  enabled: boolean;
  timeoutSeconds?: number;
  jitterSeconds: number;
  catchUp: 'none' | 'latest';
  env?: Record<string, string>;
  cwd?: string;
  ifBusy: 'skip' | 'wait';
  /** What `routine run` does when the exec lock is busy and no --if-busy is given: the routine's
   * own ifBusy when the config sets one, else the manual default "fail" (SPEC §4). */
  manualIfBusy: 'fail' | 'skip' | 'wait';
  /** Takes a lock for its whole run (default); false only for command routines (SPEC §6). */
  exclusive: boolean;
  /** Which lock it takes while exclusive: "exec" (the project exec lock, the default and always
   * for the exec actions) or a named lock (SPEC §4.16). */
  lock: string;
  /** With ifBusy "wait"; absent: the routine's interval, at most an hour (decided at fire time). */
  waitTimeoutSeconds?: number;
  retry?: { attempts: number; backoffSeconds: number };
  starvedAfterSkips: number;
  /** The routine's own notify (false: silenced); absent: the top-level one. */
  notify?: NotifyDef | false;
}

export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

export interface NotifyDef {
  webhook?: string;
  command?: string;
  on: NotifyEvent[];
  /** Lines of the run's output in the payload's `output_tail` (0: no such field). */
  outputLines: number;
}

/** The config after validation, with defaults applied. */
export interface Config {
  project?: string;
  stateDir: string;
  backend: { type: (typeof BACKEND_TYPES)[number]; url?: string; poolSize: number };
  lock: { ttlSeconds: number; refreshSeconds: number | undefined };
  exec: {
    parallel: number;
    providers: Record<string, { maxConcurrency: number }>;
    tasks: TaskDef[];
    taskDirs: string[];
  };
  routines: RoutineDef[];
  /** Named locks declared with their slots (SPEC §4.16); an undeclared name has one slot. */
  locks: Record<string, { slots: number }>;
  /** Withheld variables that commands may see anyway (SPEC §12). */
  passEnv: string[];
  /** Where `scheduler start` and `serve` listen when --http is not given (parsed and checked),
   * and whether the server takes actions (SPEC §11). */
  http: { listen: string | null; actions: boolean } | null;
  /** Top-level notifications (routines may replace or silence them). */
  notify: NotifyDef | null;
  retention: Retention;
}

export interface Retention {
  runLogBytes: number;
  routineLogBytes: number;
  historyLines: number;
  execRuns: number;
}
