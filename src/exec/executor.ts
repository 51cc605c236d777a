// Executes the tasks of one run under a held lease: at most `parallel` at once and at most
// `maxConcurrency` per provider, dependencies first, each task in its own process group with
// its output in `<run>/<task>.log`, killed on timeout. Stops everything when the lease is lost
// (ABORTED / LOCK_LOST), on SIGINT/SIGTERM (INTERRUPTED) or when the whole run times out
// (ABORTED / RUN_TIMEOUT). The decisions are in plan.ts; this file only carries them out.
// (Over 300 lines: the task loop and its four ways to stop share one run's state.)

import { dirname, relative, resolve } from 'node:path';
import type { Clock } from '../clock.js';
import { RETENTION_DEFAULTS, type TaskDef } from '../config/types.js';
import type { Lease } from '../lock/lease.js';
import { blockedTasks, StartPlanner, type Caps, type PlanTask } from './plan.js';
import { keepTail, openAppendTo, writeText } from '../fs/durable.js';
import { closeFd } from '../fs/names.js';
import { fileSystemFull, realPath, statFollow } from '../fs/look.js';
import { commandEnv, leftoverMessage, OUT_OF_RESOURCE, type ProcessResult } from './process.js';
import { CUT_LINE_PREFIX, outputLeftOut } from './capped-output.js';
import { runGroupUnderLease, withLockEnv, type GroupRun } from './group-run.js';
import type { TaskStatus } from './registry.js';
import { type RunWriter } from './store.js';
import { setMaxListeners } from 'node:events';
import { FencedError, StateIOError, UnsafePathError } from '../errors.js';
import { applyEventInPlace, type RunEvent, type RunState, type Why } from './run-state.js';
import { own } from '../is-object.js';

export type StopCause = 'LOCK_LOST' | 'INTERRUPTED' | 'RUN_TIMEOUT' | 'STATE_ERROR';

export interface ExecuteOptions {
  root: string;
  writer: RunWriter;
  /** Where a task's output goes. */
  logPath: (taskId: string) => string;
  lease: Lease;
  clock: Clock;
  /** The run so far: tasks to do are `pending`. */
  state: RunState;
  defs: ReadonlyMap<string, TaskDef>;
  /** Whether a dependency outside this run has already succeeded. */
  doneBefore: (id: string) => boolean;
  /** A dependency outside this run as the registry has it (`failed`, `interrupted`, …), said
   * when it blocks a task of this one. */
  statusBefore?: (id: string) => string | undefined;
  caps: Caps;
  /** Aborted by the caller on SIGINT/SIGTERM. */
  stop: AbortSignal;
  runTimeoutMs?: number;
  /** Grace between SIGTERM and SIGKILL when tasks are stopped. */
  killGraceMs?: number;
  /** Output kept of one task attempt (retention.runLogBytes; default 4 MiB). */
  runLogBytes?: number;
  env?: NodeJS.ProcessEnv;
  /** Withheld variables the tasks may see anyway (config `passEnv`). */
  passEnv?: readonly string[];
  onEvent?: (event: RunEvent, state: RunState) => void;
}

export interface ExecuteResult {
  state: RunState;
  stoppedBy: StopCause | null;
  /** What tasks that ended on their own did after the lock was lost: in `state`, never written
   * (reported as not recorded: outcome.ts asRecorded). */
  notRecorded: RunEvent[];
}

const iso = (clock: Clock): string => new Date(clock.now()).toISOString();

