// The routine store of a database backend with this host's spool in front (SPEC §6: every fire
// that started is recorded exactly once). A record the database does not take (DatabaseError) is
// spooled on this host (state/spool.ts) and sent again, as "again", by whichever process of this
// host flushes the spool next; other errors are not spooled. The file backend has no spool
// (docs/design.md "The spooling store").
// (Over 300 lines: the store's every method passes through, and the spool's flusher with its
// back-off lives beside them.)

import { Backoff } from '../backoff.js';
import { anySignal, type Clock } from '../clock.js';
import { DatabaseError, DatabaseStatementError } from '../errors.js';
import { isSpooled, listSpool, removeSpooled, writeSpool } from './spool.js';
import type { Fire, OpenFire } from './routine-state.js';
import type { HistoryEntry } from './history.js';
import type { RoutineRecord, RoutineStateFile } from './routine-state.js';
import type { PhaseBoard } from './phases.js';
import {
  claimKey,
  withKey,
  type Claimant,
  type OrphanClaim,
  type Deferred,
  type FireQuery,
  type FlushResult,
  type NotRecorded,
  type ShownFire,
  type PauseChange,
  type RecordOptions,
  type RoutineStore,
  type Warn,
} from './store.js';

export class SpoolingStore implements RoutineStore {
  readonly publish?: RoutineStore['publish'];
  readonly close?: RoutineStore['close'];
  readonly probeWritable?: RoutineStore['probeWritable'];

  constructor(
    private readonly db: RoutineStore,
    private readonly stateDir: string,
  ) {
    // what the wrapped store has of the optional part of the contract, it keeps
    if (db.publish) this.publish = db.publish.bind(db);
    if (db.close) this.close = db.close.bind(db);
    if (db.probeWritable) this.probeWritable = db.probeWritable.bind(db);
  }

  get sharedTicks(): boolean {
    return this.db.sharedTicks;
  }

  /** Records `fire`; when the database does not take it, spools it (durably) and says where.
   * Throws what is not a database error, and when even the spool cannot be written. */
  async recordFire(
    routine: string,
    fire: Fire,
    warn: Warn,
    opts: RecordOptions = {},
  ): Promise<Deferred | NotRecorded | void> {
    const keyed = withKey(fire);
    try {
      return await this.db.recordFire(routine, keyed, warn, opts);
    } catch (err) {
      if (!(err instanceof DatabaseError)) throw err;
      const spooledTo = writeSpool(this.stateDir, {
        kind: 'fire',
        routine,
        fire: keyed,
        spooled_at: new Date().toISOString(),
        why: err.message,
        ...(opts.claimer ? { claimer: opts.claimer } : {}),
      });
      return { spooledTo, why: err.message };
    }
  }

  /** A claim whose answer was lost may have committed: the runner sends it again until the
   * routine's next tick (a claim of its own claimer is recognised), and a claim of its own it gave
   * up on is recorded by its sweep (scheduler/claims.ts). */
  claimTick(routine: string, scheduledAt: Date, by: Claimant): Promise<boolean> {
    return this.db.claimTick(routine, scheduledAt, by);
  }

  /** Not this host's own claims whose record waits in its spool: that record settles them when
   * it is sent (a sweep recording them meanwhile would record the tick twice). */
  claimTicks(
    ticks: readonly { routine: string; scheduledAt: Date }[],
    by: Claimant,
    again = false,
  ): Promise<Set<string>> {
    if (this.db.claimTicks) return this.db.claimTicks(ticks, by, again);
    // a store that claims one at a time (tests' stubs)
    return (async () => {
      const won = new Set<string>();
      for (const t of ticks)
        if (await this.db.claimTick(t.routine, t.scheduledAt, by)) won.add(claimKey(t.routine, t.scheduledAt));
      return won;
    })();
  }

