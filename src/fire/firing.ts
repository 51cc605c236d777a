// Firing one routine (SPEC §6), in the process that fires it — the scheduler, or `routine run` —
// with no second Node process: a `command` routine costs what cron pays (a shell), and the exec
// actions run through the library. Every fire that starts is recorded exactly once: an open
// marker is written once the exec lock is held and before any work starts, and the fire's record
// closes it; a marker left open by a process that died is closed by the next one (reconcile).
// (Over 300 lines: the fire of a command and of an exec action, which share the open marker,
// the log frames and the record.)

import { stoppedReason, takeStopRequest } from './stop-request.js';
import { relative } from 'node:path';
import { acquireLock, busyReason, slotsOf } from '../lock/named.js';
import { liveSlots } from '../lock/live-slots.js';
import type { Backend } from '../backend-types.js';
import type { Clock } from '../clock.js';
import { loadProject, type Project } from '../config/load.js';
import { EXEC_LOCK_NAME, type RoutineDef } from '../config/types.js';
import { taskCwd } from '../exec/executor.js';
import type { ExecContext } from '../exec/context.js';
import { execResume, execRun, register } from '../exec/operations.js';
import { commandEnv, leftoverMessage, type ProcessResult } from '../exec/process.js';
import { runGroupUnderLease, type GroupRun } from '../exec/group-run.js';
import { eventLine, registerLine, runHeader, runSummary } from '../exec/run-lines.js';
import type { RunEvent, RunState } from '../exec/run-state.js';
import { isRunId, newRunId } from '../run-id.js';
import { endRunOrphans } from '../file-lock/orphans.js';
import { randomHex } from '../fs/random-ids.js';
import { processGone, samePidSpace, selfIdentity, systemProbe } from '../process/identity.js';
import type { IfBusy, Lease } from '../lock/lease.js';
import type { LockRecord } from '../lock/record.js';
import { appendLineToFile, openAppendTo, type AppendFile } from '../fs/durable.js';
import type { Fire, OpenFire, RoutineResult } from '../state/routine-state.js';
import type { Warn } from '../state/store.js';
import { causeOf, NotStartedError } from './unstarted.js';
import { DatabaseError, StateIOError } from '../errors.js';
import { PREVIOUS_RUN } from './previous-run.js';
import { ioNotice } from '../fs/io-notice.js';
import { closeFd, renameOver } from '../fs/names.js';
import type { LineEntry, LineTicket } from '../lock/line.js';

/** SIGTERM → SIGKILL for a routine's command that is stopped (timeout, shutdown, lost lock). */

import { endFrame, startFrame, type Trigger } from './log-frames.js';
import { routineLogFiles } from './routine-log.js';

export type { Trigger };

export interface FireContext {
  project: Project;
  backend: Backend;
  clock: Clock;
  trigger: Trigger;
  ifBusy: IfBusy;
  waitTimeoutMs?: number;
  /** Stops the fire (scheduler shutdown, SIGINT/SIGTERM of `routine run`); a string reason is
   * recorded as the failure's reason. */
  signal?: AbortSignal;
  /** Ends a wait for the lock only (default `signal`). */
  waitSignal?: AbortSignal;
  killGraceMs?: number;
  attempt?: number;
  warn: Warn;
  /** The fire holds the exec lock and its work begins. */
  onStarted?: (runId: string | null) => void;
  /** With `ifBusy: 'wait'`: called once, naming the holder, when the lock is busy at first. */
  onWait?: (why: string, holder: LockRecord | null, holders?: LockRecord[]) => void;
  /** Asked once the exec lock is held, before anything starts: false gives the lock back and
   * the fire does not start (the scheduler that fires it lost its own lock meanwhile). */
  mayStart?: () => boolean;
  /** The lock was taken over from a holder judged stale (fire-request.ts). */
  onTookOver?: (from: LockRecord | null) => void;
  /** The environment commands start from, already without withheld variables (the scheduler
   * computes it once per config: copying `process.env` costs more than the rest of a fire's
   * set-up). Default: computed from `process.env` now. */
  baseEnv?: NodeJS.ProcessEnv;
  /** Also copy a command's output here (`routine run` streams it to the terminal). */
  echo?: (chunk: Buffer) => void;
  /** Its place in the lock's line, taken when the scheduler queued it (lock/line.ts). */
  ticket?: LineTicket | null;
  /** The claimer of a claimed tick (a shared database): the open marker settles its claim, and
   * is refused (ClaimTakenError) when another scheduler took the claim over. */
  claimer?: string;
  /** The scheduler's claimer id its open marker names (FireRequest.scheduler). */
  scheduler?: string;
}

