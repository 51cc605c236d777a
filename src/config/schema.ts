// The routinely.json schema (SPEC §2). zod/mini: the same validation as classic zod with a
// fraction of the start-up cost (every CLI command loads the config). The shipped JSON Schema
// (config/routinely.schema.json) is generated from these objects by scripts/gen-schema.ts. The
// types of the validated config are in types.ts (the published types need no zod).
// (Over 300 lines: the whole config's shape in one place, as the JSON Schema is generated from it.)

import * as z from 'zod/mini';
import {
  BACKEND_TYPES,
  ID_PATTERN,
  LOCK_NAME_PATTERN,
  MAX_LOCK_SLOTS,
  NOTIFY_EVENTS,
  ROUTINE_ACTIONS,
  type TaskDef,
  MAX_TIMER_SECONDS,
} from './types.js';

const id = z
  .string()
  .check(
    z.regex(ID_PATTERN),
    z.describe('Letters, digits, ".", "_" and "-"; starts with a letter or digit; at most 64 characters.'),
  );
const seconds = (what: string) => z.number().check(z.positive(), z.lte(MAX_TIMER_SECONDS), z.describe(what));

export const taskShape = {
  id,
  run: z.string().check(z.minLength(1), z.describe('Shell command, run with `sh -c` in its own process group.')),
  provider: z.optional(
    z.string().check(z.regex(ID_PATTERN), z.describe('Concurrency group (exec.providers); default "default".')),
  ),
  dependsOn: z.optional(z.array(id).check(z.describe('Task ids that must succeed first.'))),
  timeoutSeconds: z.optional(seconds('Kill the task (its whole process group) after this many seconds.')),
  env: z.optional(z.record(z.string(), z.string()).check(z.describe('Extra environment variables.'))),
  cwd: z.optional(z.string().check(z.describe('Working directory relative to the project root; must stay inside it.'))),
};
export const taskSchema = z.strictObject(taskShape);

export const providerShape = {
  maxConcurrency: z.int().check(z.gte(1), z.describe('At most this many tasks of the provider run at once.')),
};

export const notifyShape = {
  webhook: z.optional(z.string().check(z.describe('URL (http: or https:) that receives each event as a JSON POST.'))),
  command: z.optional(
    z
      .string()
      .check(
        z.minLength(1),
        z.describe(
          'Shell command run with `sh -c` in the project root; the event is JSON on its stdin and in ROUTINELY_EVENT, ROUTINELY_ROUTINE_ID, ROUTINELY_RUN_ID, ROUTINELY_RESULT, ROUTINELY_LOG.',
        ),
      ),
  ),
  on: z.optional(
    z
      .array(z.enum(NOTIFY_EVENTS))
      .check(
        z.describe(
          'Events to send (default all three): "failure" (after its retries), "recovery" (first success after a failure), "starved". An ordinary busy skip never notifies.',
        ),
      ),
  ),
  outputLines: z.optional(
    z
      .int()
      .check(
        z.gte(0),
        z.lte(1000),
        z.describe(
          'The last lines of the run\'s output sent as "output_tail" (default 20, as cron mails a job\'s output); 0 leaves it out.',
        ),
      ),
  ),
};
const notifySchema = z
  .strictObject(notifyShape)
  .check(z.describe('Where failures, recoveries and starvation are announced (SPEC §10).'));

export const retryShape = {
  attempts: z.int().check(z.gte(1), z.lte(10), z.describe('Tries after the first failed one, 1..10.')),
  backoffSeconds: seconds('Wait before the first retry; doubled for each next one (with jitter).'),
};

