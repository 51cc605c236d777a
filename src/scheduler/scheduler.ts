// The scheduler loop (SPEC §6): fires every enabled, unpaused routine on its schedule (firing.ts,
// in this process), records each fire, honours pause/resume without a restart, reloads its
// config, and shuts down gracefully. Timing decisions are pure (timing.ts); this file carries
// them out.

import { createHash } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { anySignal, systemClock, type Clock } from '../clock.js';
import type { Project } from '../config/load.js';
import type { RoutineDef } from '../config/schema.js';
import type { LockRecord } from '../lock/record.js';
import type { Fire, RoutineRecord } from '../state/routine-state.js';
import type { FireResult, Trigger } from './firing.js';
import { holderText, type Logger } from './log.js';
import type { SchedulerObserver } from './observer.js';
import { claimMayHaveCommitted, recordOrSpool, spoolClaim, SpoolFlusher, withKey } from './record.js';
import type { RoutineStore } from './store.js';
import { lightSchedule, routineZone, type Schedule } from './schedule.js';
import { unstartedMarker } from './unstarted.js';
import { catchUpTime, clockWentBack, dueIds, nextFire, sleepMs } from './timing.js';

/** What a tick asks of one fire. */
export interface FireRequest {
  project: Project;
  signal: AbortSignal;
  trigger: Trigger;
  /** Set when the routine has `retry`: 1 for the scheduled fire, 2… for its retries. */
  attempt?: number;
  /** The routine's `ifBusy` (SPEC §10): skip, or wait up to `waitTimeoutMs` for the lock. */
  ifBusy: 'skip' | 'wait';
  waitTimeoutMs?: number;
  onStarted: () => void;
  /** With ifBusy "wait": the lock is busy and the fire waits for it. */
  onWait: (why: string, holder: LockRecord | null) => void;
}

/** Fires one routine (firing.ts in production, a stub in tests) and returns its record. */
export type FireFn = (def: RoutineDef, scheduledAt: Date, o: FireRequest) => Promise<FireResult>;

/** The longest a routine with ifBusy "wait" waits by default: its interval, at most an hour. */
export const MAX_DEFAULT_WAIT_MS = 3_600_000;

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
  /** This scheduler's host identity (claims name it). */
  host: string;
  random?: () => number;
  /** Watch the config file and reload on change (default true). */
  watchConfig?: boolean;
  /** Told of every recorded fire and every loop sleep (metrics and health, SPEC §11). */
  observer?: SchedulerObserver;
  /** Announces a recorded fire (SPEC §10 notifications; notify/notify.ts): with the routine's
   * record from before it, and whether it is final (false: a failure that will be retried).
   * Called only for routines with a notify target; never awaited by the tick itself. */
  notify?: (n: { project: Project; def: RoutineDef; prior: RoutineRecord | undefined; fire: FireResult; final: boolean; signal: AbortSignal }) => Promise<unknown>;
  /** Writes `routine list`'s cache of upcoming fire times for this config (list-cache.ts) and
   * returns when to write it again; called after each (re)load and when that time comes. */
  cacheSchedules?: (project: Project, nowMs: number) => number | null;
  /** Spool records (and lost claims) the database does not take, and flush them in the
   * background until it takes them (record.ts; SPEC §6). */
  spool?: boolean;
}

interface Entry {
  def: RoutineDef;
  schedule: Schedule;
}

