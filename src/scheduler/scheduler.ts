// The scheduler loop (SPEC §6): decides what is due and hands each tick to the runner
// (runner.ts: the exec lock queue, jitter, retries, notifications), which records it through the
// recorder (recorder.ts). It also reloads its config, follows clock steps and shuts down
// gracefully. Timing decisions are pure (timing.ts, turns.ts); this file carries them out.
// (Over 300 lines: the loop with its reload, clock-step and shutdown paths, which share the loop's
// state; the decisions are in timing.ts and turns.ts.)

import { systemClock, type Clock } from '../clock.js';
import type { Project } from '../config/load.js';
import type { LockRecord } from '../lock/record.js';
import { ConfigWatch } from './config-watch.js';
import type { Logger } from '../fire/log.js';
import type { SchedulerObserver } from '../fire/observer.js';
import { Recorder } from '../fire/recorder.js';
import type { Announce, Entry, FireFn } from '../fire/fire-request.js';
import { Runner } from './runner.js';
import { routineChanges, settingsChanged } from './reload-changes.js';
import { PhaseRecorder } from '../state/phases.js';
import { selfIdentity } from '../process/identity.js';
import { lightSchedule, routineZone } from '../config/schedule.js';
import type { RoutineStore } from '../state/store.js';
import {
  backwardStep,
  catchUpTime,
  coverAfterStep,
  dueIds,
  forwardStep,
  missedTimes,
  nextUncovered,
  SLEPT_RECORD_CAP,
  sleepMs,
  sleptThrough,
  type ClockReading,
  type Covered,
} from './timing.js';
import { stepText } from '../duration.js';
import type { WaitLine } from '../lock/line.js';

import { sweepEveryMs, sweepLoop } from './claims.js';
import { own } from '../is-object.js';

export { MAX_DEFAULT_WAIT_MS, type FireFn, type FireRequest } from '../fire/fire-request.js';

export interface SchedulerOptions {
  project: Project;
  fire: FireFn;
  log: Logger;
  /** Reads and validates the config again (throws on a bad config). */
  reloadProject: () => Project;
  clock?: Clock;
  shutdownTimeoutMs?: number;
  /** Routine state and tick claims (files, or the database). */
  store: RoutineStore;
  /** The waiting lines of the locks (lock/line.ts): a queued tick takes its place there. */
  line?: WaitLine;
  /** This scheduler's host identity (claims name it). */
  host: string;
  /** With a shared database: who claims ticks, the lock id of the scheduler's first lease
   * (default: the host), and the lease's TTL (how often claims nobody works on are looked for,
   * claims.ts). */
  claimer?: string;
  claimTtlMs?: number;
  /** Claims not started yet at most (runner.ts CLAIMS_AHEAD). */
  claimsAhead?: number;
  random?: () => number;
  /** Watch the config file and reload on change (default true). */
  watchConfig?: boolean;
  /** Told of every recorded fire and every loop sleep (metrics and health, SPEC §11); also
   * attached later with observe(). */
  observer?: SchedulerObserver;
  /** Announces a recorded fire (SPEC §10 notifications; notify/notify.ts): with the routine's
   * record from before it, and whether it is final (false: a failure that will be retried).
   * Called only for routines with a notify target; never awaited by the tick itself. */
  notify?: Announce;
  /** Writes `routine list`'s cache of upcoming fire times for this config (list-cache.ts) and
   * returns when to write it again; called after each (re)load and when that time comes. */
  cacheSchedules?: (project: Project, nowMs: number) => number | null;
  /** A full garbage collection, at the first idle moment after a start or a reload
   * (settle-heap.ts); none in tests. */
  settleHeap?: () => void;
  /** Whether this scheduler still holds its scheduler lock; asked before every start (default:
   * always). One that finds it lost starts nothing (SPEC §6). */
  inCharge?: () => boolean;
  /** Not in charge: whether another scheduler holds the lock now (its lease only lapsed, in a
   * stall past its TTL, when nobody did: default, yes). Asked before the times a loop slept
   * through are recorded: they are that other scheduler's then, else still this one's. */
  takenOver?: () => Promise<boolean>;
  /** At shutdown, after its own fires: waits for work started beside them (runs started over
   * HTTP, which get the same shutdown timeout), before their records are flushed and the
   * scheduler says it stopped. */
  drain?: () => Promise<void>;
  /** Whether a lock holder is a fire of this process (default: its pid is ours on this host). */
  ownHolder?: (holder: LockRecord) => boolean;
}

