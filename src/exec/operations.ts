// The exec commands as library operations (SPEC §5): register, run, resume, reset, and the read
// views. Each takes the project exec lock itself and returns a typed outcome; the CLI prints it.

import { basename } from 'node:path';
import { printable } from '../printable.js';
import { acquireAnnounced } from '../announced-wait.js';
import { openBackend, type Backend } from '../backend.js';
import { systemClock, type Clock } from '../clock.js';
import type { LockRecord } from '../lock/record.js';
import type { Project } from '../config/load.js';
import type { TaskDef } from '../config/types.js';
import { NotFoundError, StateIOError, UsageError } from '../errors.js';
import { EXEC_LOCK_KEY, type BusyPolicy } from '../lock/backend.js';
import { randomHex } from '../lock/files.js';
import { samePidSpace, selfIdentity, systemProbe } from '../lock/identity.js';
import type { AcquireResult, Lease } from '../lock/lease.js';
import { executeRun } from './executor.js';
import { asRecorded, finalStatus, foldRun, rebuildRegistry } from './outcome.js';
import { dependencyOrder } from './plan.js';
import { emptyRegistry, syncRegistry, taskHash, type Registry } from './registry.js';
import { applyEvent, isRunId, newRunId, summarize, type RunEvent, type RunState, type TaskRun } from './run-state.js';
import { FencedError, type ExecStore } from './store.js';
import { loadTaskDefinitions, type SourcedTask } from './task-source.js';

export interface ExecContext {
  project: Project;
  clock?: Clock;
  /** Non-fatal problems (a corrupt registry moved aside, ...). */
  warn?: (message: string) => void;
  /** Environment for tasks (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** An open backend to use (else the project's is opened and closed per operation). */
  backend?: Backend;
}

/** Runs `fn` with the context's backend, or with the project's, opened for the call. */
async function withStore<T>(ctx: ExecContext, fn: (backend: Backend) => Promise<T>): Promise<T> {
  if (ctx.backend) return fn(ctx.backend);
  const backend = await openBackend(ctx.project);
  try {
    return await fn(backend);
  } finally {
    await backend.close();
  }
}

type Busy = Exclude<AcquireResult, { ok: true }>;

export interface RegisterSummary {
  added: string[];
  changed: string[];
  retired: string[];
  total: number;
}

const nowIso = (c: Clock): string => new Date(c.now()).toISOString();

/** Every run the store can read, oldest first (unreadable ones reported and skipped). */
async function allRuns(store: ExecStore, warn: (m: string) => void): Promise<RunState[]> {
  const runs: RunState[] = [];
  for (const id of await store.listRunIds(100_000)) {
    try {
      const run = await store.loadRun(id);
      if (run) runs.push(run);
    } catch (err) {
      warn((err as Error).message);
    }
  }
  return runs.reverse();
}

/** The registry; a missing or corrupt one is rebuilt from the runs, never taken for "nothing
 * ever ran" (SPEC §3). `write`: under the exec lock, about to save it (a corrupt file is moved
 * aside); else a read-only view (nothing is moved or written). */
async function currentRegistry(ctx: ExecContext, store: ExecStore, defs: SourcedTask[], write: boolean, clock: Clock = ctx.clock ?? systemClock): Promise<{ registry: Registry; rebuilt: boolean }> {
  const warn = ctx.warn ?? (() => {});
  const read = await store.loadRegistry({ write });
  if (read.kind === 'ok') return { registry: read.registry, rebuilt: false };
  const runs = await allRuns(store, warn);
  if (read.kind === 'missing' && runs.length === 0) return { registry: emptyRegistry(), rebuilt: false };
  const how = read.kind === 'missing' ? 'is missing' : `is corrupt (${read.problem})${read.movedTo ? `; moved aside to ${basename(read.movedTo)}` : ''}`;
  warn(`${store.registryLocation} ${how}; rebuilt from ${runs.length} run${runs.length === 1 ? '' : 's'}`);
  const registry = rebuildRegistry(runs, defs, nowIso(clock));
  // A run still RUNNING is either someone's live run (a read-only view) or a dead holder's (we
  // hold the lock): either way it must be folded again when it ends.
  registry.active_runs = runs.filter((r) => r.status === 'RUNNING').map((r) => r.run_id);
  return { registry, rebuilt: true };
}