export class Scheduler {
  private project: Project;
  private readonly clock: Clock;
  private readonly routines = new Map<string, Entry>();
  private readonly next = new Map<string, number | null>();
  private readonly running = new Map<string, Promise<void>>();
  /** Every tick in flight (claiming, recording, running), for shutdown. */
  private readonly ticks = new Set<Promise<void>>();
  /** Routines whose tick waits out its jitter: not started yet, so shutdown cancels them. */
  private readonly jittering = new Set<string>();
  private stopping = false;
  /** Aborted when shutdown begins: cuts every jitter wait short. */
  private readonly halt = new AbortController();
  /** The last scheduled time fired per routine: after a backward clock step a time is never
   * fired twice. */
  private readonly lastFired = new Map<string, number>();
  /** When each routine last ran (not skipped), for taking turns. */
  private readonly lastRan = new Map<string, number>();
  private readonly stops = new Map<string, AbortController>();
  private readonly pausedSeen = new Map<string, boolean>();
  private wake = new AbortController();
  private reloadRequested = false;
  private configHash = '';
  private watcher: FSWatcher | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private cacheAt: number | null = null;
  /** Aborted when shutdown gives up waiting: cuts notification deliveries short. */
  private readonly notifyStop = new AbortController();
  private cacheFailed = false;
  private readonly flusher: SpoolFlusher | null;

  constructor(private readonly o: SchedulerOptions) {
    this.project = o.project;
    this.clock = o.clock ?? systemClock;
    this.flusher = o.spool
      ? new SpoolFlusher({
          store: o.store, stateDir: () => this.project.stateDir, clock: this.clock, warn: (m) => this.warn(m),
          log: (f) => this.o.log({ event: 'scheduler.warning', message: `database back: recorded ${f.recorded} spooled fire${f.recorded === 1 ? '' : 's'}${f.released ? `, gave back ${f.released} claim${f.released === 1 ? '' : 's'} not fired` : ''}${f.left ? `; ${f.left} still spooled` : ''}` }),
        })
      : null;
  }

  get routineCount(): number {
    return this.routines.size;
  }

  /** The config in force (the last one a reload accepted), for views of this scheduler. */
  get currentProject(): Project {
    return this.project;
  }

  /** The clock stepped (with a database: the measured offset to its clock moved): the loop wakes
   * at once and treats it like a wall-clock step (recomputes after a backward one, fires a late
   * tick once after a forward one; claims keep any tick from firing twice). */
  clockStepped(): void {
    this.wake.abort();
  }

  /** Asks the loop to reload the config (SIGHUP, or the file changed). */
  requestReload(): void {
    this.reloadRequested = true;
    this.wake.abort();
  }

  async run(stop: AbortSignal): Promise<void> {
    this.apply(this.project);
    this.configHash = this.hashConfig();
    this.writeCache();
    if (this.o.watchConfig !== false) this.watchConfig();
    this.o.log({ event: 'scheduler.started', routines: this.routines.size, pid: process.pid });
    await this.catchUp();
    const onStop = (): void => this.wake.abort();
    stop.addEventListener('abort', onStop, { once: true });
    this.flusher?.start(this.halt.signal);
    let previousNow = this.clock.now();
    try {
      while (!stop.aborted) {
        if (this.reloadRequested) this.reload();
        const now = this.clock.now();
        if (clockWentBack(previousNow, now)) {
          this.recompute(now);
          this.writeCache();
        }
        previousNow = now;
        if (this.cacheAt !== null && now >= this.cacheAt) this.writeCache();
        // Due at the same moment, the routine that ran longest ago goes first: routines that
        // meet on every tick take turns at the exec lock instead of one always winning.
        const due = dueIds(this.next, now).sort((a, b) => (this.lastRan.get(a) ?? -Infinity) - (this.lastRan.get(b) ?? -Infinity));
        for (const id of due) {
          const entry = this.routines.get(id)!;
          const scheduledAt = this.next.get(id)!;
          // Late (suspend, clock step forward): fire once, then continue from now.
          this.next.set(id, nextFire(entry.schedule, Math.max(now, scheduledAt)));
          this.lastFired.set(id, scheduledAt);
          this.launch(entry, new Date(scheduledAt));
        }
        if (this.wake.signal.aborted) this.wake = new AbortController();
        const ms = sleepMs(this.next, this.clock.now());
        this.o.observer?.sleeping?.(ms);
        await this.clock.sleep(ms, this.wake.signal);
      }
    } finally {
      stop.removeEventListener('abort', onStop);
      this.watcher?.close();
      clearTimeout(this.debounce);
      await this.shutdown();
    }
  }