export async function executeRun(o: ExecuteOptions): Promise<ExecuteResult> {
  // A private copy, changed in place: recording stays O(1) per event however many tasks.
  const state: RunState = { ...o.state, tasks: { ...o.state.tasks } };
  const gen = o.lease.generation;
  const stopper = new AbortController();
  // every running task listens to both (up to --parallel of them): no "possible leak" warning
  setMaxListeners(0, stopper.signal, o.lease.signal);
  let stoppedBy: StopCause | null = null;
  const stop = (cause: StopCause): void => {
    if (stoppedBy) return;
    stoppedBy = cause;
    stopper.abort(cause);
  };
  const onLost = (): void => stop('LOCK_LOST');
  const onStop = (): void => stop('INTERRUPTED');
  o.lease.signal.addEventListener('abort', onLost, { once: true });
  o.stop.addEventListener('abort', onStop, { once: true });
  if (o.lease.signal.aborted) onLost();
  if (o.stop.aborted) onStop();
  const timer = o.runTimeoutMs !== undefined ? setTimeout(() => stop('RUN_TIMEOUT'), o.runTimeoutMs) : undefined;

  /** Records an event: appended (fenced) and applied. A fenced append means the lock is gone. */
  const notRecorded: RunEvent[] = [];
  let fenced = false;
  const record = (event: RunEvent): void => {
    if (stoppedBy !== 'LOCK_LOST' && !fenced) {
      try {
        o.writer.append(event);
      } catch (err) {
        if (!(err instanceof FencedError)) throw err;
        fenced = true;
        stop('LOCK_LOST');
      }
    }
    if (stoppedBy === 'LOCK_LOST' || fenced) {
      // a holder that lost its lock writes nothing more; a task that ended on its own meanwhile
      // (it exited 0 while this process was stopped) is reported as it ended, as not recorded
      if (event.type === 'task-finished' && event.status !== 'interrupted') {
        applyEventInPlace(state, event);
        notRecorded.push(event);
      }
      return;
    }
    applyEventInPlace(state, event);
    if (event.type === 'task-started') {
      status.set(event.task, 'running');
      planner.started(event.task);
    } else if (event.type === 'task-finished') {
      if (status.get(event.task) === 'running') planner.finished(event.task);
      status.set(event.task, event.status);
      // only a task that did not succeed can block its dependants
      if (event.status !== 'succeeded') mayBlock = true;
    }
    o.onEvent?.(event, state);
  };

  const plan: PlanTask[] = Object.entries(state.tasks).map(([id, t]) => ({
    id,
    provider: t.provider,
    dependsOn: o.defs.get(id)?.dependsOn ?? [],
  }));
  const status = new Map<string, TaskStatus>(Object.entries(state.tasks).map(([id, t]) => [id, t.status]));
  const planner = new StartPlanner(plan, status, o.doneBefore, o.caps);
  // whether a dependant may have become blocked since the last look: at the start (a dependency
  // outside the run that did not succeed), then after a task that did not succeed
  let mayBlock = true;
  const skipBlocked = (): void => {
    if (stoppedBy) return; // a stopped run leaves what it did not reach pending, for resume
    if (!mayBlock) return;
    mayBlock = false;
    for (const [id, dep] of blockedTasks(plan, status, o.doneBefore)) {
      const depStatus =
        own(state.tasks, dep)?.status ??
        (o.statusBefore?.(dep) ? `${o.statusBefore(dep)} in an earlier run, not in this one` : 'not run');
      record({
        type: 'task-finished',
        gen,
        at: iso(o.clock),
        task: id,
        status: 'skipped_dependency',
        exit_code: null,
        signal: null,
        duration_ms: null,
        why_code: 'DEPENDENCY_FAILED',
        why: `dependency ${dep} did not succeed (${depStatus})`,
        next: `fix ${dep}, then: routinely exec resume ${state.run_id}`,
      });
    }
  };

  const running = new Map<string, Promise<void>>();
  /** Tasks waiting for room before they start again (out of a resource): none start meanwhile. */
  const roomWaiters = new Set<string>();
  let roomHopeless = false;
  const failures: unknown[] = [];
  // what every task's environment starts from: copied once per run (process.env is read key by
  // key through the runtime: copying it for each of 500 tasks cost 0.14 ms each)
  // with the lock's variables, which are the same for every task of the run
  const baseEnv = withLockEnv(commandEnv(o.env ?? process.env, o.passEnv ?? []), o.lease);
  // the project root's real path, looked up once for the run (a root that is gone or moved
  // during the run stays the folder it was; looked up again by the next run)
  let realRoot: string | undefined;
  const rootOnce = (): string => (realRoot ??= realPath(o.root));
  let finishedAtStart = false;
  /** A task the stop kept from starting again (it waited for room): the stop cut it short. */
  let cutShort = false;
  /** Starts task `id`; false when it cannot be started now (out of descriptors while other
   * tasks run: nothing recorded, it is started once one of them ended). */
  const startTask = (id: string): boolean => {
    const def = o.defs.get(id)!;
    const logPath = o.logPath(id);
    // its log first (for the attempt its start makes)
    let log: { fd: number; capBytes: number } | null = null;
    let logError: unknown = null;
    if (!stoppedBy) {
      try {
        log = openLog(
          logPath,
          state.tasks[id]!.attempts + 1,
          state.attempt,
          o.clock,
          o.runLogBytes ?? RETENTION_DEFAULTS.runLogBytes,
        );
      } catch (err) {
        if (err instanceof StateIOError && OUT_OF_RESOURCE.has(err.errno ?? '') && running.size > 0) return false;
        logError = err;
      }
    }
    record({ type: 'task-started', gen, at: iso(o.clock), task: id });
    if (stoppedBy) {
      if (log) closeFd(log.fd);
      return true;
    }
    if (log === null) {
      const err = logError;
      // (a full disk, no descriptors left with no task running: the run stops as for any state
      // it cannot write)
      if (!(err instanceof UnsafePathError)) throw err;
      // something in the way of its log (a link or a folder at its name): the command does not
      // run, and the task is on record as failed, saying why — never left started
      record({
        type: 'task-finished',
        gen,
        at: iso(o.clock),
        task: id,
        status: 'failed',
        exit_code: null,
        signal: null,
        duration_ms: null,
        why_code: 'LOG_WRITE_FAILED',
        why: `its log could not be opened (${(err as Error).message}); the command did not run`,
        next: `remove or fix ${relative(o.root, logPath)}, then: routinely exec resume ${state.run_id}`,
      });
      finishedAtStart = true;
      return true;
    }
    let logFd = log.fd;
    const p = (async () => {
      let run: GroupRun;
      try {
        const start = (): Promise<GroupRun> =>
          runGroupUnderLease(o.lease, {
            file: def.run,
            shell: true,
            cwd: taskCwd(o.root, def, rootOnce),
            env: { ...baseEnv, ...def.env, ROUTINELY_RUN_ID: state.run_id, ROUTINELY_TASK_ID: id },
            output: { fd: logFd, capBytes: log.capBytes, runLogBytes: o.runLogBytes ?? RETENTION_DEFAULTS.runLogBytes },
            timeoutMs: def.timeoutSeconds !== undefined ? def.timeoutSeconds * 1000 : undefined,
            // aborted when the lease is lost (onLost above), so the only signal a task follows
            signal: stopper.signal,
            signalFollowsLease: true,
            ...(o.killGraceMs !== undefined ? { killGraceMs: o.killGraceMs } : {}),
          });
        run = await start();
        // Out of descriptors or processes: started again once another task of the run ended (or,
        // with none running, a moment later, a few times), and no new task starts meanwhile — not
        // failed at once, when each failure would free its slot for the next task to fail the
        // same way, the whole queue in milliseconds
        let pause = ROOM_PAUSE_MS;
        for (;;) {
          if (run.process.reason !== 'spawn-error' || !OUT_OF_RESOURCE.has(run.process.errorCode ?? '')) break;
          const others = [...running].filter(([other]) => other !== id && !roomWaiters.has(other));
          // (with none running, a few pauses; once they were not enough, the shortage is not the
          // run's own, and later tasks do not wait them out one after the other)
          if (others.length === 0 && (pause > ROOM_PAUSE_MAX_MS || roomHopeless)) roomHopeless = true;
          if (stoppedBy) cutShort = true;
          if (stoppedBy || (others.length === 0 && roomHopeless)) break;
          roomWaiters.add(id);
          // its log is closed while it waits: one descriptor more for the tasks that run
          if (logFd >= 0) closeFd(logFd);
          logFd = -1;
          try {
            // (and a moment more: what an ended task held is given back as its handles close)
            if (others.length > 0) await Promise.race(others.map(([, other]) => other));
            else pause *= 2;
            await o.clock.sleep(others.length > 0 ? ROOM_PAUSE_MS : pause / 2);
          } finally {
            roomWaiters.delete(id);
          }
          if (stoppedBy) {
            cutShort = true;
            break;
          }
          // opened again to append where it was (no heading: the same attempt, the same cap)
          try {
            logFd = openAppendTo(logPath).fd;
          } catch (err) {
            // still short: waits again; anything else ends it, saying so beside the start's error
            if (err instanceof StateIOError && OUT_OF_RESOURCE.has(err.errno ?? '')) continue;
            run = {
              ...run,
              process: {
                ...run.process,
                error: `${run.process.error}; its log could not be opened again: ${(err as Error).message}`,
              },
            };
            break;
          }
          writeQuiet(logFd, `routinely: ${run.process.error}; trying again (other tasks of the run held the rest)\n`);
          run = await start();
        }
        if (run.leftovers > 0) writeQuiet(logFd, `routinely: ${leftoverMessage(run.leftovers, "the task's group")}\n`);
        if (run.process.error) writeQuiet(logFd, `routinely: ${run.process.error}\n`);
      } finally {
        if (logFd >= 0) closeFd(logFd);
      }
      const { process: result, cutBytes } = run;
      const event = finishEvent(
        id,
        result,
        gen,
        iso(o.clock),
        state.run_id,
        // the log as the project sees it, worked out only for a message that names it
        () => relative(o.root, logPath),
        stoppedBy,
        def.timeoutSeconds,
      );
      if (cutBytes > 0 && event.type === 'task-finished') event.output_cut_bytes = cutBytes;
      // output its log could not take (a full disk): on its record whatever the result, so a
      // success whose output is lost says so (exec show, the run's lines)
      if (run.lost && event.type === 'task-finished') event.output_lost_bytes = run.lost.bytes;
      if (
        event.type === 'task-finished' &&
        event.status === 'failed' &&
        event.why_code === 'TASK_FAILED' &&
        (run.lost?.code === 'ENOSPC' || diskFull(logPath))
      ) {
        Object.assign(event, {
          why_code: 'LOG_WRITE_FAILED',
          why: `its output could not be written to ${relative(o.root, logPath)} (no space left on device); ${event.why}`,
          next: `free space on the state folder's disk, then: routinely exec resume ${state.run_id}`,
        });
      }
      record(event);
      // A finished task must be on record before anything builds on it: a backend that writes
      // asynchronously (the database) is waited for, so a crash right after cannot lose it.
      try {
        await o.writer.flush();
      } catch (err) {
        if (!(err instanceof FencedError)) throw err;
        stop('LOCK_LOST');
      }
    })();
    // An error in one task's bookkeeping surfaces in the loop even if another task won the race.
    running.set(
      id,
      p
        .catch((err: unknown) => {
          failures.push(err);
        })
        .finally(() => running.delete(id)),
    );
    return true;
  };

  try {
    skipBlocked();
    for (;;) {
      // (none while a task waits for room, nor after one that could not start for want of it)
      if (!stoppedBy && roomWaiters.size === 0) for (const id of planner.next()) if (!startTask(id)) break;
      if (running.size === 0) {
        // a task that ended at its start (its log refused) frees room, or blocks dependants
        if (!finishedAtStart || stoppedBy) break;
        finishedAtStart = false;
        skipBlocked();
        continue;
      }
      await Promise.race(running.values());
      if (failures.length > 0) throw failures[0];
      skipBlocked();
    }
  } catch (err) {
    // State could not be written (ENOSPC, EIO, …): stop every task and wait for them before
    // giving up, so nothing runs on without the lock we are about to leave.
    stop('STATE_ERROR');
    await Promise.allSettled(running.values());
    throw err;
  } finally {
    clearTimeout(timer);
    o.lease.signal.removeEventListener('abort', onLost);
    o.stop.removeEventListener('abort', onStop);
  }
  // A run timeout that cut nothing short: every task had ended on its own and was on record
  // once what it left in its group was ended (a background child that ignores SIGTERM takes the
  // kill grace), as a task's own timeout counts its command alone — the run is not aborted.
  // (the lease must still be held: one lost after the timeout is a stop of its own)
  if (
    stoppedBy === 'RUN_TIMEOUT' &&
    !cutShort &&
    !o.lease.signal.aborted &&
    Object.values(state.tasks).every((t) => FINAL_ON_ITS_OWN.has(t.status))
  )
    stoppedBy = null;
  return { state, stoppedBy, notRecorded };
}