/** Under the lock: fold runs left unfinished by dead holders, then sync with the definitions. */
async function prepareRegistry(ctx: ExecContext, store: ExecStore, clock: Clock, lease: Lease, defs: SourcedTask[], currentRun?: string) {
  const warn = ctx.warn ?? (() => {});
  let { registry, rebuilt } = await currentRegistry(ctx, store, defs, true, clock);
  await lease.raiseGeneration((registry.generation ?? 0) + 1);
  let dirty = rebuilt;
  for (const runId of registry.active_runs) {
    if (runId === currentRun) continue;
    let run: RunState | null;
    try {
      run = isRunId(runId) ? await store.loadRun(runId) : null;
    } catch (err) {
      warn((err as Error).message);
      run = null;
    }
    if (run === null) {
      registry = { ...registry, active_runs: registry.active_runs.filter((r) => r !== runId) };
      dirty = true;
      continue;
    }
    await lease.raiseGeneration(run.generation + 1);
    if (run.status === 'RUNNING') {
      if (ownerAlive(run)) continue; // a holder winding down after losing the lock
      run = await markOwnerDead(store, run, lease, clock);
    }
    registry = foldRun(registry, run, nowIso(clock));
    dirty = true;
  }
  const sync = syncRegistry(registry, defs, nowIso(clock), lease.generation);
  if (dirty || sync.added.length || sync.changed.length || sync.retired.length) {
    await store.saveRegistry(sync.registry, nowIso(clock), lease);
  }
  const summary: RegisterSummary = { added: sync.added, changed: sync.changed, retired: sync.retired, total: defs.length };
  return { registry: sync.registry, summary };
}

/** A RUNNING run's owner is alive when it is this very process or a live process on this host
 * with the recorded start time. */
function ownerAlive(run: RunState): boolean {
  const probe = systemProbe();
  const o = run.owner;
  if (!samePidSpace(o, probe)) return false; // we hold the lock: a writer elsewhere has lost it
  const p = probe.inspect(o.pid);
  return p.state === 'alive' && (!p.startTime || !o.start_time || p.startTime === o.start_time);
}

async function markOwnerDead(store: ExecStore, run: RunState, lease: Lease, clock: Clock): Promise<RunState> {
  const event: RunEvent = {
    type: 'run-finished', gen: lease.generation, at: nowIso(clock), status: 'INTERRUPTED', why_code: 'OWNER_DEAD',
    why: `its process (pid ${run.owner.pid} on ${printable(run.owner.host)}) ended without finishing the run`,
    next: `routinely exec resume ${run.run_id}`,
  };
  const writer = store.runWriter(run.run_id, lease);
  try {
    writer.append(event);
    await writer.flush();
  } finally {
    await writer.close();
  }
  return applyEvent(run, event);
}

export interface LockedPolicy extends BusyPolicy {
  /** Called once the exec lock is held, before any work (awaited: a fire records that it has
   * started before its work begins). */
  onLocked?: () => void | Promise<void>;
  /** With `ifBusy: 'wait'`: called once, naming the holder, when the lock is busy at first. */
  onWait?: (why: string, holder: LockRecord | null) => void;
}

async function withLock<T>(
  ctx: ExecContext,
  command: string,
  routine: string | null | undefined,
  policy: LockedPolicy,
  fn: (lease: Lease, clock: Clock, store: ExecStore) => Promise<T>,
): Promise<{ kind: 'busy'; busy: Busy } | { kind: 'ok'; value: T }> {
  return withStore(ctx, async (backend) => {
    // the backend's clock: with a database, run ids and times follow the database clock
    const clock = ctx.clock ?? backend.clock;
    const got = await acquireAnnounced(backend.lock, EXEC_LOCK_KEY, { command, routine: routine ?? null }, policy, policy.onWait);
    if (!got.ok) return { kind: 'busy' as const, busy: got };
    try {
      await policy.onLocked?.();
      return { kind: 'ok' as const, value: await fn(got.lease, clock, backend.exec) };
    } finally {
      await got.lease.release();
    }
  });
}

