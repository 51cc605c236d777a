// The exec commands as library operations (SPEC §5): register, run, resume, reset. Each takes the
// project exec lock itself and returns a typed outcome; the CLI prints it. The registry's upkeep
// is in registry-sync.ts, the read views in views.ts.
// (Over 300 lines: runAndRecord, one run from start to record, is most of it.)

import { acquireLock } from '../lock/named.js';
import { EXEC_LOCK_NAME } from '../config/types.js';
import { loadProject, type Project } from '../config/load.js';
import type { LineTicket } from '../lock/line.js';
import type { Backend } from '../backend-types.js';
import type { Clock } from '../clock.js';
import type { TaskDef } from '../config/types.js';
import { NotFoundError, StateIOError, UsageError, passedOver } from '../errors.js';
import type { BusyPolicy } from '../lock/lock-backend.js';
import { randomHex } from '../fs/random-ids.js';
import { selfIdentity, type ProcessIdentity } from '../process/identity.js';
import type { AcquireResult, Lease } from '../lock/lease.js';
import type { LockRecord } from '../lock/record.js';
import { nowIso, withExecBackend, type ExecContext } from './context.js';
import { executeRun } from './executor.js';
import { asRecorded, finalStatus, foldRun } from './outcome.js';
import { dependencyOrder } from './plan.js';
import { nothingToRunWhy, ownerAlive, prepareRegistry, selectTasks, type RegisterSummary } from './registry-sync.js';
import { taskHash, type Registry } from './registry.js';
import { applyEvent, summarize, type RunEvent, type RunState, type TaskRun } from './run-state.js';
import { isRunId, newRunId } from '../run-id.js';
import { type ExecStore } from './store.js';
import { FencedError } from '../errors.js';
import { loadTaskDefinitions, type SourcedTask } from './task-source.js';
import { own } from '../is-object.js';

type Busy = Exclude<AcquireResult, { ok: true }>;

export interface LockedPolicy extends BusyPolicy {
  /** Called once the exec lock is held, before any work (awaited: a fire records that it has
   * started before its work begins). */
  onLocked?: () => void | Promise<void>;
  /** With `ifBusy: 'wait'`: called once, naming the holder, when the lock is busy at first. */
  onWait?: (why: string, holder: LockRecord | null, holders?: LockRecord[]) => void;
  /** The routine the work runs for (the lock's owner names it); none for a person's command. */
  routine?: string | null;
  /** The lock is held for a scheduled tick of the routine (its owner says so, SPEC §6). */
  scheduled?: boolean;
  /** Its place in the lock's line, taken when the scheduler queued it (lock/line.ts). */
  ticket?: LineTicket | null;
}

/** What a command holding the exec lock works with: the lease, the backend's clock and store, the
 * task definitions as they are under that lock, and the registry brought in line with them. */
type Held = { lease: Lease; clock: Clock; store: ExecStore; defs: SourcedTask[] } & Awaited<
  ReturnType<typeof prepareRegistry>
>;

/** Take the exec lock, bring the registry in line with the task definitions, run `fn`, release.
 * `defs` were read before the lock (bad input is said at once, without waiting); a command that
 * waited for the lock reads them again once it holds it, so that it runs, resumes and registers
 * the tasks as they are then (a task file removed or changed during the wait), and `recheck`
 * says whether they still fit (the tasks named on the command line). */