/** The statuses of a task that a stop did not cut short. */
const FINAL_ON_ITS_OWN: ReadonlySet<TaskStatus> = new Set(['succeeded', 'failed', 'skipped_dependency']);

/** Out of a resource with no other task running: tried again after 20, 40 … 640 ms. */
const ROOM_PAUSE_MS = 20;
const ROOM_PAUSE_MAX_MS = 640;

/** What helps a task that could not be started, by the cause. */
function spawnRemedy(code: string | undefined): string {
  if (code === 'EMFILE' || code === 'ENFILE') return 'raise the open-file limit (ulimit -n) or lower --parallel';
  if (code === 'EAGAIN' || code === 'ENOMEM') return 'free memory or processes (ulimit -u), or lower --parallel';
  return 'fix the task definition';
}

function writeQuiet(fd: number, text: string): void {
  try {
    writeText(fd, text);
  } catch {
    // the log is for people; the run record has the result
  }
}

/** A task's log for this attempt, and how much of its output it may keep: the run's log of a
 * task stays within `capBytes` (retention.runLogBytes) over all its attempts (SPEC §3), the
 * earlier ones keeping at most a quarter of it (their last bytes), this one the rest. */
function openLog(
  path: string,
  attempts: number,
  runAttempt: number,
  clock: Clock,
  capBytes: number,
): { fd: number; capBytes: number } {
  const f = openAppendTo(path);
  if (attempts <= 1 && runAttempt <= 1) return { fd: f.fd, capBytes };
  const heading = `\n--- routinely: run attempt ${runAttempt}, ${new Date(clock.now()).toISOString()} ---\n`;
  let used = keepTail(
    f,
    path,
    Math.floor(capBytes / 4),
    (cut, read) =>
      `${CUT_LINE_PREFIX}${outputLeftOut(cut, read)} bytes of output left out (runLogBytes ${capBytes}) ---\n`,
  );
  try {
    writeText(f.fd, heading);
    used += Buffer.byteLength(heading);
  } catch {
    // a full disk: the task's own output fails the same way, and its result says so
  }
  // (a trim that could not be done leaves this attempt half the cap all the same)
  return { fd: f.fd, capBytes: Math.max(Math.floor(capBytes / 2), capBytes - used) };
}