export interface FireResult extends Fire {
  /** Skipped because the exec lock was held: by whom (for the log line). */
  holder?: LockRecord | null;
  /** …and when every slot of a lock of several was held: each slot's holder. */
  holders?: LockRecord[];
  /** Skipped because waiters of other processes came first (lock/line.ts): who, and whether a
   * scheduled tick of another scheduler is among them (then it waits its turn, as behind one). */
  ahead?: { why: string; scheduled: boolean };
}

/** `<stateDir>/logs/<id>.log` (routine-log.ts names the files); opened O_NOFOLLOW and checked. */
export function routineLogPath(project: Project, id: string): string {
  return routineLogFiles(project.stateDir, id).current;
}

/** Opens the routine's log for one more run, first rotating it to `<id>.log.1` (replacing the
 * one before) when that run could take it past half of `retention.routineLogBytes`: the two
 * files together stay within it (a run's output is at most runLogBytes; its frames, a few
 * hundred bytes, come on top). */
function openRoutineLog(project: Project, id: string): AppendFile {
  const path = routineLogPath(project, id);
  const { runLogBytes, routineLogBytes } = project.config.retention;
  const log = openAppendTo(path);
  // its size as opened (0: a new log): past half its bound, it becomes `<id>.log.1`, and this
  // fire writes to a new one
  const size = log.size ?? 0;
  // the first line of ours comes later (after the lock, the open marker): looked at then
  log.size = null;
  if (size === 0 || size + runLogBytes <= routineLogBytes / 2) return log;
  try {
    renameOver(path, `${path}.1`);
  } catch {
    return log; // the log goes on growing; the next fire tries again
  }
  closeFd(log.fd);
  return openAppendTo(path);
}

/** Appends a line of routinely's own (a frame, a note) to the routine's log, on a line of its
 * own even when the command's output did not end with a newline. */
function appendToRoutineLog(log: AppendFile, path: string, line: string): void {
  try {
    appendLineToFile(log, path, line.replace(/\n$/, ''));
  } catch (err) {
    // the log is for people; the record has the result
    ioNotice(
      err,
      'appending to',
      path,
      "a line of routinely's own (a run's frame or a note) is missing from this routine's log; the record has the result",
    );
  }
}

/** This process as an open marker names its owner (a copy: records never share the cached one). */
const owner = (): OpenFire['owner'] => ({ ...selfIdentity() });

/** Fires `def` once for `scheduledAt` and returns its record (with `closes` naming the open
 * marker it wrote), which the caller records; null when `mayStart` said no (nothing started,
 * nothing to record). Never throws for the routine's own failure; throws only when not even the
 * start could be recorded (then nothing ran). */
export async function fireRoutine(ctx: FireContext, def: RoutineDef, scheduledAt: Date): Promise<FireResult | null> {
  return def.action === 'command' ? fireCommand(ctx, def, scheduledAt) : fireExec(ctx, def, scheduledAt);
}

/** When a fire started: on the wall clock (what records say) and on the monotonic clock (what
 * its duration is measured with). */
export interface Span {
  startedMs: number;
  started: number;
}

/** A fire's times have one source: its duration, measured on the monotonic clock, and its start
 * on the wall clock; the finish is the start plus the duration. So every view agrees on what a
 * fire took, whether it reads `duration_ms` (the record, metrics) or the two stamps (history, the
 * page's chart), also when the wall clock stepped during the fire. */
export function fireTimes(span: Span, monotonicNow: number): Pick<Fire, 'started_at' | 'finished_at' | 'duration_ms'> {
  const durationMs = Math.max(0, Math.round(monotonicNow - span.started));
  return {
    started_at: new Date(span.startedMs).toISOString(),
    finished_at: new Date(span.startedMs + durationMs).toISOString(),
    duration_ms: durationMs,
  };
}

function fireRecord(
  ctx: FireContext,
  scheduledAt: Date,
  span: Span,
  f: Omit<FireResult, 'scheduled_at' | 'started_at' | 'finished_at' | 'duration_ms'>,
): FireResult {
  return {
    ...f,
    scheduled_at: scheduledAt.toISOString(),
    ...fireTimes(span, ctx.clock.monotonic()),
    trigger: ctx.trigger,
    ...(ctx.attempt ? { attempt: ctx.attempt } : {}),
  };
}