  async orphanClaims(claimer: string, limit: number): Promise<OrphanClaim[]> {
    const found = (await this.db.orphanClaims?.(claimer, limit)) ?? [];
    if (!found.some((c) => c.claimer === claimer)) return found;
    const spooled = new Set(
      listSpool(this.stateDir, () => {}).flatMap((s) =>
        s.record.kind === 'fire' ? [`${s.record.routine} ${Date.parse(s.record.fire.scheduled_at)}`] : [],
      ),
    );
    return found.filter((c) => c.claimer !== claimer || !spooled.has(`${c.routine} ${c.scheduledAt.getTime()}`));
  }

  openFiresOfGoneClaimers(claimer: string): Promise<string[]> {
    return this.db.openFiresOfGoneClaimers?.(claimer) ?? Promise.resolve([]);
  }

  settleClaim(routineId: string, scheduledAt: Date, claimer: string): Promise<void> {
    return this.db.settleClaim?.(routineId, scheduledAt, claimer) ?? Promise.resolve();
  }

  takeOverClaim(claim: OrphanClaim, to: Claimant): Promise<boolean> {
    return this.db.takeOverClaim?.(claim, to) ?? Promise.resolve(false);
  }

  /** Sends every spooled record again, oldest first (see flushSpool). */
  flushSpool(warn: Warn): Promise<FlushResult> {
    return flushSpool(this.db, this.stateDir, warn);
  }

  /** The open fires whose owner is gone — but not one whose record still waits in the spool (its
   * process spooled it, then ended: the flush records it with its real result, never as
   * interrupted). Checked as each open fire is judged, so a record spooled a moment ago counts
   * too. (Callers flush first, and say what they recorded.) */
  reconcile(
    isGone: (owner: OpenFire['owner'], open: OpenFire, routineId: string) => boolean,
    warn: Warn,
    recorded?: (routineId: string, fire: Fire, prior: RoutineRecord | undefined) => void,
  ): Promise<number> {
    return this.db.reconcile(
      (owner, open, routineId) => isGone(owner, open, routineId) && !isSpooled(this.stateDir, open.id),
      warn,
      recorded,
    );
  }

  read(warn: Warn): Promise<RoutineStateFile> {
    return this.db.read(warn);
  }

  readOne(routineId: string, warn: Warn): Promise<RoutineRecord | undefined> {
    return this.db.readOne(routineId, warn);
  }

  openFire(routineId: string, open: OpenFire, warn: Warn, claimer?: string): Promise<void> {
    return this.db.openFire(routineId, open, warn, claimer);
  }

  setPaused(routineId: string, paused: boolean, note: string | null): Promise<PauseChange> {
    return this.db.setPaused(routineId, paused, note);
  }

  history(routineId: string, warn?: Warn): Promise<HistoryEntry[]> {
    return this.db.history(routineId, warn);
  }

  recentFires(routines: readonly string[], q: FireQuery, warn: Warn): Promise<ShownFire[]> {
    return this.db.recentFires(routines, q, warn);
  }

  writePhases(board: PhaseBoard): Promise<void> {
    return this.db.writePhases(board);
  }

  readPhases(warn: Warn): Promise<PhaseBoard[]> {
    return this.db.readPhases(warn);
  }

  releaseClaim(routineId: string, scheduledAt: Date, host: string): Promise<boolean> {
    return this.db.releaseClaim(routineId, scheduledAt, host);
  }
}

/** Whether a failed claim may have committed all the same (its answer lost): a connection that
 * was refused, or never made, stored nothing. */
export const claimMayHaveCommitted = (err: unknown): boolean => err instanceof DatabaseError && !err.neverConnected;

/** Spools a claim whose answer was lost: this host did not fire that tick, and gives the claim
 * back once the database is there again (flushSpool). */
export function spoolClaim(stateDir: string, routine: string, scheduledAt: Date, host: string, why: string): string {
  return writeSpool(stateDir, {
    kind: 'claim',
    routine,
    scheduled_at: scheduledAt.toISOString(),
    host,
    spooled_at: new Date().toISOString(),
    why,
  });
}