/** How often a scheduler whose state folder cannot be written looks at it again. */
const STATE_PROBE_MS = 1_000;

/** A wake-up of the loop this much later than it slept for: it slept through its times. */
const LATE_WAKE_MS = 1_000;

export class Scheduler {
  private project: Project;
  private readonly clock: Clock;
  private readonly routines = new Map<string, Entry & { since: number }>();
  private readonly next = new Map<string, number | null>();
  private readonly runner: Runner;
  private readonly phases: PhaseRecorder;
  /** Records every fire of this process: the scheduler's, and those of its HTTP run action. */
  readonly recorder: Recorder;
  private observer: SchedulerObserver;
  private readonly config: ConfigWatch;
  private wake = new AbortController();
  private reloadRequested = false;
  private cacheAt: number | null = null;
  private cacheFailed = false;
  /** Started or reloaded, and not yet collected after (settle-heap.ts). */
  private heapUnsettled = true;
  /** Scheduled times dealt with before a backward clock step, never fired again. */
  private covered: Covered[] = [];
  /** Per routine, the scheduled times it fired right after a forward step (its missed tick): the
   * times jumped over are not covered, these are. */
  private firedAcrossJump = new Map<string, Covered[]>();
  /** Why the state folder cannot be written now (fires are held), or null: a fire could not
   * start, a record could not be written, or the scheduler's own lock could not be kept there.
   * Each is cleared only by what set it: a fire that started (its marker was written before the
   * folder failed) says nothing of the lock, whose keeper clears its own once it holds it again. */
  private stateProblem: string | null = null;
  private recordProblem: string | null = null;
  private lockProblem: string | null = null;
  /** Every time after this (and before the last reading) has been dealt with. */
  private epochStart = 0;

  constructor(private readonly o: SchedulerOptions) {
    this.project = o.project;
    this.clock = o.clock ?? systemClock;
    this.observer = o.observer ?? {};
    this.recorder = new Recorder({
      store: o.store,
      clock: this.clock,
      log: o.log,
      warn: this.warn,
      stateDir: () => this.project.stateDir,
      host: o.host,
      ...(o.claimer ? { claimer: o.claimer } : {}),
      ...(o.notify ? { notify: o.notify } : {}),
      waitOutStorage: true,
      stateTrouble: (err) => this.recordTrouble(err),
    });
    this.recorder.observe(this.observer);
    // the phases of fires before they run (queued, waiting), written as they change for every
    // view to read (SPEC §6)
    const me = selfIdentity();
    const phases = (this.phases = new PhaseRecorder({
      owner: {
        pid: me.pid,
        host: o.host,
        boot_id: me.boot_id,
        start_time: me.start_time,
        ...(me.pid_ns ? { pid_ns: me.pid_ns } : {}),
      },
      clock: this.clock,
      write: (board) => o.store.writePhases(board),
      warn: this.warn,
    }));
    this.runner = new Runner({
      fire: o.fire,
      log: o.log,
      clock: this.clock,
      random: o.random ?? Math.random,
      recorder: this.recorder,
      project: () => this.project,
      inCharge: o.inCharge ?? (() => true),
      takenOver: o.takenOver ?? (async () => true),
      ownHolder: o.ownHolder ?? ((h) => h.owner.pid === process.pid && h.owner.host === o.host),
      stateTrouble: (err) => this.stateTrouble(err),
      stateBroken: () => this.stateUnwritable !== null,
      sharedTicks: o.store.sharedTicks,
      phases,
      line: o.line,
      claimsBack: () => void this.catchUp(),
      ...(o.claimsAhead ? { claimsAhead: o.claimsAhead } : {}),
    });
    this.runner.haltSignal.addEventListener('abort', () => this.recorder.halt(), { once: true });
    this.config = new ConfigWatch(
      () => this.project.configPath,
      () => this.requestReload(),
    );
  }