  /** Takes a (validated) config: schedules new and changed routines, drops removed ones. */
  private apply(project: Project): void {
    const now = this.clock.now();
    const seen = new Set<string>();
    for (const def of project.config.routines) {
      if (!def.enabled) continue;
      seen.add(def.id);
      const prior = this.routines.get(def.id);
      const sameTiming = prior && prior.def.schedule === def.schedule && prior.def.timezone === def.timezone;
      const schedule = sameTiming ? prior.schedule : lightSchedule(def.schedule, routineZone(def, project));
      this.routines.set(def.id, { def, schedule });
      if (!sameTiming) this.next.set(def.id, nextFire(schedule, now));
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

  private recompute(now: number): void {
    for (const [id, e] of this.routines) this.next.set(id, nextFire(e.schedule, Math.max(now, this.lastFired.get(id) ?? -Infinity)));
  }

  private reload(): void {
    this.reloadRequested = false;
    let fresh: Project;
    try {
      fresh = this.o.reloadProject();
    } catch (err) {
      this.o.log({ event: 'scheduler.reload_failed', error: (err as Error).message });
      return;
    }
    // Where state and locks live cannot change under a running scheduler: its own lock, its
    // claims and its records would stay in the old place while routines moved to the new one.
    const where = (p: Project): string => JSON.stringify([p.stateDir, p.lockDir, p.backend]);
    if (where(fresh) !== where(this.project)) {
      this.o.log({ event: 'scheduler.reload_failed', error: 'stateDir, the lock folder, the backend or the project name changed: restart the scheduler for that; keeping the old config' });
      return;
    }
    this.apply(fresh);
    this.configHash = this.hashConfig();
    this.writeCache();
    this.o.log({ event: 'scheduler.reloaded', routines: this.routines.size });
  }

  /** A cache that cannot be written only costs `routine list` its fast start: said once. */
  private writeCache(): void {
    if (!this.o.cacheSchedules) return;
    const now = this.clock.now();
    try {
      this.cacheAt = this.o.cacheSchedules(this.project, now);
    } catch (err) {
      this.cacheAt = now + 60_000;
      if (!this.cacheFailed) this.warn(`could not write the routine list cache (routine list computes its times itself): ${(err as Error).message}`);
      this.cacheFailed = true;
    }
  }

  private hashConfig(): string {
    try {
      return createHash('sha256').update(readFileSync(this.project.configPath)).digest('hex');
    } catch {
      return '';
    }
  }

  /** Reloads when the config file's content changes (editors replace it by rename, so the
   * folder is watched; a touch without a change does not reload). */
  private watchConfig(): void {
    const name = basename(this.project.configPath);
    try {
      this.watcher = watch(dirname(this.project.configPath), { persistent: false }, (_e, file) => {
        if (file !== null && file !== name) return;
        clearTimeout(this.debounce);
        this.debounce = setTimeout(() => {
          if (this.hashConfig() !== this.configHash) this.requestReload();
        }, 150);
      });
      this.watcher.on('error', () => this.watcher?.close());
    } catch {
      // no watch available: SIGHUP still reloads
    }
  }

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
      const missed = catchUpTime(schedule, state.routines[def.id]?.last_scheduled_at ?? null, now);
      if (!missed) continue;
      this.o.log({ event: 'routine.catch_up', routine: def.id, scheduled_at: missed.toISOString() });
      this.launch(entry, missed);
    }
  }

  private warn = (message: string): void => this.o.log({ event: 'scheduler.warning', message });

  /** Sleeps `ms`, or less once the routine's fire is stopped or the scheduler halts. */
  private async sleepUnless(ms: number, stop: AbortSignal): Promise<void> {
    const link = anySignal(stop, this.halt.signal);
    try {
      await this.clock.sleep(ms, link.signal);
    } finally {
      link.unlink();
    }
  }

