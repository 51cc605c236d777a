// `routinely scheduler start` (SPEC §6): foreground, one per project (the `scheduler` lock).

import { loadProject, type Project } from '../config/load.js';
import { extraFieldWarning } from '../config/cron-habits.js';
import { DatabaseRowError, ExitCode } from '../errors.js';
import { fireRoutine, ownerGone } from '../scheduler/firing.js';
import { commandEnv } from '../exec/process.js';
import { SCHEDULER_LOCK_KEY } from '../lock/backend.js';
import type { Lease } from '../lock/lease.js';
import type { LockRecord } from '../lock/record.js';
import { describeHolder } from '../lock/stale.js';
import { disposable, openBackend, type BackendCaps } from '../backend.js';
import { hostId } from '../lock/identity.js';
import { createLogger, type LogFormat, type Logger } from '../scheduler/log.js';
import type { DbClock, OffsetSample } from '../pg/db-clock.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { holdRunningMark } from '../scheduler/running-mark.js';
import { cacheSchedules } from '../scheduler/upcoming.js';
import { notifyFire } from '../notify/notify.js';
import { reportBusy } from './busy.js';
import { httpSetup } from './http-options.js';
import { findStarter, npmWrapper, watchStarter, WRAPPER_ADVICE } from './wrapper.js';
import { boundedLines } from './bounded-output.js';
import { limitExitFlush } from './io.js';
import { setIoNoticeSink } from '../fs/io-notice.js';
import type { SchedulerHttp } from './http-status.js';
import type { GlobalOptions } from './globals.js';

// `serve` is reached through this module on purpose: the two share the logger and the HTTP
// setup, and as one entry for esbuild they stay in one chunk instead of splitting out small
// shared ones that `routine list` (which imports selfCli from here) would then load one by one.
export { serve } from './serve-command.js';

/** How long a stopping scheduler waits for its output to be read (before and after its lock is
 * released). */
const EXIT_FLUSH_MS = 2_000;
/** How often a scheduler that could not keep its lock (state folder not writable) tries again. */
const STATE_RETRY_MS = 2_000;

export interface SchedulerFlags {
  logFormat: LogFormat;
  shutdownTimeout: number;
  /** `[HOST:]PORT` of the metrics/health/status server (SPEC §11). */
  http?: string;
}

/** EPIPE (or any error) on stdout/stderr is ignored from now on: the scheduler's work does not
 * depend on anyone reading its log. */
function keepGoingOnBrokenPipes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') return;
      // nothing to do: further writes to a closed pipe are dropped
    });
  }
}