  /** Who is told of every recorded fire and every loop sleep (an HTTP server started after
   * the scheduler was made). */
  observe(observer: SchedulerObserver): void {
    this.observer = observer;
    this.recorder.observe(observer);
  }

  get routineCount(): number {
    return this.routines.size;
  }

  /** The config in force (the last one a reload accepted), for views of this scheduler. */
  get currentProject(): Project {
    return this.project;
  }

  /** The clock stepped (with a database: the measured offset to its clock moved): the loop wakes
   * at once and treats it like a wall-clock step. */
  clockStepped(): void {
    this.wake.abort();
  }

  /** Whether the state folder can be written again (checked while fires are held). */
  private probeState(): void {
    if (!this.o.store.probeWritable || this.o.inCharge?.() === false) return;
    try {
      this.o.store.probeWritable();
    } catch {
      return;
    }
    this.stateTrouble(null);
  }

  /** Why the state folder cannot be written now (for /healthz), or null. */
  get stateUnwritable(): string | null {
    return this.recordProblem ?? this.stateProblem ?? this.lockProblem;
  }

  /** A fire could not start because the state cannot be written (`err`), or one started again
   * (null). Said once per change; when writable again, a missed tick of a `catchUp: "latest"`
   * routine fires once (SPEC §4.15). */
  stateTrouble(err: unknown): void {
    const before = this.stateUnwritable;
    this.stateProblem = err === null ? null : (this.stateProblem ?? (err instanceof Error ? err.message : String(err)));
    this.stateChanged(before);
  }

  /** The scheduler's own lock could not be kept because of the state folder (`err`), or it is
   * held again (null): told by the lease keeper (scheduler/lease-keeper.ts). */
  lockTrouble(err: unknown): void {
    const before = this.stateUnwritable;
    this.lockProblem = err === null ? null : (this.lockProblem ?? (err instanceof Error ? err.message : String(err)));
    this.stateChanged(before);
  }

  /** A record could not be written because of the state folder (`err`), or one could again
   * (null; the recorder says so). Until then the folder is not writable for what matters, whatever
   * a probe that frees a byte or two may find (a full disk where removing a lock file made room
   * for the probe, not for a history line). */
  private recordTrouble(err: unknown): void {
    const before = this.stateUnwritable;
    this.recordProblem =
      err === null ? null : (this.recordProblem ?? (err instanceof Error ? err.message : String(err)));
    this.stateChanged(before);
  }

  private stateChanged(before: string | null): void {
    const now = this.stateUnwritable;
    if ((before === null) === (now === null)) return;
    this.o.log({ event: 'scheduler.state', writable: now === null, message: now });
    if (now === null) void this.catchUp();
  }

  /** Asks the loop to reload the config (SIGHUP, or the file changed). */
  requestReload(): void {
    this.reloadRequested = true;
    this.wake.abort();
  }