async function withRegistry<T>(
  ctx: ExecContext,
  command: string,
  policy: LockedPolicy,
  defs: SourcedTask[],
  fn: (held: Held) => Promise<T>,
  /** The run the hold is for, known before the lock is taken: its record names it from the
   * moment it is linked (SPEC §5 `owner.run_id`; `cat` of the lock tells which run holds it). */
  runFor?: (clock: Clock, store: ExecStore) => Promise<string | null>,
  recheck?: (defs: SourcedTask[]) => void,
): Promise<{ kind: 'busy'; busy: Busy } | { kind: 'ok'; value: T }> {
  return withExecBackend(ctx, async (backend) => {
    // the backend's clock: with a database, run ids and times follow the database clock
    const clock = ctx.clock ?? backend.clock;
    const runId = (await runFor?.(clock, backend.exec)) ?? null;
    const owner = {
      command,
      routine: policy.routine ?? null,
      ...(runId ? { run_id: runId } : {}),
      ...(policy.scheduled ? { scheduled: true } : {}),
    };
    let waited = false;
    const got = await acquireLock(backend.lock, EXEC_LOCK_NAME, 1, owner, policy, (why, holder, holders) => {
      waited = true;
      policy.onWait?.(why, holder, holders);
    });
    if (!got.ok) return { kind: 'busy' as const, busy: got };
    try {
      await policy.onLocked?.();
      const [lease, store] = [got.lease, backend.exec];
      const current = waited ? loadTaskDefinitions(configNow(ctx.project)) : defs;
      recheck?.(current);
      const prepared = await prepareRegistry(ctx, store, clock, lease, current);
      const value = await fn({ lease, clock, store, defs: current, ...prepared });
      // a damaged run.json read under the lock is written again (said; a failure only said)
      await store
        .repairRuns?.(lease)
        .catch((err: Error) => ctx.warn?.(`could not write a run's run.json again: ${err.message}`));
      return { kind: 'ok' as const, value };
    } finally {
      await got.lease.release();
    }
  });
}

/** The project with its config as the file has it now (its inline tasks and task folders), for a
 * command that waited for the lock; a file that is no valid config by then is said as any bad
 * config is (exit 2), the lock given back. */
function configNow(project: Project): Project {
  return { ...project, config: loadProject({ configPath: project.configPath }).config };
}

export async function register(ctx: ExecContext, policy: LockedPolicy) {
  const defs = loadTaskDefinitions(ctx.project);
  return withRegistry(ctx, 'register', policy, defs, async (held) => held.summary);
}

export interface RunOptions extends LockedPolicy {
  /** Run exactly these tasks (else every ready pending task). */
  tasks?: string[];
  parallel?: number;
  /** SIGINT/SIGTERM from the caller. */
  stop?: AbortSignal;
  runTimeoutMs?: number;
  killGraceMs?: number;
  onEvent?: (event: RunEvent, state: RunState) => void;
  /** Called once the run exists (progress displays start here). */
  onStart?: (state: RunState) => void;
}

export type RunOutcome =
  | { kind: 'busy'; busy: Busy }
  | { kind: 'nothing'; summary: RegisterSummary; why: string }
  | { kind: 'done'; state: RunState; summary: RegisterSummary; bytesWritten: number };

/** The options a library caller gave, checked as the CLI checks its flags: `parallel: 0` ran
 * nothing and recorded SUCCEEDED, `tasks: []` ran every task. */
function checkRunOptions(opts: RunOptions): void {
  if (opts.parallel !== undefined && !(Number.isSafeInteger(opts.parallel) && opts.parallel >= 1))
    throw new UsageError(`parallel ${JSON.stringify(opts.parallel)} is not a whole number of at least 1`);
  if (opts.tasks !== undefined && (!Array.isArray(opts.tasks) || opts.tasks.length === 0))
    throw new UsageError('tasks names no task: give task ids, or leave tasks out to run every ready task');
  if (opts.runTimeoutMs !== undefined && !(typeof opts.runTimeoutMs === 'number' && opts.runTimeoutMs > 0))
    throw new UsageError(`runTimeoutMs ${JSON.stringify(opts.runTimeoutMs)} is not a number of milliseconds above 0`);
}

function checkNamed(defs: SourcedTask[], named: string[] | undefined): void {
  if (!named) return;
  const known = new Set(defs.map((d) => d.task.id));
  const unknown = named.filter((n) => !known.has(n));
  if (unknown.length > 0) {
    const list = [...known].slice(0, 20).join(', ') || '(none)';
    throw new UsageError(
      `unknown task${unknown.length > 1 ? 's' : ''} ${unknown.map((u) => JSON.stringify(u)).join(', ')} (known: ${list})`,
    );
  }
}