/** Whether the folder's file system has no room left: a task that failed while it could not
 * write its log is told apart from one that failed on its own. */
function diskFull(path: string): boolean {
  return fileSystemFull(dirname(path));
}

/** The task's (or command routine's) working folder, which must stay inside the project even
 * through symlinks. `realRoot`: the root's real path, when the caller has it (one run's tasks
 * share it: realpath(3) walks every folder of the path, two readlink calls a level). */
export function taskCwd(root: string, def: Pick<TaskDef, 'cwd'>, realRoot?: () => string): string | { error: string } {
  const wanted = resolve(root, def.cwd ?? '.');
  let real: string;
  let rootReal: string;
  try {
    rootReal = realRoot ? realRoot() : realPath(root);
  } catch {
    return { error: `the project folder ${root} does not exist` };
  }
  try {
    real = wanted === root ? rootReal : realPath(wanted);
  } catch {
    return { error: `cwd ${JSON.stringify(def.cwd)} does not exist` };
  }
  const rel = relative(rootReal, real);
  if (rel === '..' || rel.startsWith('../')) return { error: `cwd ${JSON.stringify(def.cwd)} leaves the project root` };
  // a file there: said as the cwd's fault, not the shell's (`/bin/sh: Not a directory`)
  if (real !== rootReal && statFollow(real)?.isDirectory() === false)
    return { error: `cwd ${JSON.stringify(def.cwd)} is not a folder` };
  return real;
}