/** Sends every spooled record again, oldest first; stops at the first database error (the
 * database is still down: the rest would fail too). */
async function flushSpool(store: RoutineStore, stateDir: string, warn: Warn): Promise<FlushResult> {
  const all = listSpool(stateDir, warn);
  const done: FlushResult = { recorded: 0, released: 0, refused: 0, left: all.length };
  for (const { path, record } of all) {
    try {
      if (record.kind === 'fire') {
        const answer = await store.recordFire(record.routine, record.fire, warn, {
          again: true,
          ...(record.claimer ? { claimer: record.claimer } : {}),
        });
        // (another record of the fire stands: said by the store, and not counted as recorded)
        if (answer && 'notRecorded' in answer) done.refused++;
        else done.recorded++;
      } else if (await store.releaseClaim(record.routine, new Date(record.scheduled_at), record.host)) {
        done.released++;
      }
    } catch (err) {
      // the database away: the rest would fail too (a statement it refuses for what it is does
      // not stop the others)
      if (err instanceof DatabaseError && !(err instanceof DatabaseStatementError)) return done;
      // not the database's fault (a bug, a record the store refuses): said, and kept for a person
      warn(`could not record spooled ${path}: ${(err as Error).message}`);
      continue;
    }
    removeSpooled(path);
    done.left--;
  }
  return done;
}

/** What a flush that sent something says in the log. */
export const flushMessage = (f: FlushResult): string =>
  `database back: recorded ${f.recorded} spooled fire${f.recorded === 1 ? '' : 's'}${f.refused ? ` (${f.refused} more not: another scheduler's, as said above)` : ''}${f.released ? `, gave back ${f.released} claim${f.released === 1 ? '' : 's'} not fired` : ''}${f.left ? `; ${f.left} still spooled` : ''}`;

/** The scheduler's background flusher: flushes when told a record was spooled, then again with
 * backoff (1 s doubling to 30 s) until the spool is empty, and every 30 s in any case (a
 * `routine run` of this host may have spooled one). */
export class SpoolFlusher {
  private wake = new AbortController();
  private loop: Promise<void> | null = null;

  constructor(
    private readonly o: {
      store: Pick<SpoolingStore, 'flushSpool'>;
      clock: Clock;
      warn: Warn;
      log: (f: FlushResult) => void;
    },
  ) {}

  /** A record was just spooled: flush soon. */
  kick(): void {
    this.wake.abort();
  }

  start(stop: AbortSignal): void {
    this.loop = this.run(stop);
  }

  /** Waits for the loop, after `stop` was aborted, and tries once more. */
  async stopped(): Promise<FlushResult | null> {
    await this.loop;
    return this.flushOnce();
  }

  private async flushOnce(): Promise<FlushResult | null> {
    try {
      const r = await this.o.store.flushSpool(this.o.warn);
      if (r.recorded + r.released > 0) this.o.log(r);
      return r;
    } catch (err) {
      this.o.warn(`could not read the spool: ${(err as Error).message}`);
      return null;
    }
  }

  private async run(stop: AbortSignal): Promise<void> {
    const retry = new Backoff(1000, 30_000, this.o.clock);
    let pending = false;
    while (!stop.aborted) {
      if (this.wake.signal.aborted) {
        this.wake = new AbortController();
        pending = true;
      }
      const link = anySignal(stop, this.wake.signal);
      try {
        if (pending) await retry.wait(link.signal);
        else await this.o.clock.sleep(30_000, link.signal);
      } finally {
        link.unlink();
      }
      if (stop.aborted) return;
      if (this.wake.signal.aborted && !pending) continue; // kicked while idle: wait the first delay
      const r = await this.flushOnce();
      pending = r !== null && r.left > 0;
      if (!pending) retry.reset();
    }
  }
}
