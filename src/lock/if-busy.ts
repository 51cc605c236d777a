// The `--if-busy` policy of SPEC §4, once for every lock backend: `fail` and `skip` answer after
// one attempt (after watching a stalled holder, when asked), `wait` attempts again after each
// pause until it has the lock, its time-out passes or its signal aborts. A backend says only how
// it attempts (one non-blocking try) and how it pauses between tries (wait.ts for the files,
// pg/lease.ts for the database).

import type { Clock } from '../clock.js';
import type { AcquireResult, BusyPolicy, Lease } from './lease.js';
import { StalledWatch } from './observer.js';
import type { LockRecord } from './record.js';

/** One non-blocking try: the lease, or who holds the lock and why it is busy. */
export type Attempt =
  { ok: true; lease: Lease & { startHeartbeat(): void } } | { ok: false; holder: LockRecord | null; why: string };

export interface Attempter {
  clock: Clock;
  /** The lock's TTL: how long a stalled holder is watched. */
  ttlMs: number;
  attempt(): Promise<Attempt>;
  /** The pause between two tries of a wait, at most `leftMs`; it may end early when the lock may
   * be free (a release seen). */
  pause(signal: AbortSignal | undefined, leftMs: number): Promise<void>;
  /** Whether a waiter outlives this error of an attempt (a database outage): it counts as a busy
   * try. Any other error, and every error with `fail` or `skip`, is thrown. */
  outlives?(err: unknown): boolean;
}

/** Takes the lock under `policy` (the heartbeat started unless `heartbeat` is false). */
export async function acquireUnderPolicy(
  policy: BusyPolicy & { heartbeat?: boolean },
  a: Attempter,
): Promise<AcquireResult> {
  const { clock } = a;
  const ifBusy = policy.ifBusy ?? 'fail';
  const deadline = policy.waitTimeoutMs === undefined ? Infinity : clock.monotonic() + policy.waitTimeoutMs;
  const watch = policy.watchStalled ? new StalledWatch(clock, a.ttlMs, policy.watchStalled) : null;
  for (;;) {
    let r: Attempt;
    try {
      // not its turn yet (others waited first): busy, however free the lock is this moment
      const notYet = policy.turn ? await policy.turn() : null;
      r = notYet === null ? await a.attempt() : { ok: false, holder: null, why: notYet };
    } catch (err) {
      if (ifBusy !== 'wait' || !a.outlives?.(err)) throw err;
      r = { ok: false, holder: null, why: (err as Error).message };
    }
    if (r.ok) {
      if (policy.heartbeat !== false) r.lease.startHeartbeat();
      return { ok: true, lease: r.lease };
    }
    if (ifBusy !== 'wait') {
      if (watch?.keepWatching(r.holder) && !policy.signal?.aborted) {
        await clock.sleep(250, policy.signal);
        continue;
      }
      return { ok: false, reason: 'LOCK_HELD', holder: r.holder, why: r.why };
    }
    if (policy.signal?.aborted) return { ok: false, reason: 'ABORTED', holder: r.holder, why: r.why };
    const left = deadline - clock.monotonic();
    if (left <= 0) return { ok: false, reason: 'WAIT_TIMEOUT', holder: r.holder, why: r.why };
    await a.pause(policy.signal, left);
  }
}