function finishEvent(
  task: string,
  r: ProcessResult,
  gen: number,
  at: string,
  runId: string,
  logPath: () => string,
  stoppedBy: StopCause | null,
  timeoutSeconds: number | undefined,
): RunEvent {
  const base = {
    type: 'task-finished' as const,
    gen,
    at,
    task,
    exit_code: r.pid === null ? null : r.exitCode,
    signal: r.signal,
    duration_ms: Math.round(r.durationMs),
  };
  const logHint = (): string => `see ${logPath()}`;
  let status: TaskStatus;
  let why: Why | null = null;
  if (r.canceled) {
    status = 'interrupted';
    const cause = stoppedBy === 'STATE_ERROR' ? 'STATE_WRITE_FAILED' : stoppedBy === null ? 'INTERRUPTED' : stoppedBy;
    const because =
      stoppedBy === 'LOCK_LOST'
        ? 'the exec lock was lost'
        : stoppedBy === 'RUN_TIMEOUT'
          ? 'the run timed out'
          : stoppedBy === 'STATE_ERROR'
            ? 'run state could not be written'
            : 'the run was interrupted';
    why = { why_code: cause, why: `stopped because ${because}`, next: `routinely exec resume ${runId}` };
  } else if (r.timedOut) {
    status = 'failed';
    // The limit, not the time taken: that is printed beside it (`timed out (…) in 5.0s`).
    why = {
      why_code: 'TASK_TIMEOUT',
      why: `timed out (timeoutSeconds: ${timeoutSeconds})`,
      next: `${logHint()}; raise timeoutSeconds or fix the task, then: routinely exec resume ${runId}`,
    };
  } else if (r.reason === 'spawn-error') {
    status = 'failed';
    why = {
      why_code: 'SPAWN_FAILED',
      why: r.error ?? 'could not be started',
      next: `${spawnRemedy(r.errorCode)}, then: routinely exec resume ${runId}`,
    };
  } else if (r.exitCode === 0) {
    status = 'succeeded';
  } else {
    status = 'failed';
    const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode}`;
    why = {
      why_code: 'TASK_FAILED',
      why: `the command ${how}`,
      next: `${logHint()}; fix it, then: routinely exec resume ${runId}`,
    };
  }
  return { ...base, status, ...(why ?? {}) };
}
