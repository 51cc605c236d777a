// `routinely scheduler start` (SPEC §6): foreground, one per project (the `scheduler` lock).

import { loadProject } from '../config/load.js';
import { habitWarnings } from '../config/cron-habits.js';
import { ExitCode } from '../errors.js';
import { fireRoutine } from '../fire/firing.js';
import { loadTaskDefinitions } from '../exec/task-source.js';
import { commandEnvOf } from '../exec/process.js';
import { SCHEDULER_LOCK_KEY } from '../lock/lock-backend.js';
import { reclaimStrandedSlots } from '../lock/named.js';
import { disposable, openBackend } from '../backend.js';
import { hostId } from '../process/identity.js';
import { createLogger, type LogFormat } from '../fire/log.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { LeaseKeeper, stalledNotice } from '../scheduler/lease-keeper.js';
import { holdRunningMark } from '../control/running-mark.js';
import { cacheSchedules, nextFireTimes } from '../scheduler/upcoming.js';
import { settleHeap } from '../scheduler/settle-heap.js';
import { notifyFire } from '../notify/notify.js';
import { reportBusy } from './busy.js';
import { httpSetup, routineRows } from './http-options.js';
import { stopWithNpm } from './wrapper.js';
import { boundedLines } from './bounded-output.js';
import { keepGoingOnBrokenPipes, limitExitFlush } from './io.js';
import { setIoNoticeSink } from '../fs/io-notice.js';
import type { SchedulerHttp } from '../http/wiring.js';
import type { GlobalOptions } from './globals.js';

// `serve` is reached through this module on purpose: the two share the logger and the HTTP
// setup, and as one entry for esbuild they stay in one chunk instead of splitting out small
// shared ones that `routine list` (which imports selfCli from here) would then load one by one.
export { serve } from './serve-command.js';

/** How long a stopping scheduler waits for its output to be read (before and after its lock is
 * released). */
const EXIT_FLUSH_MS = 2_000;