export async function schedulerStart(flags: SchedulerFlags, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  // A closed stdout or stderr (`scheduler start | head -3`, a terminal that went away) must not
  // stop the scheduler: its log lines are dropped, and it goes on firing and recording.
  keepGoingOnBrokenPipes();
  // Log lines carry the backend's clock (the database's with PostgreSQL), as history does.
  let clockNow = (): number => Date.now();
  // A reader that stalls costs log lines, never memory or the exit (SPEC §6 "Stop").
  const sink = boundedLines(process.stdout);
  limitExitFlush(EXIT_FLUSH_MS);
  const log = createLogger(flags.logFormat, sink, () => clockNow());
  // the warnings `validate` gives (a 6-field schedule that reads like a 5-field one with a typo)
  for (const r of project.config.routines) {
    const w = extraFieldWarning(r.schedule);
    if (w) log({ event: 'scheduler.warning', message: `routine ${r.id}: ${w}` });
  }
  // Refused (exit 2) before the lock is taken; the server itself is loaded only when asked for.
  const http = await httpSetup(flags.http, project);
  // The skew warning goes to the log (below), not to stderr.
  await using backend = disposable(await openBackend(project, { skewNotice: () => {}, warn: (message) => log({ event: 'scheduler.warning', message }), longRunning: true }));
  clockNow = () => backend.clock.now();
  const host = hostId();
  // A scheduler on this host that is alive but whose record looks expired (stopped with SIGSTOP,
  // or a time someone wrote) is watched for up to a TTL (SPEC §4.4): taken over once its heartbeat
  // has not moved all that time, refused the moment it moves.
  const watchStalled = (holder: LockRecord, forMs: number): void =>
    log({ event: 'scheduler.warning', message: `the scheduler lock's holder, ${describeHolder(holder, clockNow())}, is alive on this host but its record looks expired: watching its heartbeat for up to ${Math.round(forMs / 1000)}s` });
  const got = await backend.lock.acquire(backend.schedulerKey(host), { command: 'scheduler', config: project.configPath }, { ifBusy: 'fail', watchStalled });
  if (!got.ok) return reportBusy(got, { ifBusy: 'fail' }, SCHEDULER_LOCK_KEY);
  let lease: Lease = got.lease;
  // what proves to `scheduler stop` that this process is this project's scheduler
  try {
    holdRunningMark(project.stateDir);
  } catch (err) {
    log({ event: 'scheduler.warning', message: `${(err as Error).message}: \`routinely scheduler stop\` cannot prove this is the project's scheduler, and will not signal it (stop it with SIGTERM)` });
  }
  // The commands' environment, copied from ours once per config (reloads may change passEnv).
  const envFor = new WeakMap<Project, NodeJS.ProcessEnv>();
  const baseEnv = (p: Project): NodeJS.ProcessEnv => {
    let env = envFor.get(p);
    if (!env) envFor.set(p, (env = commandEnv(process.env, p.config.passEnv)));
    return env;
  };
  const warn = (message: string): void => log({ event: 'scheduler.warning', message });
  // what a step survives on purpose (a lock's view, a folder's fsync) goes to the log, once
  setIoNoticeSink(warn);
  const scheduler = new Scheduler({
    project,
    fire: (def, scheduledAt, o) =>
      fireRoutine({
        project: o.project, backend, clock: backend.clock, trigger: o.trigger, attempt: o.attempt, ifBusy: o.ifBusy, waitTimeoutMs: o.waitTimeoutMs,
        signal: o.signal, warn, baseEnv: baseEnv(o.project), onStarted: o.onStarted, onWait: o.onWait, mayStart: o.mayStart,
      }, def, scheduledAt),
    log,
    reloadProject: () => loadProject({ configPath: project.configPath, configSource: 'the config file' }),
    shutdownTimeoutMs: flags.shutdownTimeout * 1000,
    cacheSchedules,
    notify: (n) => notifyFire({ ...n, log, host, baseEnv: baseEnv(n.project) }),
    store: backend.routines,
    host,
    clock: backend.clock,
    // With files the scheduler lock is what keeps a second scheduler out: before every start it
    // is confirmed (a scheduler paused past its TTL finds another in charge and stops without
    // firing). With a database every tick is claimed once across schedulers, which decides.
    inCharge: backend.caps.schedulerPerProject ? () => lease.verify().ok : undefined,
  });
  let served: SchedulerHttp | null = null;
  try {
    // /healthz: 503 with the reason while the lock is not held, or the state cannot be written
    const problem = (): string | null => {
      const state = scheduler.stateUnwritable;
      return state !== null ? `state folder not writable: ${state}` : lockProblem(lease, backend.caps);
    };
    // the page's runs are recorded by the scheduler's recorder: its metrics count them
    served = http && (await (await import('./http-status.js')).schedulerHttp({
      setup: http, backend, host, log, project: () => scheduler.currentProject, lockProblem: problem, shutdownTimeoutMs: flags.shutdownTimeout * 1000, recorder: scheduler.recorder,
      held: () => (scheduler.stateUnwritable !== null ? `state folder not writable: ${scheduler.stateUnwritable}` : null),
    }));
  } catch (err) {
    await lease.release();
    throw err;
  }
  if (served) scheduler.observe(served.observer);

  // Fires left open by an earlier scheduler that died (SIGKILL) are recorded now, once each.
  try {
    // What this host spooled while the database was away goes first, with its real results
    // (before reconcile would call those fires interrupted).
    if (backend.routines.flushSpool) {
      const f = await backend.routines.flushSpool(warn);
      if (f.recorded > 0) warn(`recorded ${f.recorded} spooled fire${f.recorded === 1 ? '' : 's'} of this host`);
    }
    // through the recorder: counted in the metrics, announced as the failures they are
    const { closed } = await scheduler.recorder.reconcile(ownerGone, project);
    if (closed > 0) warn(`recorded ${closed} fire${closed === 1 ? '' : 's'} left open by a scheduler that died as failed (interrupted)`);
  } catch (err) {
    warn(`could not reconcile open fires: ${(err as Error).message}`);
  }
  const unwatchClock = backend.dbClock ? await watchDbClock(backend.dbClock, log, () => scheduler.clockStepped()) : () => {};
  const stop = new AbortController();
  stop.signal.addEventListener('abort', () => {
    served?.stopping();
    // `scheduler status` says `stopping` until the lock is released, just before the exit
    if (!lost) lease.annotate({ stopping: true });
  }, { once: true });
  const onStop = (): void => stop.abort();
  const onHup = (): void => scheduler.requestReload();
  let lost = false;
  const onLost = (): void => {
    const why = lease.lost?.why ?? 'unknown';
    if (backend.caps.schedulerPerProject && lease.lostToWriteErrors) {
      // Its heartbeat could not be written (a read-only or failing state folder), and nobody
      // took the lock: the scheduler stays up with its fires held, and takes its lock again once
      // the folder can be written (SPEC §4.15).
      scheduler.stateTrouble(new Error(`the scheduler lock cannot be kept: ${why}`));
      void retakeWhenWritable();
      return;
    }
    if (backend.caps.schedulerPerProject) {
      // With files the scheduler lock is what keeps a second scheduler out: stop.
      lost = true;
      log({ event: 'scheduler.lock_lost', why });
      stop.abort();
      return;
    }
    // With a database each tick is claimed once across schedulers, so a lease lost to an outage
    // is taken again in the background while the loop goes on (claims fail, and are logged,
    // until the database is back).
    log({ event: 'scheduler.warning', message: `scheduler lock lost (${why}); taking it again` });
    void retake();
  };
  const retake = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      try {
        const again = await backend.lock.acquire(backend.schedulerKey(host), { command: 'scheduler' }, { ifBusy: 'wait', signal: stop.signal });
        if (!again.ok) return; // stopped while waiting
        if (stop.signal.aborted) {
          await again.lease.release();
          return;
        }
        lease = again.lease;
        lease.signal.addEventListener('abort', onLost, { once: true });
        log({ event: 'scheduler.warning', message: 'scheduler lock taken again' });
        return;
      } catch (err) {
        // a row it does not act on stays so until someone sets it right: said once a minute
        const unusable = err instanceof DatabaseRowError;
        log({ event: 'scheduler.warning', message: `cannot take the scheduler lock again: ${(err as Error).message}; retrying${unusable ? ' in a minute' : ''}` });
        await backend.clock.sleep(unusable ? 60_000 : 1000, stop.signal);
      }
    }
  };
  /** The file scheduler lock again, once the state folder can be written: taken (ours was only
   * let run out), or held by another scheduler meanwhile (then this one stops, as for any loss). */
  const retakeWhenWritable = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      await backend.clock.sleep(STATE_RETRY_MS, stop.signal);
      if (stop.signal.aborted) return;
      let again;
      try {
        again = await backend.lock.acquire(backend.schedulerKey(host), { command: 'scheduler', config: project.configPath }, { ifBusy: 'fail' });
      } catch {
        continue; // still not writable
      }
      if (!again.ok) {
        lost = true;
        log({ event: 'scheduler.lock_lost', why: `while the state folder could not be written, the lock was taken by ${again.why}` });
        stop.abort();
        return;
      }
      if (stop.signal.aborted) {
        await again.lease.release();
        return;
      }
      lease = again.lease;
      lease.signal.addEventListener('abort', onLost, { once: true });
      log({ event: 'scheduler.warning', message: 'scheduler lock taken again' });
      scheduler.stateTrouble(null);
      return;
    }
  };
  process.on('SIGINT', onStop);
  process.on('SIGTERM', onStop);
  process.on('SIGHUP', onHup);
  lease.signal.addEventListener('abort', onLost, { once: true });
  // Under npm, a signal meant for us stops only npm (and its shell): say so now, and stop when
  // npm or the shell between is gone.
  const wrapper = npmWrapper(process.env);
  let unwatchParent = (): void => {};
  if (wrapper) log({ event: 'scheduler.warning', message: `started through ${wrapper}; ${WRAPPER_ADVICE}` });
  const starter = wrapper ? findStarter() : null;
  if (starter) {
    unwatchParent = watchStarter(starter, (why) => {
      log({ event: 'scheduler.warning', message: `${why}: the ${wrapper} that started this scheduler was stopped or ended; stopping as if sent SIGTERM` });
      stop.abort();
    });
  }
  try {
    await scheduler.run(stop.signal);
  } finally {
    unwatchParent();
    await served?.close();
    process.off('SIGINT', onStop);
    process.off('SIGTERM', onStop);
    process.off('SIGHUP', onHup);
    lease.signal.removeEventListener('abort', onLost);
    unwatchClock();
    await sink.flush(EXIT_FLUSH_MS);
    await lease.release();
  }
  return lost ? ExitCode.FAILED : ExitCode.OK;
}