export async function register(ctx: ExecContext, policy: LockedPolicy & { routine?: string | null }) {
  const defs = loadTaskDefinitions(ctx.project);
  return withLock(ctx, 'register', policy.routine, policy, async (lease, clock, store) => (await prepareRegistry(ctx, store, clock, lease, defs)).summary);
}

export interface RunOptions extends LockedPolicy {
  /** Run exactly these tasks (else every ready pending task). */
  tasks?: string[];
  parallel?: number;
  routine?: string | null;
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

/** Selects the ready tasks: pending (or skipped earlier for a dependency) with every dependency
 * already succeeded or itself selected. Named tasks are taken as they are. */
export function selectTasks(registry: Registry, named: string[] | undefined): string[] {
  const entries = Object.values(registry.tasks).filter((e) => e.status !== 'retired');
  if (named && named.length > 0) return named;
  const chosen = new Set(entries.filter((e) => e.status === 'pending' || e.status === 'skipped_dependency').map((e) => e.id));
  let changed = true;
  while (changed) {
    changed = false;
    for (const id of chosen) {
      const deps = registry.tasks[id]!.definition.dependsOn ?? [];
      if (!deps.every((d) => chosen.has(d) || registry.tasks[d]?.status === 'succeeded')) {
        chosen.delete(id);
        changed = true;
      }
    }
  }
  return entries.filter((e) => chosen.has(e.id)).map((e) => e.id);
}

/** Why `exec run` found nothing to run, and how to run again: counts by status, then the
 * command that changes that (reset, resume). */
export function nothingToRunWhy(registry: Registry): string {
  const entries = Object.values(registry.tasks).filter((e) => e.status !== 'retired');
  if (entries.length === 0) return 'nothing to run: the config has no tasks (exec.tasks, exec.taskDirs)';
  const count = (s: string): number => entries.filter((e) => e.status === s).length;
  const WORDS: [string, string][] = [['succeeded', 'succeeded'], ['failed', 'failed'], ['skipped_dependency', 'waiting for a failed dependency'], ['interrupted', 'interrupted'], ['running', 'running'], ['pending', 'pending behind those']];
  const parts = WORDS.filter(([s]) => count(s) > 0).map(([s, w]) => `${count(s)} ${w}`);
  const hints: string[] = [];
  if (count('failed') + count('skipped_dependency') + count('interrupted') > 0) hints.push('routinely exec resume retries the failed and interrupted tasks of their run');
  hints.push(`routinely exec reset TASK… sets tasks back to pending for the next exec run`);
  return `nothing to run: ${entries.length === count('succeeded') ? `all ${entries.length} task${entries.length === 1 ? '' : 's'} succeeded` : parts.join(', ')}\n  ${hints.join('\n  ')}`;
}

function checkNamed(defs: SourcedTask[], named: string[] | undefined): void {
  if (!named) return;
  const known = new Set(defs.map((d) => d.task.id));
  const unknown = named.filter((n) => !known.has(n));
  if (unknown.length > 0) {
    const list = [...known].slice(0, 20).join(', ') || '(none)';
    throw new UsageError(`unknown task${unknown.length > 1 ? 's' : ''} ${unknown.map((u) => JSON.stringify(u)).join(', ')} (known: ${list})`);
  }
}

export async function execRun(ctx: ExecContext, opts: RunOptions = {}): Promise<RunOutcome> {
  const defs = loadTaskDefinitions(ctx.project);
  checkNamed(defs, opts.tasks);
  const r = await withLock(ctx, 'exec run', opts.routine, opts, async (lease, clock, store) => {
    const { registry, summary } = await prepareRegistry(ctx, store, clock, lease, defs);
    const ids = selectTasks(registry, opts.tasks);
    if (ids.length === 0) return { kind: 'nothing' as const, summary, why: nothingToRunWhy(registry) };
    const defById = new Map(defs.map((d) => [d.task.id, d.task]));
    const ordered = dependencyOrder(ids.map((id) => ({ id, provider: '', dependsOn: defById.get(id)!.dependsOn ?? [] }))).map((t) => t.id);
    const runId = newRunId(clock.now(), randomHex(2));
    const at = nowIso(clock);
    const tasks: Record<string, TaskRun> = {};
    for (const id of ordered) {
      const def = defById.get(id)!;
      tasks[id] = {
        status: 'pending', provider: def.provider ?? 'default', attempts: 0, started_at: null, finished_at: null,
        duration_ms: null, exit_code: null, signal: null, log: `${id}.log`, hash: taskHash(def),
      };
    }
    const state: RunState = {
      version: 1, run_id: runId, status: 'RUNNING', command: 'exec run', routine: opts.routine ?? null,
      generation: lease.generation, lock_id: lease.lockId, owner: ownerOf(), attempt: 1,
      parallel: opts.parallel ?? ctx.project.config.exec.parallel, created_at: at, updated_at: at, finished_at: null, tasks,
    };
    return { kind: 'run' as const, ...(await carryOut(ctx, store, clock, lease, registry, summary, state, defById, opts, false)) };
  });
  if (r.kind === 'busy') return r;
  if (r.value.kind === 'nothing') return r.value;
  const { kind: _k, ...done } = r.value;
  return { kind: 'done', ...done };
}

function ownerOf() {
  const me = selfIdentity();
  return { pid: me.pid, host: me.host, boot_id: me.boot_id, start_time: me.start_time, ...(me.pid_ns ? { pid_ns: me.pid_ns } : {}) };
}

/** Creates (or reopens) the run, executes it, records the outcome, folds it into the registry. */
async function carryOut(
  ctx: ExecContext,
  store: ExecStore,
  clock: Clock,
  lease: Lease,
  registry: Registry,
  summary: RegisterSummary,
  state: RunState,
  defs: Map<string, TaskDef>,
  opts: RunOptions,
  resuming: boolean,
): Promise<{ state: RunState; summary: RegisterSummary; bytesWritten: number }> {
  lease.annotate({ run_id: state.run_id });
  const writer = store.runWriter(state.run_id, lease);
  try {
    // The registry names the run before the run exists: a crash in between leaves a name that
    // the next command drops, never a run that nobody folds back into the registry.
    const withRun: Registry = { ...registry, active_runs: [...registry.active_runs.filter((r) => r !== state.run_id), state.run_id] };
    await store.saveRegistry(withRun, nowIso(clock), lease);
    if (resuming) await writer.reopen(state);
    else await writer.create(state);
    opts.onStart?.(state);
    let result;
    try {
      result = await executeRun({
      root: ctx.project.root,
      writer,
      logPath: (taskId) => store.logPath(state.run_id, taskId),
      lease,
      clock,
      state,
      defs,
      doneBefore: (id) => registry.tasks[id]?.status === 'succeeded',
      caps: { parallel: opts.parallel ?? ctx.project.config.exec.parallel, providers: ctx.project.config.exec.providers },
      stop: opts.stop ?? new AbortController().signal,
      runTimeoutMs: opts.runTimeoutMs,
      killGraceMs: opts.killGraceMs,
      runLogBytes: ctx.project.config.retention.runLogBytes,
      env: ctx.env,
      passEnv: ctx.project.config.passEnv,
      onEvent: opts.onEvent,
    });
    } catch (err) {
      if (err instanceof StateIOError) {
        // SPEC §3: say what could not be written (exit 74), and record the run as ABORTED if the
        // state folder still takes a line (the journal usually does when a snapshot does not).
        const final = finalStatus(state, 'STATE_ERROR', err.message);
        try {
          writer.append({ type: 'run-finished', gen: lease.generation, at: nowIso(clock), ...final });
          await writer.flush();
        } catch {
          // nothing more can be written; the next command finds the run's owner gone
        }
      }
      throw err;
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
        if (!(err instanceof FencedError)) throw err;
        fenced = true;
      }
    }
    if (fenced) {
      // SPEC §4.3: record ABORTED / LOCK_LOST, write nothing else. The append carries our old
      // generation, so it can never override what a newer holder records for this run.
      const lost: RunEvent = { ...event, status: 'ABORTED', why_code: 'LOCK_LOST', why: finalStatus(result.state, 'LOCK_LOST', lease.lost?.why).why };
      const notStored = await writer.appendUnfenced(lost);
      // What we report is what the record says: a task whose result never reached it is run
      // again by resume, so it is not reported as done (SPEC §5: the record is the truth).
      const state = asRecorded(applyEvent(result.state, lost), writer.unrecorded(), notStored);
      return { state, summary, bytesWritten: writer.bytesWritten };
    }
    // The run is on record. A lock lost in this last moment only leaves the registry to be
    // folded by the next command (the run is still in active_runs).
    let bytes = 0;
    try {
      bytes = await store.saveRegistry(foldRun(withRun, finished, nowIso(clock)), nowIso(clock), lease);
    } catch (err) {
      if (!(err instanceof FencedError)) throw err;
      ctx.warn?.(`run ${finished.run_id} is recorded, but the task registry was not updated (${err.message}); the next command does it`);
    }
    await pruneRuns(ctx, store, lease, new Set([finished.run_id, ...withRun.active_runs]));
    return { state: finished, summary, bytesWritten: writer.bytesWritten + bytes };
  } finally {
    await writer.close();
  }
}

