// Runs the ticks the loop hands it (SPEC §6, §10): per tick of a routine — the claim, a skip when
// its previous run still goes, the pause flag, jitter, its turn at the exec lock (turns.ts), the
// fire, retries with back-off, the record (recorder.ts) and its notifications. A fire starts only
// while this scheduler still holds its scheduler lock.
// (Over 300 lines: one tick's life, step by step; each step is small, their order is the point.)

import { setMaxListeners } from 'node:events';
import { anySignal, type Clock } from '../clock.js';
import type { Project } from '../config/load.js';
import { MAX_TIMER_SECONDS, type RoutineDef } from '../config/types.js';
import type { LockRecord } from '../lock/record.js';
import type { Fire, RoutineRecord } from '../state/routine-state.js';
import type { FireResult, Trigger } from '../fire/firing.js';
import { holderText, holdersText, type Logger } from '../fire/log.js';
import type { Recorder } from '../fire/recorder.js';
import { claimKey, type OrphanClaim } from '../state/store.js';
import { nextFire } from './timing.js';
import { ClaimTakenError, DatabaseError, DatabaseRowError, FolderReplacedError, isStorageError } from '../errors.js';
import { Backoff } from '../backoff.js';
import { causeOf, NotStartedError } from '../fire/unstarted.js';
import { stoppedByHand } from '../fire/stop-request.js';
import { TurnGate, type TurnOutcome } from './turn-gate.js';
import { busyReason, slotsOf } from '../lock/named.js';
import type { LineTicket, WaitLine } from '../lock/line.js';
import type { PhaseRecorder } from '../state/phases.js';
import { MAX_DEFAULT_WAIT_MS, PREVIOUS_RUN, type Entry, type FireFn } from '../fire/fire-request.js';

export interface RunnerOptions {
  fire: FireFn;
  log: Logger;
  clock: Clock;
  random: () => number;
  recorder: Recorder;
  /** The config in force. */
  project: () => Project;
  /** Whether this scheduler still holds its scheduler lock (checked before every start). */
  inCharge: () => boolean;
  /** Not in charge: whether another scheduler took the lock (scheduler.ts). */
  takenOver: () => Promise<boolean>;
  /** Several schedulers share the ticks (a database backend). */
  sharedTicks: boolean;
  /** Whether a lock holder is a fire of this scheduler (then a busy lock means "wait your turn"). */
  ownHolder: (holder: LockRecord) => boolean;
  /** Told when a fire could not start because the state cannot be written (the error), and when
   * one started again (null): SPEC §4.15, the scheduler holds its fires meanwhile. */
  stateTrouble?: (err: unknown) => void;
  /** Whether the state is known not to be writable now (nothing is recorded meanwhile). */
  stateBroken?: () => boolean;
  /** Where the phases of fires before they run are written (delayed, queued, waiting). */
  phases?: PhaseRecorder;
  /** The waiting lines of the locks (lock/line.ts): a queued tick takes its place there. */
  line?: WaitLine;
  /** Claims not started yet at most (default CLAIMS_AHEAD). */
  claimsAhead?: number;
  /** A claim went through after claims had failed (the database is back): the scheduler's
   * catchUp runs (a scheduler that was cut off fires the latest time it missed, SPEC §6). */
  claimsBack?: () => void;
}

/** With a shared database, claims this scheduler made whose fire has not started yet, at most:
 * claims are taken no faster than they are started, so the other schedulers take the rest of
 * a busy second and a scheduler killed just after a tick leaves few claims to take over. */
export const CLAIMS_AHEAD = 1024;

interface Active {
  stop: AbortController;
  /** Waiting out its jitter: not started, so shutdown cancels it. */
  jitter: boolean;
  /** Its scheduled fire (not a retry) waits in the queue: its next tick supersedes it. */
  queuedTick: boolean;
  /** Nothing of it runs now: it waits for its lock, or out a retry's back-off (shutdown ends
   * both at once: no running routine to wait for). */
  idle?: boolean;
  /** Its fire started, or it waits in a queue or for its lock: room for another claim. */
  started: () => void;
  /** A reload removed or disabled its routine while it waited (set even if a later reload put
   * it back: that tick was dropped then). */
  dropped?: string;
  /** Ends the wait under way (its jitter, a retry's back-off) early: the tick was dropped, so the
   * views stop showing it held back at once, not when the wait would have ended. */
  wake?: AbortController;
}

/** One fire of a tick in this scheduler's turn: what it fires, for which time, under which
 * config, and as which attempt. */
interface FireTurn {
  entry: Entry;
  scheduledAt: Date;
  project: Project;
  active: Active;
  trigger: Trigger;
  /** With retries: the attempt's number (1 for the first). */
  attempt: number | undefined;
}

export class Runner {
  /** One queue per lock (SPEC §4.16): routines on one lock take turns, on different locks they
   * run side by side; a lock of N slots lets N of its routines hold it at once. */
  private readonly gates = new Map<string, TurnGate>();
  private readonly active = new Map<string, Active>();
  /** Every tick and delivery in flight, for shutdown. */
  private readonly inFlight = new Set<Promise<void>>();
  private stopping = false;
  /** Aborted when shutdown begins: cuts every jitter and back-off wait short. */
  private readonly halt = new AbortController();
  /** Aborted when shutdown gives up waiting: cuts notification deliveries short. */
  private readonly notifyStop = new AbortController();
  /** The ticks whose claim this scheduler asked for or holds and still works on (routine and
   * time): its sweep leaves these alone (scheduler/claims.ts). */
  private readonly claims = new Set<string>();
  /** Claims made and not started yet (CLAIMS_AHEAD), and the claims waiting for room. */
  private unstarted = 0;
  private readonly claimRoom: (() => void)[] = [];
  /** Claims failed (the database did not answer) since the last one that went through. */
  private claimsFailing = false;