  /** One tick of one routine. Tracked until done, so shutdown waits for it. */
  private launch(entry: Entry, scheduledAt: Date): void {
    const tick = this.tick(entry, scheduledAt).catch((err: Error) => this.warn(`${entry.def.id}: ${err.message}`));
    this.ticks.add(tick);
    void tick.finally(() => this.ticks.delete(tick));
  }

  private async tick(entry: Entry, scheduledAt: Date): Promise<void> {
    const def = entry.def;
    const id = def.id;
    // Several schedulers may share a database: exactly one of them takes each scheduled time,
    // and the others stay silent about it (it is not a skip).
    if (!(await this.claim(id, scheduledAt))) return;
    if (this.stopping) return;
    if (this.running.has(id)) {
      // The previous fire is still going (waiting out its jitter, waiting for the lock, or
      // between retries): a busy skip, recorded.
      const at = new Date(this.clock.now()).toISOString();
      const fire: Fire = { result: 'skipped', reason: 'previous run still running', scheduled_at: scheduledAt.toISOString(), started_at: at, finished_at: at, duration_ms: 0, exit_code: null, run_id: null, trigger: 'schedule' };
      this.o.log({ event: 'routine.skipped', routine: id, reason: fire.reason! });
      const prior = await this.priorRecord(def);
      await this.record(id, fire);
      this.o.observer?.fired?.(id, fire);
      this.announce(def, prior, fire, true);
      return;
    }
    const stop = new AbortController();
    this.stops.set(id, stop);
    const project = this.project;
    const task = (async () => {
      if (await this.isPaused(id)) return;
      const jitterMs = def.jitterSeconds > 0 ? (this.o.random ?? Math.random)() * def.jitterSeconds * 1000 : 0;
      if (jitterMs > 0) {
        this.jittering.add(id);
        await this.sleepUnless(jitterMs, stop.signal);
        this.jittering.delete(id);
        if (stop.signal.aborted || this.stopping || (await this.isPaused(id))) return;
      }
      const retry = def.retry;
      /** A failure whose announcement waits for its retries. */
      let pending: { prior: RoutineRecord | undefined; fire: FireResult } | null = null;
      try {
        for (let attempt = 1; ; attempt++) {
          if (stop.signal.aborted || this.stopping) return;
          const trigger: Trigger = attempt === 1 ? 'schedule' : 'retry';
          const result = await this.fireOnce(entry, scheduledAt, project, stop.signal, trigger, retry ? attempt : undefined);
          this.logResult(id, result);
          if (result.result !== 'skipped') this.lastRan.set(id, this.clock.monotonic());
          // Skips are never retried; a failure is, while attempts remain.
          const again = retry !== undefined && result.result === 'failure' && attempt <= retry.attempts && !this.stopping && !stop.signal.aborted;
          const recorded: FireResult = { ...result, trigger, ...(retry ? { attempt } : {}) };
          const prior = await this.priorRecord(def, project);
          await this.record(id, recorded);
          this.o.observer?.fired?.(id, result);
          if (result.result === 'skipped' && pending) {
            // a retry that met a busy lock ends the retries: the failure is final after all
            this.announce(def, pending.prior, pending.fire, true, project);
            pending = null;
          }
          this.announce(def, prior, recorded, !again, project);
          pending = again ? { prior, fire: recorded } : null;
          if (!again) return;
          // S, 2S, 4S… and up to a fifth more, so that routines failing together spread out.
          const delayMs = retry!.backoffSeconds * 1000 * 2 ** (attempt - 1) * (1 + 0.2 * (this.o.random ?? Math.random)());
          this.o.log({ event: 'routine.retrying', routine: id, attempt: attempt + 1, of: retry!.attempts + 1, in_ms: Math.round(delayMs) });
          await this.sleepUnless(delayMs, stop.signal);
          if (stop.signal.aborted || this.stopping || (await this.isPaused(id))) return;
        }
      } finally {
        // retries cut short (shutdown, pause): the last failure stands, and is announced
        if (pending) this.announce(def, pending.prior, pending.fire, true, project);
      }
    })();
    const tracked = task.finally(() => {
      this.running.delete(id);
      this.stops.delete(id);
    });
    this.running.set(id, tracked);
    await tracked;
  }

