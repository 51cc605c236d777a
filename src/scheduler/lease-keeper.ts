// The scheduler's hold on its lock (SPEC §4.15, §9): what a lost lease means (a pure decision)
// and taking the lock again (one loop, on Backoff). With files the scheduler lock keeps a second
// scheduler out: a lease lost to another holder stops this one, and one that only ran out
// because the state folder could not be written is taken again once it can (the fires are held
// meanwhile). With a database every tick is claimed once across schedulers: a lease lost to an
// outage is taken again in the background while the loop goes on.

import { Backoff } from '../backoff.js';
import type { BackendCaps } from '../backend-types.js';
import type { Clock } from '../clock.js';
import { DatabaseRowError } from '../errors.js';
import type { LockBackend } from '../lock/lock-backend.js';
import type { Lease, LockOwnerInfo } from '../lock/lease.js';
import type { LockRecord } from '../lock/record.js';
import { describeHolder } from '../lock/stale.js';
import type { Logger } from '../fire/log.js';

/** A scheduler on this host that is alive but whose record looks expired (stopped with SIGSTOP,
 * or a time someone wrote) is watched for up to a TTL (SPEC §4.4): taken over once its heartbeat
 * has not moved all that time, refused the moment it moves. This says so in the log. */
export function stalledNotice(log: Logger, now: () => number): (holder: LockRecord, forMs: number) => void {
  return (holder, forMs) =>
    log({
      event: 'scheduler.warning',
      message: `the scheduler lock's holder, ${describeHolder(holder, now())}, is alive on this host but its record looks expired: watching its heartbeat for up to ${Math.round(forMs / 1000)}s`,
    });
}

export type LossAction = 'hold-fires-and-retake' | 'stop' | 'retake';

/** What a scheduler does when its lease ends. */
export function onLeaseLoss(caps: BackendCaps, lostToWriteErrors: boolean): LossAction {
  if (!caps.schedulerPerProject) return 'retake';
  return lostToWriteErrors ? 'hold-fires-and-retake' : 'stop';
}

/** How often a scheduler whose state folder could not be written tries its lock again. */
export const STATE_RETRY_MS = 2_000;
/** A row the lease cannot act on stays so until someone sets it right: tried once a minute. */
const BAD_ROW_RETRY_MS = 60_000;

export interface KeeperOptions {
  lock: LockBackend;
  caps: BackendCaps;
  clock: Clock;
  key: string;
  owner: LockOwnerInfo;
  log: Logger;
  /** The scheduler's stop: the keeper stops trying when it aborts. */
  signal: AbortSignal;
  /** The lock is another's now: the scheduler must stop (already logged as lock_lost). */
  stop(): void;
  /** The state folder cannot be written (hold the fires), or can again (null). */
  trouble(err: Error | null): void;
}

export class LeaseKeeper {
  private current: Lease;
  /** The lock was lost for good: the scheduler exits 1. */
  lost = false;

  constructor(
    first: Lease,
    private readonly o: KeeperOptions,
  ) {
    this.current = first;
    first.signal.addEventListener('abort', this.onLost, { once: true });
  }

  get lease(): Lease {
    return this.current;
  }

  /** Why the scheduler does not hold its lock now (for /healthz); null while it does. */
  problem(): string | null {
    if (this.current.confirm()) return null;
    const why = `scheduler lock lost (${this.current.lost?.why ?? 'released'})`;
    return this.o.caps.schedulerPerProject ? why : `${why}; taking it again`;
  }

  dispose(): void {
    this.current.signal.removeEventListener('abort', this.onLost);
  }

  private readonly onLost = (): void => {
    const why = this.current.lost?.why ?? 'unknown';
    switch (onLeaseLoss(this.o.caps, this.current.lostToWriteErrors === true)) {
      case 'hold-fires-and-retake':
        this.o.trouble(new Error(`the scheduler lock cannot be kept: ${why}`));
        void this.retake(true);
        return;
      case 'stop':
        this.giveUp(why);
        return;
      case 'retake':
        this.o.log({ event: 'scheduler.warning', message: `scheduler lock lost (${why}); taking it again` });
        void this.retake(false);
    }
  };

  private giveUp(why: string): void {
    this.lost = true;
    this.o.log({ event: 'scheduler.lock_lost', why });
    this.o.stop();
  }

  /** Takes the lock again: with a database waiting for it (a failed attempt is said and tried
   * again after a pause that grows to 5 s); with files, once the folder can be written, without
   * waiting (another scheduler holding it by then means this one stops). */
  private async retake(whenWritable: boolean): Promise<void> {
    const { lock, key, owner, log, signal, clock } = this.o;
    const pause = whenWritable ? new Backoff(STATE_RETRY_MS, STATE_RETRY_MS, clock) : new Backoff(1_000, 5_000, clock);
    while (!signal.aborted) {
      if (whenWritable) await pause.wait(signal);
      if (signal.aborted) return;
      let again;
      try {
        again = await lock.acquire(key, owner, whenWritable ? { ifBusy: 'fail' } : { ifBusy: 'wait', signal });
      } catch (err) {
        if (whenWritable) continue; // still not writable
        const badRow = err instanceof DatabaseRowError;
        log({
          event: 'scheduler.warning',
          message: `cannot take the scheduler lock again: ${(err as Error).message}; retrying${badRow ? ' in a minute' : ''}`,
        });
        if (badRow) await clock.sleep(BAD_ROW_RETRY_MS, signal);
        else await pause.wait(signal);
        continue;
      }
      if (!again.ok) {
        // with a database: stopped while waiting; with files: taken by another meanwhile
        if (whenWritable)
          this.giveUp(`while the state folder could not be written, the lock was taken by ${again.why}`);
        return;
      }
      if (signal.aborted) {
        await again.lease.release();
        return;
      }
      this.current = again.lease;
      this.current.signal.addEventListener('abort', this.onLost, { once: true });
      log({ event: 'scheduler.warning', message: 'scheduler lock taken again' });
      if (whenWritable) this.o.trouble(null);
      return;
    }
  }
}