  constructor(private readonly o: RunnerOptions) {
    // every fire in flight listens to it while it may wait for its lock (any number at once)
    // (and every delivery under way listens to notifyStop: 20 routines failing at once are 20
    // listeners, no leak — Node's warning at 11 would be a line outside the log format)
    setMaxListeners(0, this.halt.signal, this.notifyStop.signal);
  }

  get haltSignal(): AbortSignal {
    return this.halt.signal;
  }

  /** Routines with a fire started or about to start (not those only queued or jittering). */
  get runningCount(): number {
    let n = 0;
    for (const [id, a] of this.active)
      if (!a.jitter && !a.idle && ![...this.gates.values()].some((g) => g.isQueued(id))) n++;
    return n;
  }

  /** A reload: every lock's queue takes the slots the config has now, at once (a queued tick
   * takes a slot added while it waits the moment it is there, docs/lock.md). */
  resizeQueues(): void {
    for (const [lock, g] of this.gates) g.resize(slotsOf(this.o.project().config.locks, lock));
  }

  /** The queue of the lock `def` takes, with the lock's slots as the config has them now. */
  private gate(def: RoutineDef): TurnGate {
    const slots = slotsOf(this.o.project().config.locks, def.lock);
    let g = this.gates.get(def.lock);
    if (!g) this.gates.set(def.lock, (g = new TurnGate(slots)));
    else g.resize(slots);
    return g;
  }

  /** One tick of one routine, tracked until done so that shutdown waits for it. `claimed`: the
   * claim is this scheduler's already (taken over from a claimer that is gone). */
  launch(entry: Entry, scheduledAt: Date, claimed = false): void {
    this.track(
      this.tick(entry, scheduledAt, claimed).catch((err: Error) => {
        // a state folder replaced (or failing) before the fire: held like any fire it could not
        // record, said once (SPEC §4.15, §12)
        if (err instanceof FolderReplacedError || isStorageError(err)) this.o.stateTrouble?.(err);
        else this.warn(`${entry.def.id}: ${err.message}`);
      }),
    );
  }

  /** A scheduled time the loop slept through: claimed (with a shared database, a time another
   * scheduler took stays its), then recorded as a skip with `reason`. Not by a scheduler that
   * slept past its lock's TTL and woke with the lock another's: the times it slept through are
   * that one's to record then, not its own (SPEC §4.10); with a lease that only lapsed (nobody
   * took the lock) they are still its own (SPEC §6: nothing lost without a record). */
  missed(entry: Entry, scheduledAt: Date, reason: string): void {
    const { def } = entry;
    this.track(
      (async () => {
        if (this.o.stateBroken?.() || this.stopping || (!this.o.inCharge() && (await this.o.takenOver()))) return;
        const key = claimKey(def.id, scheduledAt);
        this.claims.add(key);
        try {
          if (!(await this.claimOnce(def.id, scheduledAt))) return;
          if (!this.o.inCharge() && (await this.o.takenOver())) return;
          // paused: no fire is due, late or not, so none was missed (as a tick, settled unrecorded)
          if (await this.pausedBeforeFire(def, scheduledAt)) return this.settleUnfired(def, scheduledAt);
          await this.skip(def, this.skipFire(scheduledAt, reason), null);
        } finally {
          this.claims.delete(key);
        }
      })().catch((err: Error) => {
        if (err instanceof FolderReplacedError || isStorageError(err)) this.o.stateTrouble?.(err);
        else this.warn(`${def.id}: ${err.message}`);
      }),
    );
  }

  /** Stop firing; let running routines finish up to `timeoutMs`; then stop them. */
  async shutdown(timeoutMs: number): Promise<void> {
    this.stopping = true;
    // (counted before the queues are emptied: a tick taken out of its queue is no running one)
    const running = this.runningCount;
    this.halt.abort();
    for (const room of this.claimRoom.splice(0)) room();
    // queued ticks never started: they are dropped, not fired
    for (const g of this.gates.values()) g.cancelAll();
    this.o.log({ event: 'scheduler.stopping', running });
    if (this.inFlight.size === 0) return;
    const timeout = new AbortController();
    // everything in flight, and what it starts meanwhile: a fire that ends records itself and
    // starts its announcement then (a snapshot of the set let those be cut short at once)
    const all = (async () => {
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    })().then(() => timeout.abort());
    await this.o.clock.sleep(timeoutMs, timeout.signal);
    for (const a of this.active.values()) a.stop.abort();
    this.notifyStop.abort();
    await all;
  }

  private warn = (message: string): void => this.o.log({ event: 'scheduler.warning', message });

  /** A fire took its lock over from a holder judged stale: that holder's open fires (a
   * `routine run` killed with SIGKILL) are recorded as interrupted now, not at the next start
   * (SPEC §6: the next command that takes the lock reconciles them). */
  private recordLeftBehind(project: Project, from: LockRecord | null): void {
    this.track(
      this.o.recorder.reconcile(project, this.notifyStop.signal, from).then(
        ({ closed, announced }) => {
          this.track(announced);
          if (closed > 0)
            this.warn(
              `recorded ${closed} fire${closed === 1 ? '' : 's'} left open by a process that died as failed (interrupted)`,
            );
        },
        (err: Error) => this.warn(`could not reconcile open fires: ${err.message}`),
      ),
    );
  }