export interface SchedulerFlags {
  logFormat: LogFormat;
  shutdownTimeout: number;
  /** `[HOST:]PORT` of the metrics/health/status server (SPEC §11). */
  http?: string;
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
  // the warnings `validate` gives (a 6-field schedule that reads like a 5-field one with a typo,
  // a jitter that reaches the next fire: the times only of a routine with a jitter)
  const now = Date.now();
  const jittered = project.config.routines.map((r) =>
    r.jitterSeconds > 0 && r.enabled ? nextFireTimes(project, r, now, 3) : [],
  );
  const habits = project.config.routines.map((r) => ({ id: r.id, schedule: r.schedule, jitter: r.jitterSeconds }));
  for (const w of habitWarnings(habits, jittered))
    log({ event: 'scheduler.warning', message: w.replace(/^routinely: warning: /, '') });
  // The task files, as validate reads them: a bad one is refused now (exit 2), not by a fire.
  if (project.config.exec.taskDirs.length > 0) loadTaskDefinitions(project);
  // Refused (exit 2) before the lock is taken; the server itself is loaded only when asked for.
  const http = await httpSetup(flags.http, project);
  // The skew warning goes to the log (below), not to stderr.
  await using backend = disposable(
    await openBackend(project, {
      skewNotice: () => {},
      warn: (message) => log({ event: 'scheduler.warning', message }),
      longRunning: true,
    }),
  );
  clockNow = () => backend.clock.now();
  const host = hostId();
  const got = await backend.lock.acquire(
    backend.schedulerKey(host),
    { command: 'scheduler', config: project.configPath },
    { ifBusy: 'fail', watchStalled: stalledNotice(log, clockNow) },
  );
  if (!got.ok) return reportBusy(got, { ifBusy: 'fail' }, SCHEDULER_LOCK_KEY);
  const stop = new AbortController();
  let scheduler: Scheduler | null = null;
  const keeper = new LeaseKeeper(got.lease, {
    lock: backend.lock,
    caps: backend.caps,
    clock: backend.clock,
    key: backend.schedulerKey(host),
    // a lease taken again after a stall names the claimer of this process's first lease: its
    // claims stay its own, the unstarted ones too (scheduler/claims.ts, docs/postgres.md)
    owner: { command: 'scheduler', config: project.configPath, claimer: got.lease.lockId },
    log,
    signal: stop.signal,
    stop: () => stop.abort(),
    trouble: (err) => scheduler?.lockTrouble(err),
  });
  const baseEnv = commandEnvOf(process.env);
  const warn = (message: string): void => log({ event: 'scheduler.warning', message });
  // what proves to `scheduler stop` that this process is this project's scheduler
  holdRunningMark(project.stateDir, warn);
  // what a step survives on purpose (a lock's view, a folder's fsync) goes to the log, once
  setIoNoticeSink(warn);
  scheduler = new Scheduler({
    project,
    fire: (def, scheduledAt, o) =>
      fireRoutine(
        {
          project: o.project,
          backend,
          clock: backend.clock,
          trigger: o.trigger,
          attempt: o.attempt,
          ifBusy: o.ifBusy,
          waitTimeoutMs: o.waitTimeoutMs,
          signal: o.signal,
          ...(o.waitSignal ? { waitSignal: o.waitSignal } : {}),
          warn,
          baseEnv: baseEnv(o.project),
          onStarted: o.onStarted,
          onWait: o.onWait,
          mayStart: o.mayStart,
          ...(o.onTookOver ? { onTookOver: o.onTookOver } : {}),
          ticket: o.ticket ?? null,
          ...(o.claimer ? { claimer: o.claimer } : {}),
          ...(o.scheduler ? { scheduler: o.scheduler } : {}),
        },
        def,
        scheduledAt,
      ),
    log,
    reloadProject: () => {
      const fresh = loadProject({ configPath: project.configPath, configSource: 'the config file' });
      // slots the new config no longer has, whose holder is dead: their orphans are ended now
      // (a store that fails then — the database away a moment — is said, never an unhandled
      // rejection that ends the scheduler; the next reload or start tries again)
      reclaimStrandedSlots(backend.lock, fresh.config.locks).then(
        (said) => said.forEach(warn),
        (err: unknown) => warn(`could not reclaim the slots above a lock's new count: ${(err as Error).message}`),
      );
      return fresh;
    },
    shutdownTimeoutMs: flags.shutdownTimeout * 1000,
    cacheSchedules,
    settleHeap,
    notify: (n) => notifyFire({ ...n, log, host, baseEnv: baseEnv(n.project) }),
    store: backend.routines,
    line: backend.lock.line,
    host,
    // claims name this scheduler by its first lease: one whose lease is not held (nor a lease
    // naming it as claimer, taken again after a stall) is gone, and its unsettled claims are
    // taken over (scheduler/claims.ts)
    claimer: got.lease.lockId,
    claimTtlMs: project.config.lock.ttlSeconds * 1000,
    clock: backend.clock,
    // With files the scheduler lock is what keeps a second scheduler out: before every start it
    // is confirmed (a scheduler paused past its TTL finds another in charge and stops without
    // firing). With a database every tick is claimed once across schedulers, which decides.
    inCharge: backend.caps.schedulerPerProject ? () => keeper.lease.verify().ok : undefined,
    // the runs started over HTTP, before the scheduler says it stopped
    drain: async () => served?.drain(),
    // a lease that lapsed while nobody took the lock leaves its record on top: still ours; one
    // that another took and released since leaves the lock free at a later generation
    takenOver: async () => {
      try {
        const [s] = await backend.schedulerLocks();
        if (!s) return false;
        return s.record != null ? s.record.lock_id !== keeper.lease.lockId : s.generation > keeper.lease.generation;
      } catch {
        return true;
      }
    },
  });
  let served: SchedulerHttp | null = null;
  try {
    // /healthz: 503 with the reason while the lock is not held, or the state cannot be written
    const problem = (): string | null => {
      const state = scheduler!.stateUnwritable;
      return state !== null ? `state folder not writable: ${state}` : keeper.problem();
    };
    // the page's runs are recorded by the scheduler's recorder: its metrics count them
    served =
      http &&
      (await (
        await import('../http/wiring.js')
      ).schedulerHttp({
        setup: http,
        routineRows,
        backend,
        host,
        log,
        project: () => scheduler.currentProject,
        lockProblem: problem,
        shutdownTimeoutMs: flags.shutdownTimeout * 1000,
        recorder: scheduler.recorder,
        held: () =>
          scheduler.stateUnwritable !== null ? `state folder not writable: ${scheduler.stateUnwritable}` : null,
      }));
  } catch (err) {
    keeper.dispose();
    await keeper.lease.release();
    throw err;
  }
  if (served) scheduler.observe(served.observer);

  await scheduler.recorder.recordLeftovers(project);
  // a lock's slots above its count (lowered while held) whose holder died: nobody else looks
  for (const said of await reclaimStrandedSlots(backend.lock, project.config.locks)) warn(said);
  // loaded with the database backend only (routine list loads this module, and stays lean)
  const unwatchClock = backend.dbClock
    ? (await import('../pg/db-clock.js')).watchOffset(backend.dbClock, log, () => scheduler.clockStepped())
    : () => {};
  stop.signal.addEventListener(
    'abort',
    () => {
      served?.stopping();
      // `scheduler status` says `stopping` until the lock is released, just before the exit
      if (!keeper.lost) keeper.lease.annotate({ stopping: true });
    },
    { once: true },
  );
  const onStop = (): void => stop.abort();
  const onHup = (): void => scheduler.requestReload();
  process.on('SIGINT', onStop);
  process.on('SIGTERM', onStop);
  process.on('SIGHUP', onHup);
  const unwatchParent = stopWithNpm(log, () => stop.abort());
  try {
    await scheduler.run(stop.signal);
  } finally {
    unwatchParent();
    await served?.close();
    process.off('SIGINT', onStop);
    process.off('SIGTERM', onStop);
    process.off('SIGHUP', onHup);
    keeper.dispose();
    unwatchClock();
    await sink.flush(EXIT_FLUSH_MS);
    await keeper.lease.release();
  }
  return keeper.lost ? ExitCode.FAILED : ExitCode.OK;
}