/** retention.execRuns: after a run is on record, the oldest finished runs past the newest
 * `execRuns` are removed, record and task logs. Never one that `exec resume` could pick up
 * (RUNNING, INTERRUPTED, ABORTED) nor one the registry still names; a FAILED one may go, as its
 * failed tasks stay pending in the registry and the next `exec run` runs them. Retention is
 * housekeeping: a removal that fails is a warning, and is tried again after the next run. */
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
  | { kind: 'conflict'; busy: Busy }
  | { kind: 'nothing'; why: string; next?: string }
  | { kind: 'done'; state: RunState; summary: RegisterSummary; bytesWritten: number };

const RESUMABLE = new Set(['INTERRUPTED', 'ABORTED']);

export async function execResume(ctx: ExecContext, runId: string | undefined, opts: RunOptions = {}): Promise<ResumeOutcome> {
  return withStore(ctx, (backend) => resumeWith({ ...ctx, backend }, runId, opts));
}

async function resumeWith(ctx: ExecContext & { backend: Backend }, runId: string | undefined, opts: RunOptions): Promise<ResumeOutcome> {
  if (runId !== undefined) {
    if (!isRunId(runId)) throw new NotFoundError(`${JSON.stringify(runId)} is not a run id (expected r-<time>-<hex>, e.g. r-20261129T190000Z-7f3a)`);
    if ((await ctx.backend.exec.loadRun(runId)) === null) throw new NotFoundError(`no run ${runId} in ${ctx.backend.exec.location}`);
  }
  const defs = loadTaskDefinitions(ctx.project);
  const r = await withLock(ctx, 'exec resume', opts.routine, opts, async (lease, clock, store) => {
    const { registry, summary } = await prepareRegistry(ctx, store, clock, lease, defs);
    const run = runId !== undefined ? (await store.loadRun(runId))! : await findResumable(store);
    if (!run) return { kind: 'nothing' as const, ...(await nothingInterrupted(store)) };
    if (run.status === 'SUCCEEDED') return { kind: 'nothing' as const, why: `nothing to resume: run ${run.run_id} already succeeded` };
    if (run.status === 'RUNNING' && ownerAlive(run)) {
      return { kind: 'nothing' as const, why: `nothing to resume: run ${run.run_id} is still running (pid ${run.owner.pid})` };
    }
    await lease.raiseGeneration(run.generation + 1);
    const defById = new Map(defs.map((d) => [d.task.id, d.task]));
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
      const entry = registry.tasks[id];
      if (entry?.status === 'succeeded' && entry.hash === taskHash(def) && (entry.generation ?? 0) > (t.gen ?? run.generation)) {
        doneSince.push(id);
        continue;
      }
      reset[id] = taskHash(def);
    }
    if (Object.keys(reset).length === 0 && retired.length === 0) {
      const where = [...new Set(doneSince.map((id) => registry.tasks[id]?.last_run_id).filter(Boolean))].join(', ');
      return { kind: 'nothing' as const, why: `nothing to resume: the unfinished tasks of run ${run.run_id} (${doneSince.join(', ')}) have succeeded since${where ? ` (run ${where})` : ''}` };
    }
    let state = applyEvent(run, {
      type: 'run-resumed', gen: lease.generation, at: nowIso(clock), lock_id: lease.lockId, owner: ownerOf(),
      command: 'exec resume', routine: opts.routine ?? null, parallel: opts.parallel ?? ctx.project.config.exec.parallel, reset,
    });
    for (const id of retired) {
      state = applyEvent(state, {
        type: 'task-finished', gen: lease.generation, at: nowIso(clock), task: id, status: 'failed', exit_code: null, signal: null, duration_ms: null,
        why_code: 'RETIRED', why: 'the task is no longer defined in the config', next: 'nothing to do, or define it again and resume',
      });
    }
    return { kind: 'run' as const, ...(await carryOut(ctx, store, clock, lease, registry, summary, state, defById, opts, true)) };
  });
  if (r.kind === 'busy') return { kind: 'conflict', busy: r.busy };
  if (r.value.kind === 'nothing') return r.value;
  const { kind: _k, ...done } = r.value;
  return { kind: 'done', ...done };
}