/** Whether a fire of the routine opened before `mine` is going on in another live process of
 * this host. Every fire appends its marker first, then looks: of two fires starting within the
 * same moment, the later marker yields, whichever read came first. Owners elsewhere cannot be
 * judged here: not counted. */
async function fireGoingOn(ctx: FireContext, def: RoutineDef, mine: OpenFire | null): Promise<boolean> {
  const open = (await ctx.backend.routines.readOne(def.id, ctx.warn))?.open_fires ?? [];
  const at = mine ? open.findIndex((f) => f.id === mine.id) : -1;
  const self = process.pid;
  let going = false;
  let dead = false;
  for (const f of open.slice(0, at === -1 ? open.length : at)) {
    if (!samePidSpace(f.owner, systemProbe())) continue;
    // this very process (the scheduler's own fire beside a run from its HTTP page): going
    // while its fire is; a marker of an earlier process with this pid is not
    if (f.owner.pid === self ? goingHere.has(f.id) : !processGone(f.owner)) going = true;
    // its process died (SIGKILL) with the fire open: what it started is ended first, as a
    // lock's takeover ends a dead holder's, so that this fire never runs beside it; the fire is
    // then recorded as interrupted, as after a takeover (once: no later tick meets it again)
    else if (f.owner.pid !== self) {
      if (f.run_id !== null && isRunId(f.run_id))
        await endRunOrphans(f.run_id, { probe: systemProbe(), clock: ctx.clock, warn: ctx.warn });
      dead = true;
    }
  }
  if (dead) ctx.onTookOver?.(null);
  return going;
}

/** The open markers of the fires going on in this process, until each fire ends. */
const goingHere = new Set<string>();

/** Writes the open marker; the fire's record will close it. */
async function writeOpenMarker(
  ctx: FireContext,
  def: RoutineDef,
  scheduledAt: Date,
  span: Span,
  runId: string | null,
): Promise<OpenFire> {
  const marker: OpenFire = {
    id: randomHex(8),
    scheduled_at: scheduledAt.toISOString(),
    started_at: new Date(span.startedMs).toISOString(),
    run_id: runId,
    trigger: ctx.trigger,
    ...(ctx.attempt ? { attempt: ctx.attempt } : {}),
    owner: ctx.scheduler ? { ...owner(), claimer: ctx.scheduler } : owner(),
  };
  try {
    await ctx.backend.routines.openFire(def.id, marker, ctx.warn, ctx.claimer);
  } catch (err) {
    // The marker may be stored all the same (the database committed it and the answer was
    // lost): the record of this fire that did not start closes it, if it is there.
    throw new NotStartedError(err, marker.id);
  }
  return marker;
}