  async run(stop: AbortSignal): Promise<void> {
    this.epochStart = this.clock.now();
    this.apply(this.project);
    this.config.accepted(this.project.configText);
    this.writeCache();
    if (this.o.watchConfig !== false) this.config.start();
    this.o.log({ event: 'scheduler.started', routines: this.routines.size, pid: process.pid });
    await this.catchUp();
    const onStop = (): void => this.wake.abort();
    stop.addEventListener('abort', onStop, { once: true });
    await this.recorder.start();
    // with a shared database: claims nobody works on are taken over (claims.ts)
    const sweeping =
      this.o.store.sharedTicks && this.o.store.orphanClaims
        ? sweepLoop(
            {
              recorder: this.recorder,
              runner: this.runner,
              clock: this.clock,
              entry: (id) => this.routines.get(id),
              project: () => this.project,
              log: this.o.log,
              warn: this.warn,
            },
            sweepEveryMs(this.o.claimTtlMs ?? 60_000),
            this.runner.haltSignal,
          )
        : null;
    let before: ClockReading = { wall: this.clock.now(), mono: this.clock.monotonic() };
    let lateWake: ClockReading | null = null;
    try {
      while (!stop.aborted) {
        if (this.reloadRequested) this.reload();
        const now: ClockReading = { wall: this.clock.now(), mono: this.clock.monotonic() };
        const back = backwardStep(before, now);
        const forward = back > 0 ? 0 : forwardStep(before, now);
        // (the step happened between the two readings: on the new clock, the last reading was
        // at `now.wall` less the time the monotonic clock says passed since)
        if (back > 0) this.steppedBack(before.wall, now.wall - Math.max(0, now.mono - before.mono), back);
        else if (forward > 0) this.steppedForward(before, now, forward);
        before = now;
        if (this.cacheAt !== null && now.wall >= this.cacheAt) this.writeCache();
        this.dealWithDue(now, forward);
        if (this.wake.signal.aborted) this.wake = new AbortController();
        if (this.stateProblem !== null) this.probeState();
        // while fires are held, the state folder is looked at again every second
        const ms = Math.min(
          sleepMs(this.next, this.clock.now()),
          this.stateUnwritable !== null ? STATE_PROBE_MS : Infinity,
        );
        // the first idle moment after a start or a reload: the garbage of loading it given back
        if (this.heapUnsettled && ms >= 100) {
          this.heapUnsettled = false;
          this.o.settleHeap?.();
        }
        this.observer.sleeping?.(ms);
        const planned = this.clock.monotonic() + ms;
        await this.clock.sleep(ms, this.wake.signal);
        const woke = { wall: this.clock.now(), mono: this.clock.monotonic() };
        lateWake = woke.mono - planned > LATE_WAKE_MS ? woke : null;
      }
      // Stopped because its lock lapsed while it slept (SIGSTOP past the TTL), the keeper having
      // noticed that before this loop woke: what it slept through is still to be dealt with —
      // its own to record when nobody took the lock (SPEC §6: nothing lost without a record); the
      // runner records nothing when another did. (A wake on time has nothing slept through: a
      // tick due after the stop is the next scheduler's, as after any stop.)
      // (a step of the wall clock meanwhile as the loop takes it: forward, each routine's missed
      // tick once and nothing replayed; back, nothing is due on the new clock)
      if (lateWake && this.o.inCharge?.() === false && backwardStep(before, lateWake) === 0)
        this.dealWithDue(lateWake, forwardStep(before, lateWake));
    } finally {
      stop.removeEventListener('abort', onStop);
      this.config.stop();
      await this.runner.shutdown(this.o.shutdownTimeoutMs ?? 30_000);
      await this.o.drain?.();
      await sweeping;
      await this.phases.settled();
      await this.recorder.stopped();
      this.o.log({ event: 'scheduler.stopped' });
    }
  }

  /** Fires (or, slept through, records as skipped) every routine's time that is due at `now`;
   * `forward`: a forward step just noticed (then each fires once, nothing is replayed). */
  private dealWithDue(now: ClockReading, forward: number): void {
    for (const id of this.inClaimOrder(dueIds(this.next, now.wall))) {
      const entry = this.routines.get(id)!;
      const scheduledAt = this.next.get(id)!;
      // Late by a stall of a few seconds: each time missed fires (SPEC §9: every tick of a
      // shared database is someone's); late by a suspend or a clock step forward: once,
      // then continue from now.
      const times =
        forward > 0
          ? [scheduledAt]
          : missedTimes(entry.schedule, scheduledAt, now.wall, this.coveredFor(id), entry.since);
      // Later than that with no clock step (stopped, paused, overloaded): the first fires
      // late, every other time slept through is recorded as a skip that says so (SPEC §6
      // "Nothing is lost without a record"); claimed first, so with a shared database a time
      // another scheduler fired stays its.
      const slept =
        forward > 0
          ? { times: [], more: 0 }
          : sleptThrough(entry.schedule, scheduledAt, now.wall, this.coveredFor(id), entry.since);
      this.next.set(
        id,
        nextUncovered(entry.schedule, Math.max(now.wall, times.at(-1)!), this.coveredFor(id), entry.since),
      );
      if (forward > 0)
        this.firedAcrossJump.set(id, [
          ...(this.firedAcrossJump.get(id) ?? []).slice(-15),
          { from: scheduledAt - 1, to: scheduledAt },
        ]);
      for (const t of times) this.runner.launch(entry, new Date(t));
      if (slept.times.length > 0) {
        const late = `missed: the scheduler woke ${stepText(now.wall - scheduledAt)} late (stopped, paused or overloaded); the tick of ${new Date(scheduledAt).toISOString()} took its place`;
        for (const t of slept.times) this.runner.missed(entry, new Date(t), late);
        if (slept.more > 0)
          this.o.log({
            event: 'scheduler.warning',
            message: `${id}: ${slept.more} more times slept through were not recorded (at most ${SLEPT_RECORD_CAP} per wake-up)`,
          });
      }
    }
  }