  /** Whether the routine has somewhere to announce its fires. */
  private notifies(def: RoutineDef, project: Project): boolean {
    return this.o.notify !== undefined && def.notify !== false && (def.notify !== undefined || project.config.notify !== null);
  }

  /** The routine's record before a fire is recorded, for its notifications (read only then). */
  private async priorRecord(def: RoutineDef, project: Project = this.project): Promise<RoutineRecord | undefined> {
    if (!this.notifies(def, project)) return undefined;
    try {
      return (await this.o.store.read(this.warn)).routines[def.id];
    } catch {
      return undefined;
    }
  }

  /** Sends a fire's notifications in the background (a slow webhook must not hold the routine
   * "running"), tracked so that shutdown waits for them. */
  private announce(def: RoutineDef, prior: RoutineRecord | undefined, fire: FireResult, final: boolean, project: Project = this.project): void {
    if (!this.notifies(def, project)) return;
    const sent = this.o.notify!({ project, def, prior, fire, final, signal: this.notifyStop.signal }).catch((err: Error) => this.warn(`${def.id}: notification failed: ${err.message}`)).then(() => {});
    this.ticks.add(sent);
    void sent.finally(() => this.ticks.delete(sent));
  }

  /** One fire of the routine, never throwing: a fire that could not even start is a failure. */
  private async fireOnce(entry: Entry, scheduledAt: Date, project: Project, signal: AbortSignal, trigger: Trigger, attempt: number | undefined): Promise<FireResult> {
    const { def } = entry;
    const id = def.id;
    try {
      return await this.o.fire(def, scheduledAt, {
        project, signal, trigger, attempt, ifBusy: def.ifBusy,
        waitTimeoutMs: def.ifBusy === 'wait' ? this.waitTimeoutMs(entry, scheduledAt) : undefined,
        onStarted: () => this.o.log({ event: 'routine.started', routine: id, scheduled_at: scheduledAt.toISOString() }),
        onWait: (why, holder) => this.o.log({ event: 'routine.waiting', routine: id, holder: holder ? holderText(holder) : why }),
      });
    } catch (err) {
      // Nothing ran (its log may not be written, the start could not be recorded): a failure
      // all the same, so that `routine list --check` shows it.
      const at = new Date(this.clock.now()).toISOString();
      const marker = unstartedMarker(err);
      return { result: 'failure', reason: `not started: ${(err as Error).message}`, scheduled_at: scheduledAt.toISOString(), started_at: at, finished_at: at, duration_ms: 0, exit_code: null, run_id: null, ...(marker ? { closes: marker } : {}) };
    }
  }

  /** `waitTimeoutSeconds`, or by default the routine's interval (from this fire to the next),
   * at most an hour: a wait never runs into the routine's next tick. */
  private waitTimeoutMs(entry: Entry, scheduledAt: Date): number {
    if (entry.def.waitTimeoutSeconds !== undefined) return entry.def.waitTimeoutSeconds * 1000;
    const next = nextFire(entry.schedule, scheduledAt.getTime());
    return next === null ? MAX_DEFAULT_WAIT_MS : Math.max(1000, Math.min(MAX_DEFAULT_WAIT_MS, next - scheduledAt.getTime()));
  }

  /** Claims the tick. A claim whose answer was lost may have committed: this host does not fire
   * the tick (it cannot know it is its own), and spools the claim so that it is given back once
   * the database answers again (no tick stays attributed to a host that never fired it). */
  private async claim(id: string, scheduledAt: Date): Promise<boolean> {
    try {
      return await this.o.store.claimTick(id, scheduledAt, this.o.host);
    } catch (err) {
      if (this.flusher && claimMayHaveCommitted(err)) {
        try {
          spoolClaim(this.project.stateDir, id, scheduledAt, this.o.host, (err as Error).message);
          this.flusher.kick();
        } catch (spoolErr) {
          this.warn(`${id}: could not spool the unanswered claim of ${scheduledAt.toISOString()}: ${(spoolErr as Error).message}`);
        }
      }
      throw err;
    }
  }