export async function execRun(ctx: ExecContext, opts: RunOptions = {}): Promise<RunOutcome> {
  checkRunOptions(opts);
  const defs = loadTaskDefinitions(ctx.project);
  checkNamed(defs, opts.tasks);
  // the run's id before the lock: the lock's record names it (none is made if nothing is ready)
  let runId = '';
  const r = await withRegistry(
    ctx,
    'exec run',
    opts,
    defs,
    async (held) => {
      const { clock, lease, registry, summary } = held;
      const ids = selectTasks(registry, opts.tasks);
      if (ids.length === 0) return { kind: 'nothing' as const, summary, why: nothingToRunWhy(registry) };
      const defById = new Map(held.defs.map((d) => [d.task.id, d.task]));
      const ordered = dependencyOrder(
        ids.map((id) => ({ id, provider: '', dependsOn: defById.get(id)!.dependsOn ?? [] })),
      ).map((t) => t.id);
      const at = nowIso(clock);
      const tasks: Record<string, TaskRun> = {};
      for (const id of ordered) {
        const def = defById.get(id)!;
        tasks[id] = {
          status: 'pending',
          provider: def.provider ?? 'default',
          attempts: 0,
          started_at: null,
          finished_at: null,
          duration_ms: null,
          exit_code: null,
          signal: null,
          log: `${id}.log`,
          hash: taskHash(def),
        };
      }
      const state: RunState = {
        version: 1,
        run_id: runId,
        status: 'RUNNING',
        command: 'exec run',
        routine: opts.routine ?? null,
        generation: lease.generation,
        lock_id: lease.lockId,
        owner: ownerOf(),
        attempt: 1,
        parallel: opts.parallel ?? ctx.project.config.exec.parallel,
        created_at: at,
        updated_at: at,
        finished_at: null,
        tasks,
      };
      const carried = { ...held, state, defs: defById, resuming: false };
      return { kind: 'run' as const, ...(await runAndRecord(ctx, opts, carried)) };
    },
    async (clock) => (runId = newRunId(clock.now(), randomHex(2))),
    (current) => checkNamed(current, opts.tasks),
  );
  if (r.kind === 'busy') return r;
  if (r.value.kind === 'nothing') return r.value;
  const { kind: _k, ...done } = r.value;
  return { kind: 'done', ...done };
}

/** This process as a run names its owner (a copy: records never share the cached one). */
const ownerOf = (): ProcessIdentity => ({ ...selfIdentity() });

/** What runAndRecord works on: the run under the held lock, the registry it folds back into. */
interface Carried {
  store: ExecStore;
  clock: Clock;
  lease: Lease;
  registry: Registry;
  summary: RegisterSummary;
  state: RunState;
  defs: Map<string, TaskDef>;
  /** A run that existed (exec resume): reopened, not created. */
  resuming: boolean;
}

