// Recording a fire when the database may be down (SPEC §6: every fire that started is recorded
// exactly once). A record the database does not take (DatabaseError: refused, timed out, the
// answer lost) is spooled on this host (state/spool.ts) before its process lets go of it, and
// sent again — as "again", so the store keeps it once even if the first try committed after all
// — by whichever process of this host flushes the spool next: the scheduler (in the background,
// with backoff, until the spool is empty), `routine run`, `routine list`, `routine history`.
// Other errors (a full disk with the file backend) are not spooled: a spool on the same disk
// would not help; the caller's own retries and the open marker handle those.

import { Backoff } from '../backoff.js';
import { anySignal, type Clock } from '../clock.js';
import { DatabaseError } from '../errors.js';
import { namesIn, randomHex } from '../fs/files.js';
import { listSpool, removeSpooled, spoolDir, writeSpool } from '../state/spool.js';
import type { Fire, OpenFire } from '../state/routine-state.js';
import type { RecordOptions, RoutineStore, Warn } from './store.js';

export type RecordOutcome = { recorded: true } | { recorded: false; spooledTo: string; why: string };

/** A record that closes no open fire gets a key of its own first, so that sending it again
 * after a lost answer stores it once. */
export const withKey = (fire: Fire): Fire => (fire.closes || fire.key ? fire : { ...fire, key: randomHex(8) });

/** Records `fire`; when the database does not take it, spools it (durably) and says where.
 * Throws what is not a database error, and when even the spool cannot be written. */
export async function recordOrSpool(store: RoutineStore, stateDir: string, routine: string, fire: Fire, warn: Warn, opts: RecordOptions = {}): Promise<RecordOutcome> {
  const keyed = withKey(fire);
  try {
    await store.recordFire(routine, keyed, warn, opts);
    return { recorded: true };
  } catch (err) {
    if (!(err instanceof DatabaseError)) throw err;
    const spooledTo = writeSpool(stateDir, { kind: 'fire', routine, fire: keyed, spooled_at: new Date().toISOString(), why: err.message });
    return { recorded: false, spooledTo, why: err.message };
  }
}

/** Whether the owner of an open fire is gone and nothing of this host still holds its record:
 * an open fire whose record waits in this host's spool (its process spooled it, then ended) is
 * left for the spool, which records it with its real result, never called interrupted by a
 * reconcile that ran while the database (or the spool's flush) could not take it yet. Checked
 * when each open fire is judged, so a record spooled a moment ago counts too. */
export function reconcilable(stateDir: string, ownerGone: (owner: OpenFire['owner']) => boolean): (owner: OpenFire['owner'], open: OpenFire) => boolean {
  return (owner, open) => ownerGone(owner) && !isSpooled(stateDir, open.id);
}

/** Whether the spool holds a record closing `openId`. */
function isSpooled(stateDir: string, openId: string): boolean {
  try {
    return namesIn(spoolDir(stateDir)).some((name) => name.endsWith(`.${openId}.json`));
  } catch {
    return false; // a spool that cannot be read cannot be recorded from either (missing: nothing spooled)
  }
}

/** Whether a failed claim may have committed all the same (its answer lost): a connection that
 * was refused, or never made, stored nothing. */
export const claimMayHaveCommitted = (err: unknown): boolean => err instanceof DatabaseError && !err.neverConnected;

/** Spools a claim whose answer was lost: this host did not fire that tick, and gives the claim
 * back once the database is there again (flushSpool). */
export function spoolClaim(stateDir: string, routine: string, scheduledAt: Date, host: string, why: string): string {
  return writeSpool(stateDir, { kind: 'claim', routine, scheduled_at: scheduledAt.toISOString(), host, spooled_at: new Date().toISOString(), why });
}

export interface FlushResult {
  recorded: number;
  released: number;
  /** Records still spooled (the database is still away). */
  left: number;
}

/** Sends every spooled record again, oldest first; stops at the first database error (the
 * database is still down: the rest would fail too). */
export async function flushSpool(store: RoutineStore, stateDir: string, warn: Warn): Promise<FlushResult> {
  const all = listSpool(stateDir, warn);
  const done: FlushResult = { recorded: 0, released: 0, left: all.length };
  for (const { path, record } of all) {
    try {
      if (record.kind === 'fire') {
        await store.recordFire(record.routine, record.fire, warn, { again: true });
        done.recorded++;
      } else if (await store.releaseClaim(record.routine, new Date(record.scheduled_at), record.host)) {
        done.released++;
      }
    } catch (err) {
      if (err instanceof DatabaseError) return done;
      // not the database's fault (a bug, a record the store refuses): said, and kept for a person
      warn(`could not record spooled ${path}: ${(err as Error).message}`);
      continue;
    }
    removeSpooled(path);
    done.left--;
  }
  return done;
}

/** The scheduler's background flusher: flushes when told a record was spooled, then again with
 * backoff (1 s doubling to 30 s) until the spool is empty, and every 30 s in any case (a
 * `routine run` of this host may have spooled one). */
export class SpoolFlusher {
  private wake = new AbortController();
  private loop: Promise<void> | null = null;

  constructor(
    private readonly o: { store: RoutineStore; stateDir: () => string; clock: Clock; warn: Warn; log: (f: FlushResult) => void },
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
      const r = await flushSpool(this.o.store, this.o.stateDir(), this.o.warn);
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