  /** Records a fire. With the spool, a record the database does not take is spooled at once
   * and flushed in the background until it is stored (once: SPEC §6). Other errors (a full
   * disk) are retried for a while; if the record never can be written, the fire's open marker
   * stays and the next reconcile records it as interrupted. */
  private async record(id: string, fire: Fire): Promise<void> {
    let delay = 200;
    // one key for every attempt, and each attempt after the first sent "again": a first try that
    // committed although its answer was lost is then not stored a second time
    const keyed = this.flusher ? withKey(fire) : fire;
    for (let attempt = 1; ; attempt++) {
      const opts = attempt > 1 ? { again: true } : {};
      try {
        if (!this.flusher) {
          await this.o.store.recordFire(id, keyed, this.warn, opts);
          return;
        }
        const r = await recordOrSpool(this.o.store, this.project.stateDir, id, keyed, this.warn, opts);
        if (!r.recorded) {
          this.warn(`could not record ${id} now (${r.why}); spooled to ${r.spooledTo}, recorded when the database is back`);
          this.flusher.kick();
        }
        return;
      } catch (err) {
        if (attempt >= 5 || this.halt.signal.aborted) {
          this.warn(`could not record ${id}: ${(err as Error).message}`);
          return;
        }
        await this.clock.sleep(delay, this.halt.signal);
        delay *= 2;
      }
    }
  }

  /** Reads the pause flag (honoured without a restart) and logs when it changed. */
  private async isPaused(id: string): Promise<boolean> {
    const record = (await this.o.store.read(this.warn)).routines[id];
    const paused = record?.paused === true;
    if (paused !== (this.pausedSeen.get(id) ?? false)) {
      this.pausedSeen.set(id, paused);
      this.o.log(paused ? { event: 'routine.paused', routine: id, note: record?.paused_note ?? null } : { event: 'routine.resumed', routine: id });
    }
    return paused;
  }

  private logResult(id: string, r: FireResult): void {
    if (r.result === 'success') this.o.log({ event: 'routine.succeeded', routine: id, duration_ms: r.duration_ms, run_id: r.run_id });
    else if (r.result === 'skipped') this.o.log({ event: 'routine.skipped', routine: id, reason: r.reason ?? 'exec busy', ...(r.holder ? { holder: holderText(r.holder) } : {}) });
    else this.o.log({ event: 'routine.failed', routine: id, reason: r.reason ?? 'failed', duration_ms: r.duration_ms, run_id: r.run_id });
  }

  /** Stop firing; let running routines finish up to the shutdown timeout; then stop them. */
  private async shutdown(): Promise<void> {
    // Stop firing means also not starting what still waits out its jitter.
    this.stopping = true;
    this.halt.abort();
    this.o.log({ event: 'scheduler.stopping', running: this.running.size - this.jittering.size });
    if (this.ticks.size > 0) {
      const timeout = new AbortController();
      const all = Promise.all(this.ticks).then(() => timeout.abort());
      await this.clock.sleep(this.o.shutdownTimeoutMs ?? 30_000, timeout.signal);
      for (const s of this.stops.values()) s.abort();
      this.notifyStop.abort();
      await all;
    }
    if (this.flusher) {
      const left = (await this.flusher.stopped())?.left ?? 0;
      if (left > 0) this.warn(`${left} record${left === 1 ? '' : 's'} still spooled in ${this.project.stateDir}/spool: the next scheduler or routine command on this host records ${left === 1 ? 'it' : 'them'}`);
    }
    this.o.log({ event: 'scheduler.stopped' });
  }
}
