// What this process has seen of a lock's holder, timed on its own monotonic clock (SPEC §4.4):
// a live holder on this host is stale only once its heartbeat has stayed unchanged for a whole
// TTL as this observer timed it. Kept per lock for the life of the process, so a long-lived
// observer times a stalled holder across its attempts: the scheduler, which tries the exec lock
// at every tick (a holder stopped with SIGSTOP is taken over at the first tick a TTL after its
// last heartbeat), and a waiter between its polls. A one-shot command sees a holder once: for
// it nothing is unchanged yet.

import type { Clock } from '../clock.js';
import type { LockRecord } from './record.js';
import { believedTtlMs, MAX_TTL_MS, type Observation } from './stale.js';

interface Seen {
  clock: Clock;
  signature: string;
  since: number;
}

const seen = new Map<string, Seen>();
/** Locks a process looks at are few (exec-run, scheduler, one per host with a database). */
const MAX_SCOPES = 256;

/** The observer of lock `scope` (its path, or its database and key), with `ttlMs` the TTL this
 * process configured for it. */
export function observerOf(scope: string, ttlMs: number, clock: Clock): (signature: string) => Observation {
  return (signature) => {
    const now = clock.monotonic();
    let s = seen.get(scope);
    if (!s || s.clock !== clock || s.signature !== signature) {
      if (!s && seen.size >= MAX_SCOPES) seen.delete(seen.keys().next().value!);
      s = { clock, signature, since: now };
      seen.set(scope, s);
    }
    return { unchangedForMs: now - s.since, ttlMs };
  };
}

/** Whether a record, by its own times, shows a holder that is still within its lease: one that
 * looks fresh is refused at once (trusting a record to refuse takes nothing from anyone); one
 * that looks expired, or claims an implausible TTL, may be a stalled holder — or a forged time. */
export function recordLooksFresh(r: LockRecord, nowMs: number): boolean {
  return r.expires_at * 1000 > nowMs && (r.expires_at - r.heartbeat_at) * 1000 <= MAX_TTL_MS;
}

/** For a one-shot acquirer that may watch (`scheduler start`, as `lock break` does): a live
 * holder on this host whose record looks expired is watched for up to a TTL before the answer —
 * taken over once its heartbeat has not moved all that time, refused the moment it moves. */
export class StalledWatch {
  private signature: string | null = null;
  private since = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly onWatch?: (holder: LockRecord, forMs: number) => void,
  ) {}

  /** After a refused attempt: true to look again (after a pause), false to give the refusal. */
  keepWatching(holder: LockRecord | null): boolean {
    if (!holder) return false;
    const signature = `${holder.lock_id}|${holder.heartbeat_at}`;
    if (this.signature === null) {
      if (recordLooksFresh(holder, this.clock.now())) return false;
      this.signature = signature;
      this.since = this.clock.monotonic();
      this.onWatch?.(holder, this.forMs(holder));
      return true;
    }
    // it moved (a heartbeat, another holder): alive; or watched past a TTL and still refused
    return signature === this.signature && this.clock.monotonic() - this.since <= 2 * this.forMs(holder) + 1000;
  }

  /** Watched for the TTL the holder is judged by (its record's, when believed), at least ours. */
  private forMs(holder: LockRecord): number {
    return Math.max(this.ttlMs, believedTtlMs(holder, this.ttlMs));
  }
}