/** The newest run that is INTERRUPTED, ABORTED, or RUNNING with a dead owner. */
async function findResumable(store: ExecStore): Promise<RunState | null> {
  for (const id of await store.listRunIds(200)) {
    let run: RunState | null;
    try {
      run = await store.loadRun(id);
    } catch {
      continue; // a corrupt run is reported by `exec show`, not resumed blindly
    }
    if (!run) continue;
    if (RESUMABLE.has(run.status) || (run.status === 'RUNNING' && !ownerAlive(run))) return run;
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
  } catch {
    // a corrupt run is reported by `exec show`
  }
  if (run?.status !== 'FAILED') return { why: 'nothing to resume' };
  const c = summarize(run);
  const counts = [c.failed ? `${c.failed} task${c.failed === 1 ? '' : 's'} failed` : null, c.skipped_dependency ? `${c.skipped_dependency} skipped` : null];
  const next = `routinely exec resume ${run.run_id}`;
  return { why: `nothing interrupted to resume; the newest run ${run.run_id} FAILED (${counts.filter(Boolean).join(', ')}); fix them and run: ${next}`, next };
}

export async function resetTasks(ctx: ExecContext, ids: string[], policy: LockedPolicy) {
  const defs = loadTaskDefinitions(ctx.project);
  checkNamed(defs, ids);
  return withLock(ctx, 'exec reset', null, policy, async (lease, clock, store) => {
    const { registry } = await prepareRegistry(ctx, store, clock, lease, defs);
    const tasks = { ...registry.tasks };
    for (const id of ids) tasks[id] = { ...tasks[id]!, status: 'pending', updated_at: nowIso(clock), generation: lease.generation };
    await store.saveRegistry({ ...registry, tasks }, nowIso(clock), lease);
    return ids;
  });
}