/** Logs the offset to the database clock when first measured and whenever it moves notably, with
 * a warning past SKEW_WARN_MS; a notable move wakes the loop (a clock step). */
async function watchDbClock(clock: DbClock, log: Logger, stepped: () => void): Promise<() => void> {
  // loaded with the database backend only (routine list loads this module, and stays lean)
  const { describeOffset, offsetNews, skewWarning } = await import('../pg/db-clock.js');
  let logged: number | null = null;
  const seen = (offset: number, sample: OffsetSample): void => {
    const news = offsetNews(logged, offset);
    if (!news) return;
    logged = offset;
    log({ event: 'scheduler.clock', offset_ms: Math.round(offset * 10) / 10, rtt_ms: Math.round(sample.rttMs * 10) / 10, change: news, text: describeOffset(offset) });
    const warning = skewWarning(offset);
    if (warning) log({ event: 'scheduler.warning', message: warning });
    if (news === 'changed') stepped();
  };
  if (clock.offsetMs !== null) seen(clock.offsetMs, clock.lastSample ?? { offsetMs: clock.offsetMs, rttMs: 0 });
  return clock.onMeasured(seen);
}

/** Why the scheduler does not hold its lock now (for /healthz); null while it does. */
function lockProblem(lease: Lease, caps: BackendCaps): string | null {
  if (lease.held()) return null;
  const why = `scheduler lock lost (${lease.lost?.why ?? 'released'})`;
  return caps.schedulerPerProject ? why : `${why}; taking it again`;
}
