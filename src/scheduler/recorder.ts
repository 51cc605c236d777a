// The scheduler's recorder (SPEC §6: every fire that started is recorded exactly once): writes
// each fire's record to the routine store, retrying an error a few times; with a database, a
// record it does not take is spooled at once and flushed in the background until it is stored
// (spooling-store.ts). Also reads a routine's record before a fire, for its notifications.

import { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import { isStorageError } from '../errors.js';
import type { Project } from '../config/load.js';
import type { Fire, RoutineRecord } from '../state/routine-state.js';
import type { Logger } from './log.js';
import { claimMayHaveCommitted, flushMessage, SpoolFlusher } from './spooling-store.js';
import { withKey, type RoutineStore, type Warn } from './store.js';

export interface RecorderOptions {
  store: RoutineStore;
  clock: Clock;
  log: Logger;
  warn: Warn;
  /** The state folder of the config in force (where the spool is, for messages). */
  stateDir: () => string;
  /** Aborted at shutdown: retries stop waiting. */
  halt: AbortSignal;
  /** This scheduler's host identity (claims name it). */
  host: string;
  /** How many routines the config has (the shared index is rewritten once per that many fires). */
  routineCount: () => number;
}

const RECORD_ATTEMPTS = 5;
/** The shared index is rewritten after at least this many fires (and as many as it holds
 * routines): with one routine, a rewrite (and its two fsyncs) per fire would cost more than the
 * fire. */
const MIN_FIRES_PER_REFRESH = 32;

export class Recorder {
  private readonly flusher: SpoolFlusher | null;
  /** Fires recorded since the shared index was last rewritten, and when that was (monotonic). */
  private unsaved = 0;
  private savedAt = -Infinity;
  /** Routines the shared index held when last written (more than the config may have). */
  private indexed = 0;

  constructor(private readonly o: RecorderOptions) {
    const spooling = o.store.flushSpool ? { flushSpool: o.store.flushSpool.bind(o.store) } : null;
    this.flusher = spooling
      ? new SpoolFlusher({
          store: spooling, clock: o.clock, warn: o.warn,
          log: (f) => o.log({ event: 'scheduler.warning', message: flushMessage(f) }),
        })
      : null;
  }

  /** At start: the shared index is brought up to date once (a damaged one moved aside), then the
   * spool's flusher runs in the background. */
  async start(): Promise<void> {
    await this.refreshIndex();
    this.flusher?.start(this.o.halt);
  }

  /** After the halt: the shared index brought up to date; one more flush of the spool, saying
   * what is still spooled. */
  async stopped(): Promise<void> {
    if (this.unsaved > 0) await this.refreshIndex();
    if (!this.flusher) return;
    const left = (await this.flusher.stopped())?.left ?? 0;
    if (left > 0) this.o.warn(`${left} record${left === 1 ? '' : 's'} still spooled in ${this.o.stateDir()}/spool: the next scheduler or routine command on this host records ${left === 1 ? 'it' : 'them'}`);
  }

  /** Claims a scheduled time for this scheduler (several schedulers share a database: one of
   * them takes each). A claim whose answer was lost may have committed: the tick is not fired
   * (this host cannot know it is its own); the store spooled the claim, to be given back once
   * the database answers again, so the flusher is woken. */
  async claim(id: string, scheduledAt: Date): Promise<boolean> {
    try {
      return await this.o.store.claimTick(id, scheduledAt, this.o.host);
    } catch (err) {
      if (this.flusher && claimMayHaveCommitted(err)) this.flusher.kick();
      throw err;
    }
  }

  /** Records a fire. Other errors than the database's (a full disk) are retried for a while; if
   * the record never can be written, the fire's open marker stays and the next reconcile records
   * it as interrupted. */
  async record(id: string, fire: Fire): Promise<void> {
    await this.write(id, fire);
    this.unsaved++;
    // The shared index (routine-state.json) is rewritten once per as many fires as it holds
    // routines, at most once a second: O(1) amortised per fire (SPEC §3); readers fold in what
    // it lacks.
    if (this.unsaved >= Math.max(MIN_FIRES_PER_REFRESH, this.o.routineCount(), this.indexed) && this.o.clock.monotonic() - this.savedAt >= 1000) await this.refreshIndex();
  }

  private async refreshIndex(): Promise<void> {
    if (!this.o.store.refreshIndex) return;
    this.unsaved = 0;
    this.savedAt = this.o.clock.monotonic();
    try {
      this.indexed = await this.o.store.refreshIndex(this.o.warn);
    } catch (err) {
      this.o.warn(`could not rewrite the routine state index (the history has every fire; readers fold it in): ${(err as Error).message}`);
    }
  }

  private async write(id: string, fire: Fire): Promise<void> {
    const pause = new Backoff(200, 30_000, this.o.clock);
    // one key for every attempt, and each attempt after the first sent "again": a first try
    // that committed although its answer was lost is then not stored a second time
    const keyed = withKey(fire);
    for (let attempt = 1; ; attempt++) {
      const opts = attempt > 1 ? { again: true } : {};
      try {
        const deferred = await this.o.store.recordFire(id, keyed, this.o.warn, opts);
        if (deferred) {
          this.o.warn(`could not record ${id} now (${deferred.why}); spooled to ${deferred.spooledTo}, recorded when the database is back`);
          this.flusher?.kick();
        }
        return;
      } catch (err) {
        // A state folder that cannot be written (full, read-only) is waited out for as long as the
        // scheduler runs: the fire ran, and its record goes in once it can (SPEC §4.15). Other
        // errors a few times; then the open marker stays, and reconcile records it as interrupted.
        const storage = isStorageError(err);
        if ((!storage && attempt >= RECORD_ATTEMPTS) || this.o.halt.aborted) {
          this.o.warn(`could not record ${id}: ${(err as Error).message}`);
          return;
        }
        await pause.wait(this.o.halt);
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

/** Whether a routine has somewhere to announce its fires (its own notify, or the project's). */
export function notifies(def: { notify?: unknown }, project: Project): boolean {
  return def.notify !== false && (def.notify !== undefined || project.config.notify !== null);
}