/** Creates (or reopens) the run, executes it, records the outcome, folds it into the registry. */
async function runAndRecord(
  ctx: ExecContext,
  opts: RunOptions,
  c: Carried,
): Promise<{ state: RunState; summary: RegisterSummary; bytesWritten: number }> {
  const { store, clock, lease, registry, summary, state, defs, resuming } = c;
  lease.annotate({ run_id: state.run_id });
  const writer = store.runWriter(state.run_id, lease);
  try {
    // The registry names the run before the run exists: a crash in between leaves a name that
    // the next command drops, never a run that nobody folds back into the registry.
    const withRun: Registry = {
      ...registry,
      active_runs: [...registry.active_runs.filter((r) => r !== state.run_id), state.run_id],
    };
    await store.saveRegistry(withRun, nowIso(clock), lease);
    try {
      if (resuming) await writer.reopen(state);
      else await writer.create(state);
    } catch (err) {
      if (!(err instanceof StateIOError)) throw err;
      // Nothing ran. The journal may still take the run's end (its first line went in when the
      // snapshot did not): recorded ABORTED then, not left RUNNING for the next command to
      // call its owner dead (its process exits cleanly, with 74)
      const final = finalStatus(state, 'STATE_ERROR', err.message);
      try {
        writer.append({ type: 'run-finished', gen: lease.generation, at: nowIso(clock), ...final });
        await writer.flush();
      } catch {
        throw err; // nothing more can be written: the next command finds the run's owner gone
      }
      throw new StateIOError(
        `${err.message}: nothing ran; run ${state.run_id} is recorded ABORTED, and \`routinely exec resume ${state.run_id}\` runs it once the state folder takes writes again`,
      );
    }
    opts.onStart?.(state);
    let result;
    // the run as far as it got, and whether any of its work began (SPEC §7: 74 only when the
    // work did not run)
    let latest = state;
    let began = false;
    try {
      result = await executeRun({
        root: ctx.project.root,
        writer,
        logPath: (taskId) => store.logPath(state.run_id, taskId),
        lease,
        clock,
        state,
        defs,
        doneBefore: (id) => own(registry.tasks, id)?.status === 'succeeded',
        statusBefore: (id) => {
          const s = own(registry.tasks, id)?.status;
          return s === undefined || s === 'pending' ? undefined : s;
        },
        caps: {
          parallel: opts.parallel ?? ctx.project.config.exec.parallel,
          providers: ctx.project.config.exec.providers,
        },
        stop: opts.stop ?? new AbortController().signal,
        runTimeoutMs: opts.runTimeoutMs,
        killGraceMs: opts.killGraceMs,
        runLogBytes: ctx.project.config.retention.runLogBytes,
        env: ctx.env,
        passEnv: ctx.project.config.passEnv,
        onEvent: (e, s) => {
          latest = s;
          if (e.type === 'task-started') began = true;
          opts.onEvent?.(e, s);
        },
      });
    } catch (err) {
      if (!(err instanceof StateIOError)) throw err;
      // SPEC §3: say what could not be written, and record the run as ABORTED if the state
      // folder still takes a line (the journal usually does when a snapshot does not).
      const final = finalStatus(latest, 'STATE_ERROR', err.message);
      const event: RunEvent = { type: 'run-finished', gen: lease.generation, at: nowIso(clock), ...final };
      try {
        writer.append(event);
        await writer.flush();
      } catch {
        // nothing more can be written; the next command finds the run's owner gone
      }
      // nothing ran: 74, the work did not run; once a task has started, the run is a failed
      // one (ABORTED, exit 1), and the warning names what could not be written
      if (!began) throw err;
      ctx.warn?.(
        `${err.message}: run ${state.run_id} was stopped part-way (ABORTED); what its tasks did is in its journal, and \`routinely exec resume\` runs the rest`,
      );
      return { state: applyEvent(latest, event), summary, bytesWritten: writer.bytesWritten };
    }
    let fenced = result.stoppedBy === 'LOCK_LOST';
    const final = finalStatus(result.state, result.stoppedBy, lease.lost?.why);
    const event: RunEvent = { type: 'run-finished', gen: lease.generation, at: nowIso(clock), ...final };
    let finished = applyEvent(result.state, event);
    if (!fenced) {
      try {
        writer.append(event);
        await writer.flush();
        await writer.snapshot(finished);
      } catch (err) {
        if (err instanceof FencedError) fenced = true;
        // The work ran, and each task's result is in the run's journal: the run's own end could
        // not be written (its last journal line, or run.json, an index of the journal). Said, and
        // the run's exit code stands (SPEC §7: 74 is for work that did not run).
        else if (err instanceof StateIOError)
          ctx.warn?.(
            `${err.message}: run ${state.run_id} ran (${finished.status}); its tasks' results are in its journal, and the rest of its record is brought up to date by the next command`,
          );
        else throw err;
      }
    }
    if (fenced) {
      // SPEC §4.3: record ABORTED / LOCK_LOST, write nothing else. The append carries our old
      // generation, so it can never override what a newer holder records for this run.
      const lost: RunEvent = {
        ...event,
        status: 'ABORTED',
        why_code: 'LOCK_LOST',
        why: finalStatus(result.state, 'LOCK_LOST', lease.lost?.why).why,
      };
      const notStored = await writer.appendUnfenced(lost);
      // What we report is what the record says: a task whose result never reached it is run
      // again by resume, so it is not reported as done (SPEC §5: the record is the truth).
      const state = asRecorded(
        applyEvent(result.state, lost),
        [...writer.unrecorded(), ...result.notRecorded],
        notStored,
      );
      return { state, summary, bytesWritten: writer.bytesWritten };
    }
    // The run is on record. A lock lost in this last moment only leaves the registry to be
    // folded by the next command (the run is still in active_runs).
    let bytes = 0;
    const folded = foldRun(withRun, finished, nowIso(clock));
    try {
      bytes = await store.saveRegistry(folded, nowIso(clock), lease);
    } catch (err) {
      // the registry is an index of the runs: the next command folds this one in (it is still
      // listed in active_runs); the run's own exit code stands
      if (!(err instanceof FencedError) && !(err instanceof StateIOError)) throw err;
      ctx.warn?.(
        `run ${finished.run_id} is recorded, but the task registry was not updated (${err.message}); the next command does it`,
      );
    }
    await pruneRuns(ctx, store, lease, new Set([finished.run_id, ...withRun.active_runs, ...provingRuns(folded)]));
    return { state: finished, summary, bytesWritten: writer.bytesWritten + bytes };
  } finally {
    await writer.close();
  }
}