export interface TaskView {
  id: string;
  status: string;
  provider: string;
  source: string;
  dependsOn: string[];
  last_run_id: string | null;
  last_exit_code: number | null;
  updated_at: string;
}

/** The registry as it stands, with the live statuses of runs still in progress. Read-only: it
 * neither takes the lock nor registers (run `register` for that). */
export async function execStatus(ctx: ExecContext): Promise<TaskView[]> {
  const defs = loadTaskDefinitions(ctx.project);
  return withStore(ctx, async (backend) => {
  const store = backend.exec;
  const before = await holderGeneration(backend);
  const { registry } = await currentRegistry(ctx, store, defs, false, ctx.clock ?? backend.clock);
  const loaded: RunState[] = [];
  for (const runId of registry.active_runs) {
    try {
      const run = isRunId(runId) ? await store.loadRun(runId) : null;
      if (run) loaded.push(run);
    } catch {
      // shown by `exec show`
    }
  }
  const holders = [before, await holderGeneration(backend)];
  const live = new Map<string, TaskRun>();
  for (const run of loaded.map((r) => asSeen(r, holders))) {
    for (const [id, t] of Object.entries(run.tasks)) {
      // never over what a newer generation recorded (a run of a holder that lost the lock)
      if ((t.gen ?? run.generation) < (registry.tasks[id]?.generation ?? 0)) continue;
      if (run.status === 'RUNNING' || t.status !== 'pending') live.set(id, t);
    }
  }
  return Object.values(registry.tasks).map((e) => ({
    id: e.id,
    status: live.get(e.id)?.status ?? e.status,
    provider: e.definition.provider ?? 'default',
    source: e.source,
    dependsOn: e.definition.dependsOn ?? [],
    last_run_id: e.last_run_id,
    last_exit_code: e.last_exit_code,
    updated_at: e.updated_at,
  }));
  });
}