async function fireCommand(ctx: FireContext, def: RoutineDef, scheduledAt: Date): Promise<FireResult | null> {
  const span: Span = { startedMs: ctx.clock.now(), started: ctx.clock.monotonic() };
  const runId = newRunId(span.startedMs, randomHex(2));
  // The log first: a log we may not write (another user's, readable by others) stops the fire
  // before anything runs, and says so (exit 2 for `routine run`).
  const log = openRoutineLog(ctx.project, def.id);
  const logFd = log.fd;
  // `"exclusive": false`: no exec lock (SPEC §6), as a cron job runs beside other work.
  let lease: Lease | null = null;
  let marker: OpenFire;
  try {
    if (def.exclusive) {
      // the routine's lock: the exec lock, or a named one with its slots (SPEC §4.16)
      const owner = {
        command: 'routine',
        routine: def.id,
        run_id: runId,
        ...(ctx.trigger !== 'manual' ? { scheduled: true } : {}),
      };
      const policy = {
        ifBusy: ctx.ifBusy,
        waitTimeoutMs: ctx.waitTimeoutMs,
        signal: ctx.waitSignal ?? ctx.signal,
        ticket: ctx.ticket ?? null,
      };
      // (a count changed in the config while it waits counts: live-slots.ts)
      const configPath = ctx.project.configPath;
      const got = await acquireLock(
        ctx.backend.lock,
        def.lock,
        liveSlots(configPath, slotsOf(ctx.project.config.locks, def.lock), () =>
          slotsOf(loadProject({ configPath }).config.locks, def.lock),
        ),
        owner,
        policy,
        ctx.onWait,
      );
      if (!got.ok) {
        closeFd(logFd);
        // a wait ended by the scheduler stopping: not started, nothing of it to record here
        if (ctx.mayStart && !ctx.mayStart()) return null;
        return fireRecord(ctx, scheduledAt, span, {
          result: 'skipped',
          reason: busyReason(def.lock),
          exit_code: null,
          run_id: null,
          holder: got.holder,
          ...(got.holders ? { holders: got.holders } : {}),
          ...aheadOf(got),
        });
      }
      lease = got.lease;
      if (lease.tookOver) ctx.onTookOver?.(lease.tookOverFrom ?? null);
      // the fire starts once it holds its lock: a wait for it (`ifBusy: "wait"`) is lateness
      // (started_at after scheduled_at), not run time (SPEC §3: the run's own duration)
      startNow(ctx, span);
    }
    if (ctx.mayStart && !ctx.mayStart()) {
      await lease?.release();
      closeFd(logFd);
      return null;
    }
    // A routine never runs beside itself (SPEC §6). Where its lock does not keep its own fires
    // apart (none, or a named lock: of several slots, or one whose count a config changed while
    // a fire held it — a waiter follows the config, lock/live-slots.ts), a fire of it opened
    // earlier and still going in another process of this host (`routine run` beside the
    // scheduler's fire) makes this one a skip. A manual run looks first, before any marker:
    // refused, it records nothing (SPEC §4).
    const apart = !def.exclusive || def.lock !== EXEC_LOCK_NAME;
    /** The skip of a fire that met its own previous run; `closes`: the marker it had written. */
    const besideItself = async (closes?: string): Promise<FireResult> => {
      await lease?.release();
      closeFd(logFd);
      if (closes) goingHere.delete(closes);
      const skip = { result: 'skipped' as const, reason: PREVIOUS_RUN, exit_code: null, run_id: null };
      return fireRecord(ctx, scheduledAt, span, closes ? { ...skip, closes } : skip);
    };
    if (apart && ctx.trigger === 'manual' && (await fireGoingOn(ctx, def, null))) return besideItself();
    try {
      marker = await writeOpenMarker(ctx, def, scheduledAt, span, runId);
      goingHere.add(marker.id);
    } catch (err) {
      await lease?.release();
      throw err; // nothing ran; the caller reports why it could not even be recorded
    }
    // Every fire looks once its marker is written: of two that start within the same moment, the
    // later marker is the skip, and its record closes the marker (a manual run records it too).
    if (apart) {
      let beside: boolean;
      try {
        beside = await fireGoingOn(ctx, def, marker);
      } catch (err) {
        goingHere.delete(marker.id);
        await lease?.release();
        throw new NotStartedError(err, marker.id);
      }
      if (beside) return besideItself(marker.id);
    }
  } catch (err) {
    closeFd(logFd);
    throw err;
  }
  try {
    ctx.onStarted?.(runId);
    appendToRoutineLog(
      log,
      routineLogPath(ctx.project, def.id),
      startFrame(def.id, runId, marker.started_at, marker.scheduled_at, ctx.trigger),
    );
    const r = await runCommand(ctx, def, lease, runId, logFd);
    const stopReason = typeof ctx.signal?.reason === 'string' ? ctx.signal.reason : 'stopped at scheduler shutdown';
    // stopped by `routine stop` or the HTTP action: said so, whatever the command made of its signal
    const by = takeStopRequest(ctx.project.stateDir, marker.id);
    const { result, reason } =
      by !== null
        ? { result: 'failure' as const, reason: stoppedReason(by) }
        : judgeRun(r.process, r.stoppedBy, lease, def, stopReason);
    if (r.leftovers > 0)
      appendToRoutineLog(log, routineLogPath(ctx.project, def.id), `routinely: ${leftoverMessage(r.leftovers)}`);
    const out = fireRecord(ctx, scheduledAt, span, {
      result,
      reason,
      exit_code: r.process.pid === null ? null : r.process.exitCode,
      run_id: runId,
      closes: marker.id,
    });
    appendToRoutineLog(log, routineLogPath(ctx.project, def.id), endFrame(def.id, out));
    return out;
  } catch (err) {
    return fireRecord(ctx, scheduledAt, span, {
      result: 'failure',
      reason: `could not run: ${(err as Error).message}`,
      exit_code: null,
      run_id: runId,
      closes: marker.id,
    });
  } finally {
    goingHere.delete(marker.id);
    closeFd(logFd);
    if (lease) {
      const released = await lease.release();
      if (!released.released && !lease.lost) ctx.warn(`${def.id}: exec lock not released: ${released.why}`);
    }
  }
}