/** The runs that hold the current result of a task (its last run): the registry is their index,
 * and rebuilt from the runs it is lost (SPEC §3), so each of these is kept, or a task that
 * succeeded would read as pending and run again. */
function provingRuns(registry: Registry): string[] {
  return Object.values(registry.tasks)
    .filter((t) => t.status !== 'retired' && t.last_run_id !== null)
    .map((t) => t.last_run_id!);
}

/** retention.execRuns: after a run is on record, the oldest finished runs past the newest
 * `execRuns` are removed, record and task logs. Never one that `exec resume` could pick up
 * (RUNNING, INTERRUPTED, ABORTED) nor one that holds a task's current result (`keep`: the only
 * record of that result once the registry is lost). Retention is housekeeping: a removal that
 * fails is a warning, and is tried again after the next run. */
async function pruneRuns(ctx: ExecContext, store: ExecStore, lease: Lease, keep: Set<string>): Promise<void> {
  const limit = ctx.project.config.retention.execRuns;
  try {
    const ids = await store.listRunIds(limit + 1000);
    for (const id of ids.slice(limit)) {
      if (keep.has(id)) continue;
      let run: RunState | null;
      try {
        run = await store.loadRun(id);
      } catch {
        continue; // a corrupt run stays for `exec show` to report
      }
      if (!run || (run.status !== 'SUCCEEDED' && run.status !== 'FAILED')) continue;
      await store.removeRun(id, lease);
    }
  } catch (err) {
    if (err instanceof FencedError) return;
    ctx.warn?.(`could not remove old runs (retention.execRuns ${limit}): ${(err as Error).message}`);
  }
}

export type ResumeOutcome =
  /** The lock was busy; `runId`: the run it would have resumed (the one asked for, or the newest
   * resumable when the lock was tried), null when none was known. */
  | { kind: 'conflict'; busy: Busy; runId: string | null }
  | { kind: 'nothing'; why: string; next?: string }
  | {
      kind: 'done';
      state: RunState;
      summary: RegisterSummary;
      bytesWritten: number;
      /** It had nothing left to run: every unfinished task succeeded since, in newer runs. */
      closedOnly?: true;
    };

const RESUMABLE = new Set(['INTERRUPTED', 'ABORTED']);

export async function execResume(
  ctx: ExecContext,
  runId: string | undefined,
  opts: RunOptions = {},
): Promise<ResumeOutcome> {
  checkRunOptions(opts);
  return withExecBackend(ctx, async (backend) => {
    // Without a run id: a newest run whose unfinished tasks all succeeded since is closed (it ran
    // nothing), and the next resumable run is resumed — never a task left behind in an older
    // one that neither `exec run` (its tasks are that run's) nor `exec resume` would take.
    // (the answer is the last run it resumed or closed: a close followed by nothing left to
    // resume is that close's outcome, never "nothing to resume")
    let last: ResumeOutcome | null = null;
    for (let closed = 0; ; closed++) {
      const r = await resumeWith({ ...ctx, backend }, runId, opts);
      if (runId !== undefined || r.kind !== 'done' || !r.closedOnly || closed >= RESUME_CLOSE_MAX)
        return r.kind === 'nothing' && last !== null ? last : r;
      last = r;
    }
  });
}