/** Who holds the exec lock, as a reader judges a RUNNING run by it: the generation of a live
 * holder, `free`, `expired` (stale: whoever had it can write nothing more, every write is
 * fenced), or undefined when it cannot be read (then nothing is concluded from it). */
type LockSeen = number | 'free' | 'expired' | undefined;

async function holderGeneration(backend: Backend): Promise<LockSeen> {
  try {
    const s = await backend.lock.status(EXEC_LOCK_KEY);
    return s.state === 'free' ? 'free' : s.state === 'stale' ? 'expired' : s.generation;
  } catch {
    return undefined;
  }
}

/** A run as a read-only view shows it, without writing anything now:
 * - one left RUNNING by a process that is gone (SIGKILL, a crash) reads as INTERRUPTED /
 *   OWNER_DEAD, as the next command will record it;
 * - one left RUNNING by a writer whose generation no longer holds the exec lock (free, expired,
 *   or held at another epoch) reads as INTERRUPTED too: nothing runs it any more, and its final record
 *   may have been lost with the database (an asynchronous failover). `holders` are the lock's holder
 *   generations read before and after the run was read; only when every read agrees, so a run
 *   that starts or ends between the reads is not misjudged. */
export function asSeen(run: RunState, holders?: readonly LockSeen[]): RunState {
  if (run.status !== 'RUNNING') return run;
  const interrupted = (why_code: 'OWNER_DEAD' | 'LOCK_LOST', why: string): RunState => ({
    ...run,
    tasks: Object.fromEntries(Object.entries(run.tasks).map(([id, t]) => [id, t.status === 'running' ? { ...t, status: 'interrupted' as const } : t])),
    status: 'INTERRUPTED', why_code, why, next: `routinely exec resume ${run.run_id}`,
  });
  const who = `pid ${run.owner.pid} on ${printable(run.owner.host)}`;
  if (!ownerAlive(run) && samePidSpace(run.owner, systemProbe())) return interrupted('OWNER_DEAD', `its process (${who}) ended without finishing the run`);
  const now = holders?.at(-1);
  if (!holders?.length || !holders.every((h) => h !== undefined && h !== run.generation)) return run;
  const lock = now === 'free' ? 'the exec lock is free' : now === 'expired' ? 'its lease expired' : `the exec lock is held at epoch ${now}`;
  return interrupted('LOCK_LOST', `its writer (${who}, epoch ${run.generation}) no longer holds the exec lock (${lock}); the run did not finish on record`);
}

/** A run whose state cannot be read at all (its run.json damaged and no journal to rebuild it). */
export interface UnreadableRun {
  run_id: string;
  status: 'UNREADABLE';
  why: string;
}

export async function listRuns(ctx: ExecContext, limit = 20): Promise<(RunState | UnreadableRun)[]> {
  return withStore(ctx, async (backend) => {
    const store = backend.exec;
    const before = await holderGeneration(backend);
    const runs: (RunState | UnreadableRun)[] = [];
    for (const id of await store.listRunIds(limit)) {
      try {
        const r = await store.loadRun(id);
        if (r) runs.push(r);
      } catch (err) {
        runs.push({ run_id: id, status: 'UNREADABLE', why: (err as Error).message });
      }
    }
    const holders = [before, await holderGeneration(backend)];
    return runs.map((r) => (r.status === 'UNREADABLE' ? r : asSeen(r as RunState, holders)));
  });
}

export async function showRun(ctx: ExecContext, runId: string): Promise<RunState> {
  if (!isRunId(runId)) throw new NotFoundError(`${JSON.stringify(runId)} is not a run id (expected r-<time>-<hex>, e.g. r-20261129T190000Z-7f3a)`);
  return withStore(ctx, async (backend) => {
    const before = await holderGeneration(backend);
    const run = await backend.exec.loadRun(runId);
    if (!run) throw new NotFoundError(`no run ${runId} in ${backend.exec.location}`);
    return asSeen(run, [before, await holderGeneration(backend)]);
  });
}