/** Runs `sh -c RUN` in its own process group under the held lease (none for a routine that is
 * not exclusive): the routine's cwd, env and timeout, output to the routine's log. */
function runCommand(
  ctx: FireContext,
  def: RoutineDef,
  lease: Lease | null,
  runId: string,
  logFd: number,
): Promise<GroupRun> {
  return runGroupUnderLease(lease, {
    file: def.run!,
    shell: true,
    cwd: taskCwd(ctx.project.root, { cwd: def.cwd }),
    env: {
      ...(ctx.baseEnv ?? commandEnv(process.env, ctx.project.config.passEnv)),
      ...(def.env ?? {}),
      ROUTINELY_ROUTINE_ID: def.id,
      ROUTINELY_RUN_ID: runId,
    },
    lockName: def.lock,
    output: { fd: logFd, capBytes: ctx.project.config.retention.runLogBytes },
    timeoutMs: def.timeoutSeconds !== undefined ? def.timeoutSeconds * 1000 : undefined,
    ...(ctx.signal ? { signal: ctx.signal } : {}),
    ...(ctx.killGraceMs !== undefined ? { killGraceMs: ctx.killGraceMs } : {}),
    onOutput: ctx.echo,
  });
}

function judgeRun(
  r: ProcessResult,
  stoppedBy: GroupRun['stoppedBy'],
  lease: Lease | null,
  def: RoutineDef,
  stopReason: string,
): { result: RoutineResult; reason: string | null } {
  if (stoppedBy === 'timeout')
    return { result: 'failure', reason: `timed out (timeoutSeconds: ${def.timeoutSeconds})` };
  if (stoppedBy === 'lock') return { result: 'failure', reason: `lock lost: ${lease?.lost?.why ?? 'unknown'}` };
  if (stoppedBy === 'stop') return { result: 'failure', reason: stopReason };
  if (r.reason === 'spawn-error') return { result: 'failure', reason: `could not start: ${r.error ?? 'unknown'}` };
  if (r.exitCode === 0 && !r.signal) {
    // Success, unless the lock was lost meanwhile (the work may have overlapped a new holder).
    return !lease || lease.verify().ok
      ? { result: 'success', reason: null }
      : { result: 'failure', reason: `lock lost: ${lease.lost?.why ?? 'unknown'}` };
  }
  return { result: 'failure', reason: r.signal ? `killed by ${r.signal}` : `exit code ${r.exitCode}` };
}

/** Busy because waiters of other processes came first (lock/line.ts): who, and whether a
 * scheduled tick is among them. */
function aheadOf(b: { why: string; ahead?: LineEntry[] }): Pick<FireResult, 'ahead'> {
  return b.ahead ? { ahead: { why: b.why, scheduled: b.ahead.some((e) => e.owner.scheduled === true) } } : {};
}

/** A fire's span begins again now: it held its lock only now (it waited for it). */
function startNow(ctx: FireContext, span: Span): void {
  span.startedMs = ctx.clock.now();
  span.started = ctx.clock.monotonic();
}

/** Thrown from inside the exec lock when `mayStart` says no: the lock is given back unused. */
class NotStarted extends Error {}