export const routineShape = {
  id,
  schedule: z
    .string()
    .check(
      z.describe(
        '5-field cron, 6-field cron with seconds first, or a nickname: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.',
      ),
    ),
  action: z.enum(ROUTINE_ACTIONS).check(z.describe('What the routine runs under the exec lock.')),
  run: z.optional(
    z.string().check(z.minLength(1), z.describe('Shell command; required for action "command", forbidden otherwise.')),
  ),
  timezone: z.optional(z.string().check(z.describe('IANA time zone, e.g. "Europe/Berlin"; default the machine zone.'))),
  enabled: z.optional(z.boolean()),
  timeoutSeconds: z.optional(seconds('Stop the routine run after this many seconds.')),
  jitterSeconds: z.optional(
    z
      .number()
      .check(z.gte(0), z.lte(86_400), z.describe('Random delay of 0..N seconds before starting (at most a day).')),
  ),
  catchUp: z.optional(
    z
      .enum(['none', 'latest'])
      .check(
        z.describe(
          '"latest": on scheduler start (and with PostgreSQL when claims go through again after the database was away), fire once if the last scheduled time was missed.',
        ),
      ),
  ),
  env: z.optional(
    z.record(z.string(), z.string()).check(z.describe('Extra environment variables for a command routine.')),
  ),
  cwd: z.optional(
    z
      .string()
      .check(z.describe('Working directory of a command routine, relative to the project root; must stay inside it.')),
  ),
  ifBusy: z.optional(
    z
      .enum(['skip', 'wait'])
      .check(
        z.describe(
          '"skip" (default): a tick that meets the exec lock held by something else than this scheduler (a manual command, lock run, another host) is skipped. "wait": it waits for the lock (up to waitTimeoutSeconds) and runs as soon as it frees. Routines due together take turns at their lock (a tick still waiting when its own next tick comes is a skip). Also what `routine run` does when busy, unless --if-busy is given.',
        ),
      ),
  ),
  exclusive: z.optional(
    z
      .boolean()
      .check(
        z.describe(
          'Command routines only. true (default): runs under its lock (the project exec lock, or "lock"). false: takes no lock and may run beside other work, as a cron job does; never beside itself.',
        ),
      ),
  ),
  lock: z.optional(
    z
      .string()
      .check(
        z.regex(LOCK_NAME_PATTERN),
        z.describe(
          'Command routines only: the named lock it holds for its whole run instead of the project exec lock ("exec", the default); routines on one lock take turns, routines on different locks run side by side. Declared in "locks" for more than one slot.',
        ),
      ),
  ),
  waitTimeoutSeconds: z.optional(
    seconds(
      'With ifBusy "wait": give up (a skip) after this many seconds; default the routine\'s interval, at most 3600.',
    ),
  ),
  retry: z.optional(
    z
      .strictObject(retryShape)
      .check(z.describe('Try a failed fire again after backoffSeconds, then 2x, 4x... Skips are never retried.')),
  ),
  starvedAfterSkips: z.optional(
    z
      .int()
      .check(
        z.gte(1),
        z.lte(1000),
        z.describe('Consecutive busy skips after which the routine is starved (default 3).'),
      ),
  ),
  notify: z.optional(
    z
      .union([z.literal(false), notifySchema])
      .check(z.describe('This routine\'s notifications: replaces the top-level "notify"; false silences the routine.')),
  ),
};

export const backendShape = {
  type: z
    .enum(BACKEND_TYPES)
    .check(
      z.describe(
        '"file" (default): state and locks under stateDir. "postgres": in a database shared by several hosts.',
      ),
    ),
  url: z.optional(
    z.string().check(z.describe('postgres://user:password@host:5432/db (ROUTINELY_DATABASE_URL overrides).')),
  ),
  poolSize: z.optional(
    z
      .int()
      .check(
        z.gte(1),
        z.lte(100),
        z.describe(
          'postgres: connections each routinely process keeps at most, 1..100 (default 2: one for statements, one for lease heartbeats; with 1 they share it). Ten schedulers at 2 fit a stock PgBouncer pool (default_pool_size 20) in session mode.',
        ),
      ),
  ),
};

export const namedLockShape = {
  slots: z.optional(
    z
      .int()
      .check(
        z.gte(1),
        z.lte(MAX_LOCK_SLOTS),
        z.describe(
          `Holders at once, 1..${MAX_LOCK_SLOTS} (default 1): a crash-safe counting semaphore, each holder with its own record, heartbeat and generation.`,
        ),
      ),
  ),
};

export const lockShape = {
  ttlSeconds: z.optional(
    z.number().check(z.gte(1), z.lte(86400), z.describe('Lease time to live, 1..86400 s (default 60).')),
  ),
  refreshSeconds: z.optional(seconds('Heartbeat interval; below ttlSeconds/2 (default ttlSeconds/3).')),
  backend: z.optional(
    z
      .enum(BACKEND_TYPES)
      .check(z.describe('Shorthand for backend.type (the URL then comes from ROUTINELY_DATABASE_URL).')),
  ),
};

export const execShape = {
  parallel: z.optional(z.int().check(z.gte(1), z.describe('Tasks run at once by `exec run` (default 2).'))),
  providers: z.optional(z.record(z.string().check(z.regex(ID_PATTERN)), z.strictObject(providerShape))),
  tasks: z.optional(z.array(taskSchema)),
  taskDirs: z.optional(
    z.array(z.string()).check(z.describe('Folders whose *.json files each hold one task or an array of tasks.')),
  ),
};

export const httpShape = {
  listen: z
    .optional(z.string())
    .check(
      z.describe(
        '[HOST:]PORT for /metrics, /healthz, /api/* and the status page of `scheduler start` and `serve`, e.g. "127.0.0.1:9464" (loopback by default; any other address needs ROUTINELY_HTTP_TOKEN). --http overrides it.',
      ),
    ),
  actions: z.optional(
    z
      .boolean()
      .check(
        z.describe(
          'Serve POST /api/routines/ID/run|pause|resume and the buttons of the status page (default false). They always need ROUTINELY_HTTP_TOKEN, also on loopback.',
        ),
      ),
  ),
};