/** Runs `exec resume` closes in one call, at most, before it answers with the last. */
const RESUME_CLOSE_MAX = 50;

async function resumeWith(
  ctx: ExecContext & { backend: Backend },
  runId: string | undefined,
  opts: RunOptions,
): Promise<ResumeOutcome> {
  if (runId !== undefined) {
    if (!isRunId(runId))
      throw new NotFoundError(
        `${JSON.stringify(runId)} is not a run id (expected r-<time>-<hex>, e.g. r-20261129T190000Z-7f3a)`,
      );
    if ((await ctx.backend.exec.loadRun(runId)) === null)
      throw new NotFoundError(`no run ${runId} in ${ctx.backend.exec.location}`);
  }
  const defs = loadTaskDefinitions(ctx.project);
  let about: string | null = null;
  /** The run resumed had nothing left to run (every unfinished task succeeded since). */
  let closedOnly = false;
  const r = await withRegistry(
    ctx,
    'exec resume',
    opts,
    defs,
    async (held) => {
      const { clock, lease, store, registry, ended } = held;
      const run = runId !== undefined ? (await store.loadRun(runId))! : await findResumable(store, true);
      // (without RUN_ID the lock named the run that was newest before it was taken; another may
      // have become it meanwhile: the heartbeat names the one resumed)
      if (run && runId === undefined) lease.annotate({ run_id: run.run_id });
      if (!run) return { kind: 'nothing' as const, ...(await nothingInterrupted(store)) };
      if (run.status === 'SUCCEEDED')
        return { kind: 'nothing' as const, why: `nothing to resume: run ${run.run_id} already succeeded` };
      // (a run whose end this holder recorded just now carries its own generation already)
      if (!ended.has(run.run_id)) await lease.raiseGeneration(run.generation + 1);
      const defById = new Map(held.defs.map((d) => [d.task.id, d.task]));
      const reset: Record<string, string> = {};
      const retired: string[] = [];
      const doneSince: string[] = [];
      for (const [id, t] of Object.entries(run.tasks)) {
        if (t.status === 'succeeded') continue;
        const def = defById.get(id);
        if (!def) {
          retired.push(id);
          continue;
        }
        // Succeeded since in a newer run (of a newer generation), unchanged: never run again.
        const entry = own(registry.tasks, id);
        if (
          entry?.status === 'succeeded' &&
          entry.hash === taskHash(def) &&
          (entry.generation ?? 0) > (t.gen ?? run.generation)
        ) {
          doneSince.push(id);
          continue;
        }
        reset[id] = taskHash(def);
      }
      // what is left are tasks a resume found retired already: another attempt would only record
      // them failed again (exit 1), and its advice would be to resume once more
      if (
        Object.keys(reset).length === 0 &&
        retired.length > 0 &&
        retired.every((id) => own(run.tasks, id)?.why_code === 'RETIRED')
      )
        return {
          kind: 'nothing' as const,
          why: `nothing to resume: the tasks run ${run.run_id} did not finish (${retired.join(', ')}) are no longer defined in the config; define them again to resume them, or leave the run as it is`,
        };
      // (every unfinished task succeeded since: resumed all the same, it runs nothing and is
      // recorded SUCCEEDED — left INTERRUPTED it hid every older run from `exec resume`)
      let state = applyEvent(run, {
        type: 'run-resumed',
        gen: lease.generation,
        at: nowIso(clock),
        lock_id: lease.lockId,
        owner: ownerOf(),
        command: 'exec resume',
        routine: opts.routine ?? null,
        parallel: opts.parallel ?? ctx.project.config.exec.parallel,
        reset,
      });
      // what succeeded since in a newer run counts as done here too: its dependants run, and the
      // run can succeed (it stayed failed, or interrupted, and blocked them at every resume)
      // (marked SUCCEEDED_SINCE: the registry keeps the run it succeeded in, and what proves it)
      for (const id of doneSince) {
        const where = own(registry.tasks, id)?.last_run_id;
        state = applyEvent(state, {
          type: 'task-finished',
          gen: lease.generation,
          at: nowIso(clock),
          task: id,
          status: 'succeeded',
          exit_code: null,
          signal: null,
          duration_ms: null,
          why_code: 'SUCCEEDED_SINCE',
          why: `succeeded since${where ? ` in run ${where}` : ' in a newer run'}`,
          next: '',
        });
      }
      for (const id of retired) {
        state = applyEvent(state, {
          type: 'task-finished',
          gen: lease.generation,
          at: nowIso(clock),
          task: id,
          status: 'failed',
          exit_code: null,
          signal: null,
          duration_ms: null,
          why_code: 'RETIRED',
          why: 'the task is no longer defined in the config',
          next: 'nothing to do, or define it again and resume',
        });
      }
      const carried = { ...held, state, defs: defById, resuming: true };
      closedOnly = Object.keys(reset).length === 0 && retired.length === 0;
      return { kind: 'run' as const, ...(await runAndRecord(ctx, opts, carried)) };
    },
    async (_clock, store) => (about = runId ?? (await findResumable(store, false))?.run_id ?? null),
  );
  // the conflict's `next` resumes the run it was about, never "the newest" (another, later)
  if (r.kind === 'busy') return { kind: 'conflict', busy: r.busy, runId: about };
  if (r.value.kind === 'nothing') return r.value;
  const { kind: _k, ...done } = r.value;
  return { kind: 'done', ...done, ...(closedOnly ? { closedOnly } : {}) };
}