/** exec-auto, exec-resume and register, through the library in this process. */
async function fireExec(ctx: FireContext, def: RoutineDef, scheduledAt: Date): Promise<FireResult | null> {
  const span: Span = { startedMs: ctx.clock.now(), started: ctx.clock.monotonic() };
  let marker: OpenFire | null = null;
  let runId: string | null = null;
  const exec: ExecContext = { project: ctx.project, backend: ctx.backend, clock: ctx.clock, warn: ctx.warn };
  const stop = ctx.signal ?? new AbortController().signal;
  const policy = {
    ifBusy: ctx.ifBusy,
    waitTimeoutMs: ctx.waitTimeoutMs,
    signal: ctx.signal,
    routine: def.id,
    ...(ctx.trigger !== 'manual' ? { scheduled: true } : {}),
    ticket: ctx.ticket ?? null,
    onWait: ctx.onWait,
    onLocked: async () => {
      if (ctx.mayStart && !ctx.mayStart()) throw new NotStarted();
      startNow(ctx, span);
      marker = await writeOpenMarker(ctx, def, scheduledAt, span, null);
      logLine(
        startFrame(def.id, null, (marker as OpenFire).started_at, (marker as OpenFire).scheduled_at, ctx.trigger),
      );
      ctx.onStarted?.(null);
    },
  };
  const closes = (): { closes?: string } => (marker ? { closes: (marker as OpenFire).id } : {});
  const busy = (b: { holder: LockRecord | null; why: string; ahead?: LineEntry[] }): FireResult =>
    fireRecord(ctx, scheduledAt, span, {
      result: 'skipped',
      reason: 'exec busy',
      exit_code: null,
      run_id: null,
      holder: b.holder,
      ...aheadOf(b),
    });
  const ran = (state: RunState): FireResult => {
    const ok = state.status === 'SUCCEEDED';
    // (the routine's own time-out in the words a command routine's has)
    const timedOut = state.why_code === 'RUN_TIMEOUT' && def.timeoutSeconds !== undefined;
    return fireRecord(ctx, scheduledAt, span, {
      result: ok ? 'success' : 'failure',
      reason: ok
        ? null
        : timedOut
          ? `timed out (timeoutSeconds: ${def.timeoutSeconds})`
          : `${state.status.toLowerCase()}: ${state.why ?? state.why_code ?? ''}`.trim(),
      exit_code: ok ? 0 : 1,
      run_id: state.run_id,
      ...closes(),
    });
  };
  // The routine's log has what `exec run` would have said on a terminal (exec/run-lines.ts),
  // between the run's frames: opened once the lock is held, for the whole fire.
  let log: AppendFile | null = null;
  function logLine(line: string): void {
    try {
      log ??= openRoutineLog(ctx.project, def.id);
      appendToRoutineLog(log, routineLogPath(ctx.project, def.id), line);
    } catch {
      // the log is for people
    }
  }
  const runDir = (id: string): string => `${relative(ctx.project.root, ctx.project.stateDir) || '.'}/exec/runs/${id}`;
  const nothing = (why: string): FireResult => {
    logLine(why.split('\n')[0]!); // "nothing to run: all 3 tasks succeeded" (the hints are for a terminal)
    return fireRecord(ctx, scheduledAt, span, {
      result: 'success',
      reason: null,
      exit_code: 0,
      run_id: null,
      ...closes(),
    });
  };
  const done = (state: RunState): FireResult => {
    for (const line of runSummary(state)) logLine(line);
    return ran(state);
  };
  try {
    const runOpts = {
      ...policy,
      stop,
      runTimeoutMs: def.timeoutSeconds !== undefined ? def.timeoutSeconds * 1000 : undefined,
      onStart: (s: RunState) => {
        runId = s.run_id;
        logLine(runHeader(s));
      },
      onEvent: (e: RunEvent, s: RunState) => {
        const line = eventLine(e, s, runDir(s.run_id));
        if (line !== null) logLine(line);
      },
    };
    let out: FireResult;
    switch (def.action) {
      case 'exec-auto': {
        const r = await execRun(exec, runOpts);
        out = r.kind === 'busy' ? busy(r.busy) : r.kind === 'nothing' ? nothing(r.why) : done(r.state);
        break;
      }
      case 'exec-resume': {
        const r = await execResume(exec, undefined, runOpts);
        out = r.kind === 'conflict' ? busy(r.busy) : r.kind === 'nothing' ? nothing(r.why) : done(r.state);
        break;
      }
      default: {
        const r = await register(exec, policy);
        if (r.kind !== 'busy') logLine(`registered: ${registerLine(r.value)}`);
        out =
          r.kind === 'busy'
            ? busy(r.busy)
            : fireRecord(ctx, scheduledAt, span, {
                result: 'success',
                reason: null,
                exit_code: 0,
                run_id: null,
                ...closes(),
              });
      }
    }
    if (marker) logLine(endFrame(def.id, out));
    return out;
  } catch (err) {
    if (err instanceof NotStarted) return null;
    // the state cannot be written before anything started (its lock folder read-only or full,
    // the database away): nothing ran and nothing is recorded, as for a command routine — the
    // caller says why (`routine run` exits 74; a scheduler holds its fires until it can)
    if (marker === null && (err instanceof StateIOError || err instanceof DatabaseError)) throw err;
    // A bad task definition, a full disk: the fire failed, and says why; an open marker that
    // could not be written (and may be stored all the same) is closed by this record
    const out = fireRecord(ctx, scheduledAt, span, {
      result: 'failure',
      reason: (causeOf(err) as Error).message,
      exit_code: null,
      run_id: runId,
      ...(err instanceof NotStartedError ? { closes: err.markerId } : closes()),
    });
    if (marker) logLine(endFrame(def.id, out));
    return out;
  } finally {
    if (log) closeFd((log as AppendFile).fd);
  }
}