const MAX_LOG_BYTES = 1024 * 1024 * 1024;

export const retentionShape = {
  runLogBytes: z.optional(
    z
      .int()
      .check(
        z.gte(1024),
        z.lte(MAX_LOG_BYTES),
        z.describe(
          "Output kept of one run (a fire's or an exec task's), 1 KiB..1 GiB (default 4 MiB): past it the first and last halves are kept, with a line saying how many bytes were left out.",
        ),
      ),
  ),
  routineLogBytes: z.optional(
    z
      .int()
      .check(
        z.gte(2048),
        z.lte(2 * MAX_LOG_BYTES),
        z.describe(
          "A routine's log files together (logs/<id>.log and its rotated .1), at least 2 x runLogBytes (default 16 MiB).",
        ),
      ),
  ),
  historyLines: z.optional(
    z
      .int()
      .check(z.gte(1), z.lte(100_000), z.describe("Fires kept in each routine's history, 1..100000 (default 1000).")),
  ),
  execRuns: z.optional(
    z
      .int()
      .check(
        z.gte(1),
        z.lte(100_000),
        z.describe(
          'Exec runs kept (default 50): the oldest finished runs are removed first; a run that can still be resumed is never removed.',
        ),
      ),
  ),
};

export const rootShape = {
  $schema: z.optional(z.string()),
  project: z.optional(
    z
      .string()
      .check(z.regex(ID_PATTERN), z.describe('Project name (identifies the project in a shared database backend).')),
  ),
  stateDir: z.optional(
    z.string().check(z.minLength(1), z.describe('State folder relative to the project root (default ".routinely").')),
  ),
  backend: z.optional(z.strictObject(backendShape)),
  lock: z.optional(z.strictObject(lockShape)),
  exec: z.optional(z.strictObject(execShape)),
  routines: z.optional(z.array(z.strictObject(routineShape))),
  locks: z.optional(
    z
      .record(z.string().check(z.regex(LOCK_NAME_PATTERN)), z.strictObject(namedLockShape))
      .check(
        z.describe(
          'Named locks (SPEC §4.16): `lock run --lock NAME` and a routine\'s "lock" take one, excluding only its own holders; "slots" lets that many hold it at once. Names: lowercase letters, digits, "_" and "-", at most 63 characters; "exec" is the project exec lock and has one slot.',
        ),
      ),
  ),
  passEnv: z.optional(
    z
      .array(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/)))
      .check(
        z.describe(
          'Environment variables that tasks and routine commands may see although routinely withholds them by default (ROUTINELY_DATABASE_URL, ROUTINELY_HTTP_TOKEN).',
        ),
      ),
  ),
  http: z.optional(
    z
      .strictObject(httpShape)
      .check(z.describe('The HTTP server: metrics, health, status page, and actions when asked for (SPEC §11).')),
  ),
  notify: z.optional(notifySchema),
  retention: z.optional(
    z
      .strictObject(retentionShape)
      .check(z.describe('How much output, history and how many exec runs are kept on the state disk (SPEC §3).')),
  ),
};

export const configSchema = z.strictObject(rootShape);
export const taskFileSchema = z.union([taskSchema, z.array(taskSchema)]);

export type RawConfig = z.infer<typeof configSchema>;
/** TaskDef (types.ts) is written out; it must say what the schema checks. */
type SameAs<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : never;
const taskDefMatchesSchema: SameAs<TaskDef, z.infer<typeof taskSchema>> = true;
void taskDefMatchesSchema;

/** Allowed keys of the object at a JSON path, for "unknown key" messages. */
export function allowedKeysAt(path: readonly PropertyKey[], inTaskFile = false): string[] | null {
  const p = path.map((s) => (typeof s === 'number' ? '#' : String(s))).join('/');
  if (inTaskFile) return p === '' || p === '#' ? Object.keys(taskShape) : null;
  const table: Record<string, object> = {
    '': rootShape,
    lock: lockShape,
    backend: backendShape,
    http: httpShape,
    retention: retentionShape,
    exec: execShape,
    'exec/tasks/#': taskShape,
    'routines/#': routineShape,
    notify: notifyShape,
    'routines/#/notify': notifyShape,
    'routines/#/retry': retryShape,
  };
  if (/^locks\/[^/]+$/.test(p)) return Object.keys(namedLockShape);
  if (/^exec\/providers\/[^/]+$/.test(p)) return Object.keys(providerShape);
  const shape = table[p];
  return shape ? Object.keys(shape) : null;
}