/** The newest run that is INTERRUPTED, ABORTED, or RUNNING and not running any more: under the
 * exec lock, every run left RUNNING (its owner died, or lost the lock); before it (to name the
 * run in the lock's record), one whose owner is gone. */
async function findResumable(store: ExecStore, underLock: boolean): Promise<RunState | null> {
  for (const id of await store.listRunIds(200)) {
    let run: RunState | null;
    try {
      run = await store.loadRun(id);
    } catch (err) {
      // a corrupt run is reported by `exec show`, not resumed blindly; one that could not be
      // read now stops the command (passed over, an older run would be resumed instead)
      if (!passedOver(err)) throw err;
      continue;
    }
    if (!run) continue;
    if (RESUMABLE.has(run.status) || (run.status === 'RUNNING' && (underLock || !ownerAlive(run)))) return run;
  }
  return null;
}

/** Nothing was interrupted. A FAILED newest run is not resumed unasked (its failures need a
 * fix first), but the user is told how to resume it once fixed, rather than "nothing to do". */
async function nothingInterrupted(store: ExecStore): Promise<{ why: string; next?: string }> {
  const [newest] = await store.listRunIds(1);
  let run: RunState | null = null;
  try {
    run = newest ? await store.loadRun(newest) : null;
  } catch (err) {
    // a corrupt run is reported by `exec show`
    if (!passedOver(err)) throw err;
  }
  if (run?.status !== 'FAILED') return { why: 'nothing to resume' };
  const c = summarize(run);
  const counts = [
    c.failed ? `${c.failed} task${c.failed === 1 ? '' : 's'} failed` : null,
    c.skipped_dependency ? `${c.skipped_dependency} skipped` : null,
  ];
  const next = `routinely exec resume ${run.run_id}`;
  return {
    why: `nothing interrupted to resume; the newest run ${run.run_id} FAILED (${counts.filter(Boolean).join(', ')}); fix them and run: ${next}`,
    next,
  };
}

export async function resetTasks(ctx: ExecContext, ids: string[], policy: LockedPolicy) {
  const defs = loadTaskDefinitions(ctx.project);
  checkNamed(defs, ids);
  return withRegistry(
    ctx,
    'exec reset',
    { ...policy, routine: null },
    defs,
    async ({ lease, clock, store, registry }) => {
      const tasks = { ...registry.tasks };
      for (const id of ids)
        tasks[id] = { ...tasks[id]!, status: 'pending', updated_at: nowIso(clock), generation: lease.generation };
      await store.saveRegistry({ ...registry, tasks }, nowIso(clock), lease);
      return ids;
    },
    undefined,
    (current) => checkNamed(current, ids),
  );
}
