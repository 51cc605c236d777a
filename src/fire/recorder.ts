// The one path by which a process records a fire (SPEC §6: every fire that started is recorded
// exactly once): the scheduler's ticks and retries, `routine run`, the HTTP run action, and the
// fires left open by a process that died (reconcile). Each record is written to the routine
// store (retried; with a database, spooled when it does not take it, spooling-store.ts), then
// told to the observer (the metrics) and announced (the notifications) — so counters, history,
// routine-state.json and notifications cannot disagree about which fires happened.
// (Just over 300 lines: it is also where claims are batched, as the one path to the store.)

import { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import { isStorageError } from '../errors.js';
import type { Project } from '../config/load.js';
import type { RoutineDef } from '../config/types.js';
import type { Fire, OpenFire, RoutineRecord } from '../state/routine-state.js';
import type { LockRecord } from '../lock/record.js';
import { processGone, systemProbe } from '../process/identity.js';
import { endRunOrphans } from '../file-lock/orphans.js';
import { isRunId } from '../run-id.js';
import type { FireResult } from './firing.js';
import type { Announce } from './fire-request.js';
import type { Logger } from './log.js';
import type { SchedulerObserver } from './observer.js';
import { flushMessage, SpoolFlusher } from '../state/spooling-store.js';
import {
  claimKey,
  withKey,
  type Claimant,
  type Deferred,
  type OrphanClaim,
  type RoutineStore,
  type Warn,
} from '../state/store.js';

export interface RecorderOptions {
  store: RoutineStore;
  clock: Clock;
  log: Logger;
  warn: Warn;
  /** The state folder of the config in force (where the spool is, for messages). */
  stateDir: () => string;
  /** This process's host identity (claims name it). */
  host: string;
  /** Who claims ticks with a shared database: the lock id of the scheduler's first lease (a
   * claim is taken over when no lease held has that id or names it as its claimer: a lease
   * taken again after a stall does; scheduler/claims.ts). Default: the host. */
  claimer?: string;
  /** Announces a recorded fire (SPEC §10; notify/notify.ts), for routines with a target. */
  notify?: Announce;
  /** A state folder that cannot be written (full, read-only) is waited out for as long as the
   * process runs (the scheduler: the fire ran, and its record goes in once it can, SPEC §4.15);
   * otherwise (a command) it is tried a few times. */
  waitOutStorage?: boolean;
  /** Told when a record cannot be written because the state folder cannot be (the error), and
   * when one could be again (null): the scheduler's /healthz and its log. */
  stateTrouble?: (err: unknown) => void;
}

/** What became of a fire's record. */
export interface Recorded {
  /** The record waits in this host's spool (the database did not take it now). */
  deferred: Deferred | null;
  /** Why it could not be recorded at all (said with warn): the fire's open marker stays, and the
   * next reconcile records it as interrupted. */
  failed: Error | null;
  /** The routine's record before this fire (for an announcement made later). */
  prior: RoutineRecord | undefined;
  /** Not stored: another record of the fire stands, or its tick is another scheduler's (said
   * by the store); neither counted nor announced here, nor later. */
  refused?: boolean;
  /** Its notifications, delivered in the background: a command awaits them, the scheduler
   * tracks them for its shutdown. */
  announced: Promise<void>;
}

export interface RecordOptions {
  /** False for a failed attempt that will be retried (it announces nothing yet). */
  final?: boolean;
  /** Cuts notification deliveries short. */
  signal?: AbortSignal;
  /** The record of a tick this scheduler claimed: stored only while the claim is its own (a
   * database backend; a claim taken over is recorded by the one that took it). */
  claimed?: boolean;
}

const RECORD_ATTEMPTS = 5;

/** Claims sent in one statement at most. */
const CLAIM_BATCH = 100;

export class Recorder {
  private readonly flusher: SpoolFlusher | null;
  private observer: SchedulerObserver = {};
  private readonly halted = new AbortController();
  /** Records being retried because the state folder would not take them: while any is, the
   * folder counts as not writable (a record of another routine that fits where this one does not
   * changes nothing); said once when the first fails, and once when the last is in. */
  private readonly failing = new Set<symbol>();
  /** The spool's flusher runs (start()): a spooled record is sent again by this process. */
  private flushing = false;
  /** Each routine's deliveries under way, the last of them: the next waits for it. */
  private readonly delivering = new Map<string, Promise<void>>();

  constructor(private readonly o: RecorderOptions) {
    const spooling = o.store.flushSpool ? { flushSpool: o.store.flushSpool.bind(o.store) } : null;
    this.flusher = spooling
      ? new SpoolFlusher({
          store: spooling,
          clock: o.clock,
          warn: o.warn,
          log: (f) => o.log({ event: 'scheduler.warning', message: flushMessage(f) }),
        })
      : null;
  }

  /** Who is told of every recorded fire (the metrics of an HTTP server started after this). */
  observe(observer: SchedulerObserver): void {
    this.observer = observer;
  }

  /** Shutdown began: retries stop waiting. */
  halt(): void {
    this.halted.abort();
  }

  /** At start: the shared index is brought up to date once (a damaged one moved aside; the
   * store keeps it so from then on), then the spool's flusher runs in the background. */
  async start(): Promise<void> {
    await this.o.store.publish?.();
    this.flusher?.start(this.halted.signal);
    this.flushing = this.flusher !== null;
  }

  /** After the halt: the shared index gets what is pending; one more flush of the spool, saying
   * what is still spooled. */
  async stopped(): Promise<void> {
    await this.o.store.close?.();
    if (!this.flusher) return;
    const left = (await this.flusher.stopped())?.left ?? 0;
    if (left > 0)
      this.o.warn(
        `${left} record${left === 1 ? '' : 's'} still spooled in ${this.o.stateDir()}/spool: the next scheduler or routine command on this host records ${left === 1 ? 'it' : 'them'}`,
      );
  }

  /** Who this process claims ticks as. */
  get claimant(): Claimant {
    return { host: this.o.host, claimer: this.o.claimer ?? this.o.host };
  }

  /** Claims a scheduled time for this scheduler (several schedulers share a database: one of
   * them takes each). Throws when the database did not answer; sent again, a claim that
   * committed although its answer was lost is recognised as this claimer's. */
  claim(id: string, scheduledAt: Date, again = false): Promise<boolean> {
    if (!this.o.store.claimTicks) return this.o.store.claimTick(id, scheduledAt, this.claimant);
    // the claims asked for in one turn of the event loop go in one statement (CLAIM_BATCH at most)
    return new Promise((resolve, reject) => {
      this.claimsAsked.push({ id, scheduledAt, again, resolve, reject });
      if (this.claimsAsked.length === 1) setImmediate(() => this.sendClaims());
    });
  }

  private claimsAsked: {
    id: string;
    scheduledAt: Date;
    again: boolean;
    resolve: (won: boolean) => void;
    reject: (err: unknown) => void;
  }[] = [];

  private sendClaims(): void {
    const all = this.claimsAsked.splice(0);
    for (const again of [false, true]) {
      const asked = all.filter((a) => a.again === again);
      for (let i = 0; i < asked.length; i += CLAIM_BATCH) this.sendBatch(asked.slice(i, i + CLAIM_BATCH), again);
    }
  }

  private sendBatch(part: Recorder['claimsAsked'], again: boolean): void {
    this.o.store.claimTicks!(
      part.map((a) => ({ routine: a.id, scheduledAt: a.scheduledAt })),
      this.claimant,
      again,
    ).then(
      (won) => part.forEach((a) => a.resolve(won.has(claimKey(a.id, a.scheduledAt)))),
      (err: unknown) => part.forEach((a) => a.reject(err)),
    );
  }

  /** With a shared database: records the fires left open by schedulers whose lease is gone (a
   * scheduler SIGKILLed mid-fire on another host; its own host's reconcile cannot tell), as
   * interrupted, once each (scheduler/claims.ts). Returns how many it closed. */
  async closeOpenOfGoneClaimers(project: Project): Promise<number> {
    const gone = (await this.o.store.openFiresOfGoneClaimers?.(this.claimant.claimer)) ?? [];
    if (gone.length === 0) return 0;
    // (its notifications go on by themselves, as those of the fires found at start)
    return (await this.reconcile(project, undefined, null, new Set(gone))).closed;
  }

  /** Unsettled claims of claimers that are gone, and this one's own (scheduler/claims.ts). */
  orphanClaims(limit: number): Promise<OrphanClaim[]> {
    return this.o.store.orphanClaims?.(this.claimant.claimer, limit) ?? Promise.resolve([]);
  }

  /** Settles a claim of this scheduler's whose tick ends with no fire and no record (paused):
   * best effort (a claim left unsettled is recorded by this scheduler's sweep). */
  async settle(id: string, scheduledAt: Date): Promise<void> {
    try {
      await this.o.store.settleClaim?.(id, scheduledAt, this.claimant.claimer);
    } catch (err) {
      this.o.warn(`${id}: the claim of ${scheduledAt.toISOString()} could not be settled: ${(err as Error).message}`);
    }
  }

  /** Takes an orphan claim over for this scheduler; false when someone else settled or took it. */
  takeOver(claim: OrphanClaim): Promise<boolean> {
    return this.o.store.takeOverClaim?.(claim, this.claimant) ?? Promise.resolve(false);
  }

  /** Gives back a claim this process made for a tick it will not fire (best effort: a claim
   * that stays is one more tick nobody fires, as when its answer was lost). */
  async giveBack(id: string, scheduledAt: Date): Promise<void> {
    try {
      await this.o.store.releaseClaim(id, scheduledAt, this.o.host);
    } catch (err) {
      this.o.warn(
        `${id}: the claim of ${scheduledAt.toISOString()} could not be given back: ${(err as Error).message}`,
      );
    }
  }

  /** Records a fire of `def`: the record, the observer, the notifications. */
  async record(def: RoutineDef, project: Project, fire: FireResult, opts: RecordOptions = {}): Promise<Recorded> {
    const announcing = this.o.notify !== undefined && notifies(def, project);
    // the record before this fire, for its notifications (read only then)
    const prior = announcing ? await this.current(def.id) : undefined;
    const { deferred, failed, refused } = await this.write(def.id, fire, opts.claimed === true);
    // a record the store refused (another record of the fire stands, said by the store; its
    // tick another scheduler's) is neither counted nor announced here: whoever stored the
    // record that stands did both
    if (!failed && !refused) this.tell(def.id, fire);
    const announced =
      failed || refused ? Promise.resolve() : this.announce(def, project, prior, fire, opts.final ?? true, opts.signal);
    return { deferred, failed, prior, announced, ...(refused ? { refused } : {}) };
  }

  /** Sends a fire's notifications (never throws), after the routine's earlier ones: a routine's
   * events reach their receiver in the order they were recorded, each with its retries (a
   * recovery never before the failure it follows). */
  announce(
    def: RoutineDef,
    project: Project,
    prior: RoutineRecord | undefined,
    fire: FireResult,
    final: boolean,
    signal?: AbortSignal,
  ): Promise<void> {
    const notify = this.o.notify;
    if (!notify || !notifies(def, project)) return Promise.resolve();
    const earlier = this.delivering.get(def.id) ?? Promise.resolve();
    const sent = earlier
      .then(() => notify({ project, def, prior, fire, final, signal: signal ?? new AbortController().signal }))
      .then(
        () => {},
        (err: Error) => this.o.warn(`${def.id}: notification failed: ${err.message}`),
      )
      .finally(() => {
        if (this.delivering.get(def.id) === sent) this.delivering.delete(def.id);
      });
    this.delivering.set(def.id, sent);
    return sent;
  }

  /** Records every open fire whose process is gone as interrupted (SPEC §6), through the same
   * path: counted, and announced as the failure it is. Returns how many it closed. */
  async reconcile(
    project: Project,
    signal?: AbortSignal,
    from: LockRecord | null = null,
    ofGoneClaimers: ReadonlySet<string> = new Set(),
  ): Promise<{ closed: number; announced: Promise<void> }> {
    // started once what the fires left running is ended: a notification command carries the
    // run's id as its commands do
    const announcements: (() => Promise<void>)[] = [];
    // The owner is judged on this host only (elsewhere it cannot be told) — except the fire
    // whose lock was just taken over from its holder (`from`, on any host): its outcome is lost.
    const orphaned = new Set<string>();
    const closed = await this.o.store.reconcile(
      (owner, open, routineId) => {
        const gone = processGone(owner);
        if (gone && open.run_id !== null && isRunId(open.run_id)) orphaned.add(open.run_id);
        // a scheduler's fire on a shared database whose scheduler lease is gone (on any host)
        const claimerGone = owner.claimer !== undefined && ofGoneClaimers.has(open.id);
        return gone || claimerGone || lostWithLock(from, owner, open, routineId);
      },
      this.o.warn,
      (id, fire, prior) => {
        this.tell(id, fire);
        const def = project.config.routines.find((r) => r.id === id);
        // announced from the routine's record before it, as every fire is (its counters)
        if (def) announcements.push(() => this.announce(def, project, prior, fire, true, signal));
      },
    );
    // what those fires started and still runs on this host is ended before anything of the
    // routine starts again (a routine without a lock had no takeover to end it)
    for (const runId of orphaned)
      await endRunOrphans(runId, { probe: systemProbe(), clock: this.o.clock, warn: this.o.warn });
    return { closed, announced: Promise.all(announcements.map((start) => start())).then(() => {}) };
  }

  /** At a scheduler's start: what this host spooled while the database was away, with its real
   * results, then the fires left open by a process that died (SIGKILL), once each. Said in the
   * log; a failure to do either is said and the scheduler goes on. */
  async recordLeftovers(project: Project): Promise<void> {
    try {
      // spooled fires first: reconcile would call them interrupted
      if (this.o.store.flushSpool) {
        const f = await this.o.store.flushSpool(this.o.warn);
        if (f.recorded > 0)
          this.o.warn(`recorded ${f.recorded} spooled fire${f.recorded === 1 ? '' : 's'} of this host`);
      }
      const { closed } = await this.reconcile(project);
      if (closed > 0)
        this.o.warn(
          `recorded ${closed} fire${closed === 1 ? '' : 's'} left open by a process that died as failed (interrupted)`,
        );
    } catch (err) {
      this.o.warn(`could not reconcile open fires: ${(err as Error).message}`);
    }
  }

  private tell(id: string, fire: Fire): void {
    try {
      this.observer.fired?.(id, fire);
    } catch {
      // an observer's trouble is never the fire's
    }
  }

  private async write(
    id: string,
    fire: Fire,
    claimed = false,
  ): Promise<{ deferred: Deferred | null; failed: Error | null; refused?: boolean }> {
    // a state folder that cannot be written is looked at again every second at most, so that
    // recording resumes within a second of it being writable (SPEC §4.15)
    const pause = new Backoff(200, 1_000, this.o.clock);
    const other = new Backoff(200, 30_000, this.o.clock);
    // one key for every attempt, and each attempt after the first sent "again": a first try
    // that committed although its answer was lost is then not stored a second time
    const keyed = withKey(fire);
    const me = Symbol(id);
    const settled = (): void => {
      if (!this.failing.delete(me) || this.failing.size > 0) return;
      this.o.stateTrouble?.(null);
    };
    for (let attempt = 1; ; attempt++) {
      const opts = {
        ...(attempt > 1 ? { again: true } : {}),
        ...(claimed && this.o.store.sharedTicks ? { claimer: this.claimant.claimer } : {}),
      };
      try {
        const answer = await this.o.store.recordFire(id, keyed, this.o.warn, opts);
        // (NotRecorded: another record of the fire stands, said by the store)
        const deferred = answer && 'spooledTo' in answer ? answer : null;
        if (deferred) {
          const then = this.flushing
            ? 'recorded when the database is back'
            : 'the next scheduler or routine command on this host records it';
          this.o.warn(`could not record ${id} now (${deferred.why}); spooled to ${deferred.spooledTo}: ${then}`);
          this.flusher?.kick();
        }
        settled();
        return { deferred, failed: null, ...(answer && 'notRecorded' in answer ? { refused: true } : {}) };
      } catch (err) {
        // A state folder that cannot be written (full, read-only) is waited out by the scheduler
        // as long as it runs (SPEC §4.15), and said once; other errors a few times. Then the open
        // marker stays, and reconcile records the fire as interrupted.
        const storage = isStorageError(err);
        if (storage && !this.failing.has(me)) {
          this.failing.add(me);
          if (this.failing.size === 1) this.o.stateTrouble?.(err);
        }
        const waitOut = storage && this.o.waitOutStorage === true;
        if ((!waitOut && attempt >= RECORD_ATTEMPTS) || this.halted.signal.aborted) {
          settled();
          this.o.warn(
            `could not record ${id} (${fire.result}): ${(err as Error).message}; its open marker stays, and the next scheduler or routine command records the fire as interrupted`,
          );
          return { deferred: null, failed: err as Error };
        }
        await (storage ? pause : other).wait(this.halted.signal);
      }
    }
  }

  /** The routine's record as it stands (before a fire is recorded, for its notifications). */
  async current(id: string): Promise<RoutineRecord | undefined> {
    try {
      return await this.o.store.readOne(id, this.o.warn);
    } catch {
      return undefined;
    }
  }

  /** Whether the routine is paused (read each time: honoured without a restart). */
  async paused(id: string): Promise<{ paused: boolean; note: string | null }> {
    const record = await this.o.store.readOne(id, this.o.warn);
    return { paused: record?.paused === true, note: record?.paused_note ?? null };
  }
}

/** Whether `open` is the fire whose lock was taken over from its holder `from` (the same process,
 * the same run): that holder was judged dead or stalled past its TTL, so the fire's outcome is
 * lost, on whatever host it ran (a stalled one that wakes finds its lock lost, and its late
 * record of the same fire counts for nothing: the first record of a fire stands). The marker of
 * an exec action's fire names no run (its run is made once the lock is held): it is that
 * process's open fire of the routine the holder's record names (a process fires a routine once
 * at a time). */
export function lostWithLock(
  from: LockRecord | null,
  owner: OpenFire['owner'],
  open: OpenFire,
  routineId: string,
): boolean {
  const o = from?.owner;
  if (!o || owner.host !== o.host || owner.pid !== o.pid) return false;
  if (open.run_id === null) return !!o.routine && o.routine === routineId && owner.start_time === o.start_time;
  return !!o.run_id && open.run_id === o.run_id;
}

/** Whether a routine has somewhere to announce its fires (its own notify, or the project's). */
export function notifies(def: { notify?: unknown }, project: Project): boolean {
  return def.notify !== false && (def.notify !== undefined || project.config.notify !== null);
}