  private track(p: Promise<void>): void {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  /** Whether this scheduler works on the tick (claiming it, or holding its claim). */
  holdsClaim(id: string, scheduledAt: Date): boolean {
    return this.claims.has(claimKey(id, scheduledAt));
  }

  /** Takes over a claim nobody works on (scheduler/claims.ts) and fires it late, or — when the
   * routine's next tick is too near — records it as a skip with `reason` (which settles it). The
   * tick is this runner's from before the take-over until it is fired or recorded, so that no
   * other way to the same tick here (a catch-up, a claim sent again) claims it meanwhile: a claim
   * of this claimer's that is not settled answers yes to it. Returns whether it took it and
   * whether it fires it; null when it did not take it. */
  async adopt(
    entry: Entry,
    claim: OrphanClaim,
    reason: string,
    taken: (fires: boolean) => void,
  ): Promise<{ fires: boolean } | null> {
    const key = claimKey(claim.routine, claim.scheduledAt);
    if (this.claims.has(key) || this.stopping) return null;
    this.claims.add(key);
    let handed = false;
    try {
      if (!(await this.o.recorder.takeOver(claim))) return null;
      const fires = this.untilNextTick(entry, claim.scheduledAt) > 0;
      taken(fires);
      if (fires) {
        // handed to the tick in the same turn: it takes the key as it starts
        this.claims.delete(key);
        handed = true;
        this.launch(entry, claim.scheduledAt, true);
        return { fires: true };
      }
      await this.skip(entry.def, this.skipFire(claim.scheduledAt, reason), null);
      return { fires: false };
    } finally {
      if (!handed) this.claims.delete(key);
    }
  }

  private async tick(entry: Entry, scheduledAt: Date, claimed = false): Promise<void> {
    const key = claimKey(entry.def.id, scheduledAt);
    // that tick in flight here already (a catch-up of the time a claim retry fires): once
    if (this.claims.has(key)) return;
    // known before the claim is sent: the sweep never takes a claim of ours in flight for lost
    this.claims.add(key);
    let room = false;
    try {
      room = this.o.sharedTicks && !claimed ? await this.claimRoomTaken() : false;
      // stopping while it waited for room: never claimed, so nothing to record
      if (room && this.stopping) return;
      await this.claimedTick(entry, scheduledAt, claimed, () => {
        if (!room) return;
        room = false;
        this.releaseClaimRoom();
      });
    } finally {
      this.claims.delete(key);
      if (room) this.releaseClaimRoom();
    }
  }

  /** Room for one more claim not started yet (CLAIMS_AHEAD); true once taken. */
  private async claimRoomTaken(): Promise<boolean> {
    while (this.unstarted >= (this.o.claimsAhead ?? CLAIMS_AHEAD) && !this.stopping)
      await new Promise<void>((resolve) => this.claimRoom.push(resolve));
    this.unstarted++;
    return true;
  }

  private releaseClaimRoom(): void {
    this.unstarted--;
    this.claimRoom.shift()?.();
  }

  /** One claim, and what a claim that went through after failures means: the database is back. */
  private async claimOnce(id: string, scheduledAt: Date, again = false): Promise<boolean> {
    const ok = await this.o.recorder.claim(id, scheduledAt, again);
    this.databaseAnswered();
    return ok;
  }

  /** The database answered (a claim, or the claims sweep between ticks): after claims failed,
   * said once, and the scheduler's catchUp runs. */
  databaseAnswered(): void {
    if (!this.claimsFailing) return;
    this.claimsFailing = false;
    this.o.log({ event: 'scheduler.warning', message: 'claims go through again (the database answers)' });
    this.o.claimsBack?.();
  }

  /** The claim of a tick, sent again while the database does not answer, until shortly before
   * the routine's next tick (SPEC §9): on every scheduler, so the tick fires late, once (a claim
   * that committed although its answer was lost is recognised as this claimer's). Given up, a
   * claim that committed all the same is this scheduler's unsettled one: its sweep records it. */
  private async claimUntilNextTick(entry: Entry, scheduledAt: Date): Promise<boolean> {
    const id = entry.def.id;
    const pause = new Backoff(100, 1_000, this.o.clock);
    for (let again = false; ; again = true) {
      try {
        return await this.claimOnce(id, scheduledAt, again);
      } catch (err) {
        // the database did not answer, or chose this claim as a deadlock's victim: sent again
        const deadlock = (err as { code?: unknown }).code === '40P01';
        if (!deadlock && (!(err instanceof DatabaseError) || err instanceof DatabaseRowError)) throw err;
        if (!this.claimsFailing) {
          this.claimsFailing = true;
          this.warn(
            `claims fail (${(err as Error).message}): each tick's claim is sent again until the routine's next tick`,
          );
        }
        if (this.stopping || pause.pendingMs >= this.untilNextTick(entry, scheduledAt)) {
          throw new DatabaseError(
            `the tick of ${scheduledAt.toISOString()} was not fired: its claim went unanswered until the routine's next tick (${(err as Error).message})`,
          );
        }
        await pause.wait(this.halt.signal);
      }
    }
  }

  private async claimedTick(entry: Entry, scheduledAt: Date, claimed: boolean, started: () => void): Promise<void> {
    const { def } = entry;
    const id = def.id;
    // Held while the state cannot take records (a full disk: said once, /healthz 503): not
    // claimed, fired or recorded — also when its previous fire ended and waits for its record,
    // which is not a "previous run still running" (SPEC §4.15).
    if (this.o.stateBroken?.()) return;
    // Several schedulers may share a database: exactly one of them takes each scheduled time,
    // and the others stay silent about it (it is not a skip).
    if (!claimed && !(await this.claimUntilNextTick(entry, scheduledAt))) return;
    if (this.stopping) return this.abandon(def, scheduledAt);
    // Still waiting for its turn when its own next tick comes: that waiting tick is skipped
    // (busy), and this one takes its place, so the queue never grows. (A queued retry is a run
    // still going, as while it waits out its back-off.)
    const prev = this.active.get(id);
    if (prev?.queuedTick && [...this.gates.values()].some((g) => g.supersede(id))) this.active.delete(id);
    if (this.active.has(id)) {
      // paused meanwhile: no fire is due, so none is skipped (settled unrecorded, as any tick of
      // a paused routine); the fire under way goes on. (A flag that cannot be read now: the skip
      // below, as before — no failure for a tick that met its own fire still running.)
      if (await this.isPaused(id).catch(() => false)) return this.settleUnfired(def, scheduledAt);
      // The previous fire is still going (its jitter, the lock, its retries): a busy skip.
      await this.skip(def, this.skipFire(scheduledAt, PREVIOUS_RUN), null);
      return;
    }
    const active: Active = { stop: new AbortController(), jitter: false, queuedTick: false, started };
    this.active.set(id, active);
    try {
      await this.run(entry, scheduledAt, active);
    } finally {
      if (this.active.get(id) === active) this.active.delete(id);
    }
  }

  private async run(entry: Entry, scheduledAt: Date, active: Active): Promise<void> {
    const { def } = entry;
    const project = this.o.project();
    if (await this.pausedBeforeFire(def, scheduledAt)) return this.settleUnfired(def, scheduledAt);
    if (def.jitterSeconds > 0) {
      // waiting out its jitter: room for another claim meanwhile
      active.started();
      active.jitter = true;
      const delayMs = this.o.random() * def.jitterSeconds * 1000;
      // every view shows it held back, and until when (never guessed: the board says so)
      this.o.phases?.delayed(def.id, scheduledAt, this.o.clock.now() + delayMs, { why: 'jitter' });
      await this.sleepUnless(delayMs, active.stop.signal, active);
      this.o.phases?.clear(def.id, scheduledAt);
      active.jitter = false;
      if (active.stop.signal.aborted || this.stopping || this.droppedByReload(def, scheduledAt, 'its jitter', active))
        return this.abandon(def, scheduledAt);
      if (await this.pausedBeforeFire(def, scheduledAt)) return this.settleUnfired(def, scheduledAt);
    }
    const retry = def.retry;
    /** A failure whose announcement waits for its retries. */
    let pending: { prior: RoutineRecord | undefined; fire: FireResult } | null = null;
    try {
      for (let attempt = 1; ; attempt++) {
        // a tick claimed and then stopped before its first fire is still recorded, as any tick
        // this scheduler will not fire (never lost without a record, SPEC §9)
        if (active.stop.signal.aborted || this.stopping)
          return attempt === 1 ? this.abandon(def, scheduledAt) : undefined;
        const trigger: Trigger = attempt === 1 ? 'schedule' : 'retry';
        const turn: FireTurn = { entry, scheduledAt, project, active, trigger, attempt: retry ? attempt : undefined };
        const result = await this.inTurn(turn);
        if (result === 'superseded') {
          // a tick of a routine a reload dropped while it waited is not recorded (its claim is
          // settled, so that no sweep records it either)
          if (active.dropped) await this.settleUnfired(def, scheduledAt);
          else await this.skip(def, this.skipFire(scheduledAt, busyReason(def.lock)), this.gate(def).activeId());
          return;
        }
        // not started: shutdown, or this scheduler lost its lock (or paused while queued)
        if (result === null) return attempt === 1 ? this.abandon(def, scheduledAt) : undefined;
        this.logResult(def.id, result);
        // Skips are never retried; a failure is, while attempts remain — not one stopped by hand
        const again =
          retry !== undefined &&
          result.result === 'failure' &&
          !stoppedByHand(result.reason) &&
          attempt <= retry.attempts &&
          !this.stopping &&
          !active.stop.signal.aborted &&
          // a reload removed or disabled it while it ran: run to its end, not retried (said once)
          active.dropped === undefined;
        const recorded: FireResult = { ...result, trigger, ...(retry ? { attempt } : {}) };
        if (result.result === 'skipped' && pending) {
          // a retry that met a busy lock ends the retries: the failure is final after all
          this.announce(def, pending.prior, pending.fire, project);
          pending = null;
        }
        const r = await this.o.recorder.record(def, project, recorded, {
          final: !again,
          signal: this.notifyStop.signal,
          claimed: true,
        });
        this.track(r.announced);
        // (a failure the store refused is another's record: never announced here, not even later)
        pending = again && !r.refused ? { prior: r.prior, fire: recorded } : null;
        if (!again) return;
        // S, 2S, 4S… and up to a fifth more, so that routines failing together spread out; at
        // most the longest wait a config may name (a longer one overflows Node's timer, which
        // then fires at once: 3600 s doubled nine times is 21 days, a fifth more is past it)
        const delayMs = Math.min(
          MAX_TIMER_SECONDS * 1000,
          retry!.backoffSeconds * 1000 * 2 ** (attempt - 1) * (1 + 0.2 * this.o.random()),
        );
        this.o.log({
          event: 'routine.retrying',
          routine: def.id,
          attempt: attempt + 1,
          of: retry!.attempts + 1,
          in_ms: Math.round(delayMs),
        });
        active.idle = true;
        this.o.phases?.delayed(def.id, scheduledAt, this.o.clock.now() + delayMs, {
          why: 'retry',
          attempt: attempt + 1,
          of: retry!.attempts + 1,
        });
        await this.sleepUnless(delayMs, active.stop.signal, active);
        this.o.phases?.clear(def.id, scheduledAt);
        active.idle = false;
        if (active.stop.signal.aborted || this.stopping) return;
        if (this.droppedByReload(def, scheduledAt, 'its retry', active) || (await this.isPaused(def.id))) return;
      }
    } finally {
      // retries cut short (shutdown, pause): the last failure stands, and is announced
      if (pending) this.announce(def, pending.prior, pending.fire, project);
    }
  }

  /** One fire in this scheduler's turn at its lock (exclusive routines) or at once. */
  private async inTurn(t: FireTurn): Promise<FireResult | null | 'superseded'> {
    const { def } = t.entry;
    const { active, trigger } = t;
    if (!def.exclusive) return this.fireOnce(t);
    const id = def.id;
    const turns = this.gate(def);
    // While it waits in the queue, its own next tick supersedes it (a retry is not superseded).
    const waited = async (turn: Promise<TurnOutcome>): Promise<TurnOutcome> => {
      active.queuedTick = trigger !== 'retry';
      const outcome = await turn;
      active.queuedTick = false;
      if (outcome === 'cancelled') turns.leave(id);
      return outcome;
    };
    // Queued, it takes its place in the lock's line across processes (lock/line.ts): a manual
    // waiter that came later waits behind it, one that came earlier goes first.
    let line: Promise<LineTicket | null> | null = null;
    const joinLine = (): void => {
      line ??= this.o.line
        ? this.o.line
            .join(def.lock, { command: 'routine', routine: id, ...(trigger !== 'manual' ? { scheduled: true } : {}) })
            .catch(() => null)
        : null;
    };
    try {
      return await this.takeTurns(t, waited, joinLine, () => line);
    } catch (err) {
      // whatever failed, its turn is given back: a turn kept by a fire that is over would
      // queue every later tick of the lock behind it, for good
      turns.leave(id);
      throw err;
    } finally {
      await (await (line as Promise<LineTicket | null> | null))?.leave();
    }
  }

  private async takeTurns(
    t: FireTurn,
    waited: (turn: Promise<TurnOutcome>) => Promise<TurnOutcome>,
    joinLine: () => void,
    line: () => Promise<LineTicket | null> | null,
  ): Promise<FireResult | null | 'superseded'> {
    const { entry, scheduledAt, active } = t;
    const { def } = entry;
    const id = def.id;
    const signal = active.stop.signal;
    const turns = this.gate(def);
    let queued = false;
    let outcome = await waited(
      turns.take({ id, scheduledAt: scheduledAt.getTime(), order: entry.order, ifBusy: def.ifBusy }, (behind) => {
        // (told again when the turn passes on while it waits: the board names the one now)
        if (queued) return this.o.phases?.behind(id, scheduledAt, behind);
        queued = true;
        active.started();
        joinLine();
        // the board first: a view asked on seeing the log line shows it
        this.o.phases?.queued(id, scheduledAt, behind);
        this.o.log({ event: 'routine.queued', routine: id, behind });
      }),
    );
    if (queued) this.o.phases?.clear(id, scheduledAt);
    if (outcome === 'start' && queued) {
      const stop = await this.stillWanted(t, turns);
      if (stop !== 'go') return stop;
    }
    while (outcome === 'start') {
      const ticket = await line();
      let r = await this.fireOnce(t, undefined, ticket);
      const busy =
        r !== null && r.result === 'skipped' && r.reason === busyReason(def.lock) && (!!r.holder || !!r.ahead);
      const metOwn = busy && !!r!.holder && this.o.ownHolder(r!.holder);
      // Held for a tick of another scheduler of this project (a shared database): the same
      // queue, so it waits for its turn — until its own next tick — instead of skipping
      // (SPEC §6: adding a standby scheduler never turns a run into a skip).
      if (
        busy &&
        !metOwn &&
        (r!.holder?.owner.scheduled === true || r!.ahead?.scheduled === true) &&
        def.ifBusy === 'skip' &&
        !signal.aborted &&
        !this.stopping
      ) {
        r = await this.fireOnce(t, { ifBusy: 'wait', waitTimeoutMs: this.untilNextTick(entry, scheduledAt) }, ticket);
      }
      // the lock was taken by a fire of ours a moment earlier: back in the queue, no skip
      const again = turns.done(id, metOwn);
      if (!again) return r;
      joinLine();
      outcome = await waited(again);
      // (a turn given back at once — the queue and the lock disagree on its slots — is not
      // taken again in the same moment: never a loop that starves the heartbeat; real time, as
      // the heartbeat's timers are)
      if (outcome === 'start') await new Promise((r) => setTimeout(r, 50));
      // back in the queue, it waited again: the same look as after its first wait
      if (outcome === 'start') {
        const stop = await this.stillWanted(t, turns);
        if (stop !== 'go') return stop;
      }
    }
    return outcome === 'superseded' ? 'superseded' : null;
  }

  /** After a wait for its turn: whether the tick still fires (`go`), or what it ends with — a
   * reload removed or disabled its routine, or it was paused, meanwhile (its turn given back). */
  private async stillWanted(t: FireTurn, turns: TurnGate): Promise<FireResult | null | 'go'> {
    const { entry, scheduledAt, active } = t;
    const { def } = entry;
    const id = def.id;
    const signal = active.stop.signal;
    if (this.droppedByReload(def, scheduledAt, 'its turn', active)) {
      turns.leave(id);
      return null;
    }
    let paused: boolean;
    try {
      paused = this.stopping || signal.aborted || (await this.isPaused(id));
    } catch (err) {
      // the state could not be read (the database restarting): not fired, and said so as a
      // fire that could not start (routine list --check shows it)
      turns.leave(id);
      return this.unstartedFire(scheduledAt, `could not read whether it is paused: ${(err as Error).message}`);
    }
    if (!paused) return 'go';
    turns.leave(id);
    if (!this.stopping && !signal.aborted)
      this.warn(
        `${id}: its tick of ${scheduledAt.toISOString()} is not fired: the routine was paused while it waited for its turn`,
      );
    return null;
  }

  /** One fire of the routine, never throwing: a fire that could not even start is a failure.
   * `busy`: what it does when its lock is held (default: the routine's ifBusy). */
  private async fireOnce(
    t: FireTurn,
    busy?: { ifBusy: 'wait'; waitTimeoutMs: number },
    ticket?: LineTicket | null,
  ): Promise<FireResult | null> {
    const { entry, scheduledAt, trigger, attempt } = t;
    // the config as it is now, not as it was at the tick: a tick that waited for its turn through
    // a reload (its routine unchanged, or it was dropped) takes its lock with the slots the queue
    // now counts; with the tick's, the queue started it on a slot the lock did not have, it met
    // its own holder, went back in the queue and was started again at once, without end
    const project = this.o.project();
    const signal = t.active.stop.signal;
    const { def } = entry;
    const id = def.id;
    // A scheduler that lost its lock (paused past its TTL while another took over) starts
    // nothing (SPEC §6), nor one whose state cannot take records now (SPEC §4.15: held, said once).
    if (this.stopping || !this.o.inCharge() || this.o.stateBroken?.()) return null;
    // a tick that still waits for its lock when the scheduler stops is not started (SPEC §6);
    // linked by hand and unlinked after (AbortSignal.any would stay on the halt signal for the
    // scheduler's life, one per fire)
    const wait = anySignal(signal, this.halt.signal);
    try {
      return await this.o.fire(def, scheduledAt, {
        project,
        signal,
        waitSignal: wait.signal,
        trigger,
        attempt,
        ticket: ticket ?? null,
        ...(this.o.sharedTicks && trigger !== 'manual' ? { claimer: this.o.recorder.claimant.claimer } : {}),
        ...(this.o.sharedTicks ? { scheduler: this.o.recorder.claimant.claimer } : {}),
        ...(busy ?? {
          ifBusy: def.ifBusy,
          waitTimeoutMs: def.ifBusy === 'wait' ? this.waitTimeoutMs(entry, scheduledAt) : undefined,
        }),
        // (and not a tick of a routine a reload removed or disabled while it waited for its lock:
        // dropped as one that waited for its turn is, said once)
        mayStart: () =>
          this.o.inCharge() &&
          !this.stopping &&
          (trigger === 'manual' || !this.droppedByReload(def, scheduledAt, 'its lock', t.active)),
        onTookOver: (from) => this.recordLeftBehind(project, from),
        onStarted: () => {
          const a = this.active.get(id);
          a?.started();
          if (a) a.idle = false;
          this.o.stateTrouble?.(null);
          this.o.phases?.clear(id, scheduledAt); // running: its open marker says so from here
          this.gate(def).locked(id);
          this.o.log({ event: 'routine.started', routine: id, scheduled_at: scheduledAt.toISOString() });
        },
        onWait: (why, holder, holders) => {
          const a = this.active.get(id);
          a?.started();
          if (a) a.idle = true;
          const held = holders ? holdersText(holders) : holder ? holderText(holder) : why;
          this.o.phases?.waiting(id, scheduledAt, def.lock, held);
          this.o.log({ event: 'routine.waiting', routine: id, lock: def.lock, holder: held });
          this.gate(def).waiting(id);
        },
      });
    } catch (thrown) {
      // a start that failed may have left its open marker: its record closes it (unstarted.ts)
      const closes = thrown instanceof NotStartedError ? thrown.markerId : null;
      const err = causeOf(thrown);
      // Its claim was taken over (this scheduler was judged gone): the one that took it fires
      // or records the tick, this one neither (SPEC §9).
      if (err instanceof ClaimTakenError) {
        this.warn(`${id}: ${err.message}`);
        return null;
      }
      // The state folder cannot be written (full, out of inodes, read-only, failing): nothing
      // ran, and nothing can be recorded; the scheduler holds its fires until it can (SPEC §4.15).
      if (isStorageError(err) || err instanceof FolderReplacedError) {
        this.o.stateTrouble?.(err);
        return null;
      }
      // Nothing ran (its log may not be written, the start could not be recorded): a failure
      // all the same, so that `routine list --check` shows it.
      return { ...this.unstartedFire(scheduledAt, (err as Error).message), ...(closes ? { closes } : {}) };
    } finally {
      wait.unlink();
      // it waited and gave up, or ran: no longer waiting
      this.o.phases?.clear(id, scheduledAt);
    }
  }

  /** A fire that could not start: a failure all the same (`routine list --check` shows it). */
  private unstartedFire(scheduledAt: Date, why: string): FireResult {
    return { ...this.noRun(scheduledAt, 'failure', `not started: ${why}`), unstarted: true };
  }

  /** A fire that did no work: started and finished now, no exit code, no run. */
  private noRun(scheduledAt: Date, result: 'failure' | 'skipped', reason: string): Fire {
    const at = new Date(this.o.clock.now()).toISOString();
    return {
      result,
      reason,
      scheduled_at: scheduledAt.toISOString(),
      started_at: at,
      finished_at: at,
      duration_ms: 0,
      exit_code: null,
      run_id: null,
    };
  }

  /** A tick this scheduler claimed but will not fire (it stops, or lost its lock before the
   * fire started): recorded as skipped with the reason (SPEC §6), since no other scheduler fires
   * a tick that was claimed. A scheduler that lost its lock to another on a file backend
   * records nothing: the one in charge now follows the routine's catchUp. Paused: nothing. */
  private async abandon(def: RoutineDef, scheduledAt: Date): Promise<void> {
    // a lost lock first: a scheduler stopping because it lost its lock is not in charge of the tick
    const reason = !this.o.inCharge() ? 'scheduler lost its lock' : this.stopping ? 'scheduler stopping' : null;
    // held because the state cannot take records: a claim shared with other schedulers is given
    // back, as SPEC §9 has it (a claimed tick is fired, recorded or given back)
    if (reason === null && this.o.sharedTicks && this.o.stateBroken?.())
      return this.o.recorder.giveBack(def.id, scheduledAt);
    if (reason === null) return this.settleUnfired(def, scheduledAt);
    // with files, a lock another scheduler took: its ticks are that one's to record (SPEC §4.10);
    // one that only lapsed (nobody took it) leaves them ours, as the times slept through (missed)
    if (reason === 'scheduler lost its lock' && !this.o.sharedTicks && (await this.o.takenOver())) return;
    try {
      await this.skip(def, this.skipFire(scheduledAt, reason), null);
    } catch (err) {
      this.warn(
        `${def.id}: the tick of ${scheduledAt.toISOString()} was not fired (${reason}) and could not be recorded: ${(err as Error).message}`,
      );
    }
  }

  /** A reload removed or disabled `id`: the tick of it that waits now (its turn, its jitter, a
   * retry's back-off) is dropped, even if another reload puts the routine back before it ends. */
  reloadDropped(id: string, why: string): void {
    const a = this.active.get(id);
    if (!a) return;
    a.dropped ??= why;
    a.wake?.abort();
  }

  /** Whether a tick that waited (its turn, its jitter, a retry's back-off) is dropped because a
   * reload removed or disabled its routine meanwhile: said once in the log; not fired, and — as
   * a paused routine's tick — not recorded (the routine's history is no longer the config's). */
  private droppedByReload(def: RoutineDef, scheduledAt: Date, waitedFor: string, active: Active): boolean {
    const now = this.o.project().config.routines.find((r) => r.id === def.id);
    const why = active.dropped ?? (!now ? 'removed from the config' : !now.enabled ? 'disabled' : null);
    if (why === null) return false;
    this.warn(
      `${def.id}: its tick of ${scheduledAt.toISOString()} is not fired: the routine was ${why} while it waited for ${waitedFor}`,
    );
    return true;
  }

  /** A claimed tick that ends here with no fire and no record (paused): its claim is settled, so
   * that no sweep records it (with a shared database). */
  private async settleUnfired(def: RoutineDef, scheduledAt: Date): Promise<void> {
    if (this.o.sharedTicks) await this.o.recorder.settle(def.id, scheduledAt);
  }

  private skipFire(scheduledAt: Date, reason: string): Fire {
    return { ...this.noRun(scheduledAt, 'skipped', reason), trigger: 'schedule' };
  }

  /** A tick that did not run: logged, recorded, counted, announced (starvation only). */
  private async skip(def: RoutineDef, fire: Fire, behind: string | null): Promise<void> {
    this.o.log({
      event: 'routine.skipped',
      routine: def.id,
      reason: fire.reason!,
      ...(behind ? { holder: `routine ${behind}` } : {}),
    });
    // held ticks of a state folder that cannot be written are not recorded (they would pile up)
    if (this.o.stateBroken?.()) return;
    const r = await this.o.recorder.record(def, this.o.project(), fire, {
      signal: this.notifyStop.signal,
      claimed: true,
    });
    this.track(r.announced);
  }

  /** `waitTimeoutSeconds`, or by default until shortly before the routine's next tick (at most
   * an hour): a wait never runs into the routine's next tick, which gets its own (SPEC §6). */
  private waitTimeoutMs(entry: Entry, scheduledAt: Date): number {
    if (entry.def.waitTimeoutSeconds !== undefined) return entry.def.waitTimeoutSeconds * 1000;
    return this.untilNextTick(entry, scheduledAt);
  }

  /** From now to a margin before the routine's next tick after `scheduledAt` (a tenth of its
   * interval, at most a second: a margin, not a race with that tick), at most an hour. */
  private untilNextTick(entry: Entry, scheduledAt: Date): number {
    const next = nextFire(entry.schedule, scheduledAt.getTime());
    if (next === null) return MAX_DEFAULT_WAIT_MS;
    const margin = Math.min(1000, (next - scheduledAt.getTime()) / 10);
    return Math.max(0, Math.min(MAX_DEFAULT_WAIT_MS, next - margin - this.o.clock.now()));
  }

  private readonly pausedSeen = new Map<string, boolean>();

  /** Before a tick's first fire: whether it is paused, or (when the pause flag could not be
   * read: the database did not answer) ended as a fire that could not start, recorded as
   * fireOnce records one — a claimed tick is never lost without a record (SPEC §9). True when
   * the tick ends here. */
  private async pausedBeforeFire(def: RoutineDef, scheduledAt: Date): Promise<boolean> {
    try {
      return await this.isPaused(def.id);
    } catch (err) {
      if (isStorageError(err) || err instanceof FolderReplacedError) throw err;
      const fire = this.unstartedFire(scheduledAt, `could not read whether it is paused: ${(err as Error).message}`);
      this.logResult(def.id, fire);
      const r = await this.o.recorder.record(def, this.o.project(), fire, {
        signal: this.notifyStop.signal,
        claimed: true,
      });
      this.track(r.announced);
      return true;
    }
  }

  /** Reads the pause flag (honoured without a restart) and logs when it changed. */
  private async isPaused(id: string): Promise<boolean> {
    const { paused, note } = await this.o.recorder.paused(id);
    if (paused !== (this.pausedSeen.get(id) ?? false)) {
      this.pausedSeen.set(id, paused);
      this.o.log(paused ? { event: 'routine.paused', routine: id, note } : { event: 'routine.resumed', routine: id });
    }
    return paused;
  }

  /** The final announcement of a failure whose retries were cut short, in the background
   * (tracked so that shutdown waits for it). */
  private announce(def: RoutineDef, prior: RoutineRecord | undefined, fire: FireResult, project: Project): void {
    this.track(this.o.recorder.announce(def, project, prior, fire, true, this.notifyStop.signal));
  }

  /** Sleeps `ms`, or less once the routine's fire is stopped or the scheduler halts. */
  /** Sleeps `ms` unless `stop` or the halt comes first; with `active`, a reload that drops its
   * tick ends the sleep too (reloadDropped). */
  private async sleepUnless(ms: number, stop: AbortSignal, active?: Active): Promise<void> {
    const wake = active ? (active.wake = new AbortController()) : null;
    const link = wake ? anySignal(stop, this.halt.signal, wake.signal) : anySignal(stop, this.halt.signal);
    try {
      if (!active?.dropped) await this.o.clock.sleep(ms, link.signal);
    } finally {
      link.unlink();
      if (active && active.wake === wake) delete active.wake;
    }
  }

  /** The resources found exhausted at a fire's start (their codes), said once each until
   * commands have started for a minute without one; and when that was last seen. */
  private readonly exhausted = new Set<string>();
  private exhaustedAt = 0;

  private logResult(id: string, r: FireResult): void {
    // out of descriptors, processes or memory: that fire failed (its record says why); the
    // scheduler says it once per cause, carries on, and says when commands start again
    const cause = r.result === 'failure' ? EXHAUSTED.exec(r.reason ?? '')?.[1] : undefined;
    if (cause) {
      this.exhaustedAt = this.o.clock.monotonic();
      if (!this.exhausted.has(cause)) {
        this.exhausted.add(cause);
        this.warn(
          `${RESOURCE[cause]} (${cause}): fires fail to start while it lasts, each recorded as a failure with its cause (first: routine ${id}); the scheduler carries on`,
        );
      }
    } else if (this.exhausted.size > 0 && r.run_id !== null && this.o.clock.monotonic() - this.exhaustedAt > 60_000) {
      this.warn(`commands start again: no fire failed for want of ${[...this.exhausted].join(', ')} for a minute`);
      this.exhausted.clear();
    }
    if (r.result === 'success')
      this.o.log({ event: 'routine.succeeded', routine: id, duration_ms: r.duration_ms, run_id: r.run_id });
    else if (r.result === 'skipped')
      this.o.log({
        event: 'routine.skipped',
        routine: id,
        reason: r.reason ?? 'busy',
        ...(r.holders
          ? { holder: holdersText(r.holders) }
          : r.holder
            ? { holder: holderText(r.holder) }
            : r.ahead
              ? { holder: r.ahead.why }
              : {}),
      });
    else
      this.o.log({
        event: 'routine.failed',
        routine: id,
        reason: r.reason ?? 'failed',
        duration_ms: r.duration_ms,
        run_id: r.run_id,
      });
  }
}

/** A start that failed for want of a resource (exec/process.ts systemMessage names the code). */
const EXHAUSTED = /\((EMFILE|ENFILE|EAGAIN|ENOMEM)\)/;
const RESOURCE: Record<string, string> = {
  EMFILE: 'out of file descriptors',
  ENFILE: 'the system is out of file descriptors',
  EAGAIN: 'out of processes',
  ENOMEM: 'out of memory',
};