  /** With a shared database each scheduler claims the ticks due together in an order of its own
   * (its host's hash of each routine), so that schedulers waking together mostly claim different
   * ticks first instead of racing for the same ones. */
  private inClaimOrder(ids: string[]): string[] {
    if (!this.o.store.sharedTicks || ids.length < 2) return ids;
    const rank = (id: string): number => {
      let h = 0x811c9dc5;
      for (const c of `${this.o.host}\0${id}`) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193);
      return h >>> 0;
    };
    return ids
      .map((id) => [rank(id), id] as const)
      .sort((a, b) => a[0] - b[0])
      .map(([, id]) => id);
  }

  /** The times a routine never fires again: those dealt with, and its own fired across a jump. */
  private coveredFor(id: string): Covered[] {
    const own = this.firedAcrossJump.get(id);
    return own ? [...this.covered, ...own] : this.covered;
  }

  /** After a backward step, every routine fires on its schedule in the new time at once; the
   * times dealt with before the step are covered and never fire again (SPEC §6). `sinceMs`: the
   * last reading before the step, on the new clock — a time after it that is due by the time the
   * loop noticed the step (the tick it woke for) fires now, never passed over. */
  private steppedBack(beforeMs: number, sinceMs: number, stepMs: number): void {
    this.covered = coverAfterStep(this.covered, this.epochStart, beforeMs, sinceMs);
    this.epochStart = sinceMs;
    this.o.log({ event: 'scheduler.clock_step', direction: 'back', step_ms: Math.round(stepMs) });
    for (const [id, e] of this.routines)
      this.next.set(id, nextUncovered(e.schedule, sinceMs, this.coveredFor(id), e.since));
    this.writeCache();
  }

  /** After a forward step, each routine's missed tick fires once (the loop does that now); the
   * times the clock jumped over were never dealt with: only those before the jump are covered,
   * so a step back that undoes the jump fires on the corrected time at once (SPEC §6). */
  private steppedForward(before: ClockReading, now: ClockReading, stepMs: number): void {
    // what the loop had dealt with: every time up to its last reading
    this.covered = coverAfterStep(this.covered, this.epochStart, before.wall, -Infinity);
    this.epochStart = now.wall;
    this.o.log({ event: 'scheduler.clock_step', direction: 'forward', step_ms: Math.round(stepMs) });
  }

  /** Takes a (validated) config: schedules new and changed routines, drops removed ones. A
   * routine whose timing changed is scheduled from `fromMs` (a reload: when it began), or from
   * its old next time if that was due already: a tick that fell due while the reload was
   * validating is fired late, not passed over without a record. */
  private apply(project: Project, fromMs?: number): void {
    const now = this.clock.now();
    const seen = new Set<string>();
    for (const [order, def] of project.config.routines.entries()) {
      if (!def.enabled) continue;
      seen.add(def.id);
      const prior = this.routines.get(def.id);
      const sameTiming = prior && prior.def.schedule === def.schedule && prior.def.timezone === def.timezone;
      const schedule = sameTiming ? prior.schedule : lightSchedule(def.schedule, routineZone(def, project));
      const priorNext = prior ? this.next.get(def.id) : undefined;
      const from = Math.min(now, fromMs ?? now, typeof priorNext === 'number' ? priorNext - 1 : now);
      this.routines.set(def.id, { def, schedule, order, since: sameTiming ? prior.since : from });
      if (!sameTiming) this.next.set(def.id, nextUncovered(schedule, from, this.covered, from));
    }
    for (const id of [...this.routines.keys()]) {
      if (!seen.has(id)) {
        this.routines.delete(id);
        this.next.delete(id);
      }
    }
    // Routines fire in this process with this validated config: nothing reads the file again
    // until a reload accepts a new one.
    this.project = project;
  }

  private reload(): void {
    this.reloadRequested = false;
    const began = this.clock.now();
    let fresh: Project;
    try {
      fresh = this.o.reloadProject();
    } catch (err) {
      this.o.log({ event: 'scheduler.reload_failed', error: (err as Error).message });
      return;
    }
    // Where state and locks live cannot change under a running scheduler: its own lock, its
    // claims and its records would stay in the old place while routines moved to the new one.
    const where = (p: Project): string => JSON.stringify([p.stateDir, p.lockDir, p.backend, p.config.project ?? null]);
    if (where(fresh) !== where(this.project)) {
      this.o.log({
        event: 'scheduler.reload_failed',
        error: `stateDir, the lock folder, the backend or the project name changed: restart the scheduler for that (kill -TERM ${process.pid}, then start it again): until then this scheduler runs the old config where it was, and commands that read the new one look in the new place and do not see it (\`scheduler status\` says not running there, and a second scheduler started there would fire every routine again); keeping the old config`,
      });
      return;
    }
    const before = this.project.config.routines;
    const settings = settingsChanged(this.project.config, fresh.config);
    // a tick of a routine this reload removes or disables that waits now is dropped (runner.ts)
    for (const r of before) {
      if (!r.enabled) continue;
      const now = fresh.config.routines.find((x) => x.id === r.id);
      const why = !now ? 'removed from the config' : !now.enabled ? 'disabled' : null;
      if (why) this.runner.reloadDropped(r.id, why);
    }
    this.apply(fresh, began);
    this.runner.resizeQueues();
    // the bytes validated, not the file as it is now: an edit made while this reload ran is
    // still a change, and reloads next
    this.config.accepted(fresh.configText);
    this.writeCache();
    this.heapUnsettled = true;
    this.o.log({
      event: 'scheduler.reloaded',
      routines: this.routines.size,
      ...routineChanges(before, fresh.config.routines),
      ...(settings.length > 0 ? { settings } : {}),
    });
  }

  /** A cache that cannot be written only costs `routine list` its fast start: said once. */
  private writeCache(): void {
    if (!this.o.cacheSchedules) return;
    const now = this.clock.now();
    try {
      this.cacheAt = this.o.cacheSchedules(this.project, now);
    } catch (err) {
      this.cacheAt = now + 60_000;
      if (!this.cacheFailed)
        this.warn(
          `could not write the routine list cache (routine list computes its times itself): ${(err as Error).message}`,
        );
      this.cacheFailed = true;
    }
  }

  /** `catchUp: "latest"`: a scheduled time missed while no scheduler ran fires once now. A time
   * whose fire is open (started by a scheduler that was paused or died) counts as not missed. */
  private async catchUp(): Promise<void> {
    let state;
    try {
      state = await this.o.store.read(this.warn);
    } catch (err) {
      this.warn(`catch-up skipped: ${(err as Error).message}`);
      return;
    }
    const now = this.clock.now();
    for (const entry of this.routines.values()) {
      const { def, schedule } = entry;
      if (def.catchUp !== 'latest') continue;
      const record = own(state.routines, def.id);
      // a paused routine is not caught up (said once, by its fire's pause check: no "catching
      // up" line first)
      if (record?.paused) continue;
      const last = [record?.last_scheduled_at ?? null, ...(record?.open_fires ?? []).map((f) => f.scheduled_at)].reduce<
        string | null
      >((a, b) => (b !== null && (a === null || b > a) ? b : a), null);
      const missed = catchUpTime(schedule, last, now);
      if (!missed) continue;
      this.o.log({ event: 'routine.catch_up', routine: def.id, scheduled_at: missed.toISOString() });
      this.runner.launch(entry, missed);
    }
  }

  private warn = (message: string): void => this.o.log({ event: 'scheduler.warning', message });
}
