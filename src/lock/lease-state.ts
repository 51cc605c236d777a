// What every lease implementation keeps the same way: the record it holds, whether it was lost
// (and the AbortSignal that says so), its heartbeat timer, and the child groups it tracks.

import type { Clock } from '../clock.js';
import type { ChildGroup, LockRecord } from './record.js';
import type { LockLost, LockOwnerInfo } from './lease.js';
import { tenthsOfSeconds } from '../duration.js';

/** How early a holder stops trusting its own lease, for wall/monotonic drift. */
export const safetyMarginMs = (ttlMs: number): number => Math.min(500, ttlMs * 0.05);

/** The time between SIGTERM and SIGKILL when work must stop because the lease is running out. */
export const killGraceMs = (ttlMs: number): number => Math.min(5_000, ttlMs * 0.2);

/** How long before its lease would expire a holder that could not renew it gives up: early
 * enough that its work is dead, SIGKILL delivered, before anyone else may take the lock (SPEC
 * §4.14): expiry − kill grace − margin. */
export const giveUpLeadMs = (ttlMs: number): number => safetyMarginMs(ttlMs) + killGraceMs(ttlMs);

/** The lock ids of leases this process held and lost (at most a few hundred kept): a record that
 * names this live process is never stale by its times (SPEC §4.4), but one of these is known
 * lost by the process it names, which may take the lock again (a scheduler whose heartbeat could
 * not be written, once the folder is writable). */
const lostHere = new Set<string>();
export const lostByThisProcess = (lockId: string): boolean => lostHere.has(lockId);

export abstract class LeaseState {
  protected rec: LockRecord;
  protected lostInfo: LockLost | null = null;
  protected released = false;
  protected timer: NodeJS.Timeout | undefined;
  /** Monotonic time taken just before the last confirmed heartbeat: the lease runs from here. */
  protected confirmedAt: number;
  private deadline: NodeJS.Timeout | undefined;
  private readonly controller = new AbortController();

  constructor(
    record: LockRecord,
    protected readonly clock: Clock,
    protected readonly ttlMs: number,
    confirmedAt: number,
  ) {
    this.rec = record;
    this.confirmedAt = confirmedAt;
  }

  get key(): string {
    return this.rec.key;
  }
  get lockId(): string {
    return this.rec.lock_id;
  }
  get generation(): number {
    return this.rec.generation;
  }
  /** Aborted (with the LockLost reason) as soon as the lease is found lost. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }
  get lost(): LockLost | null {
    return this.lostInfo;
  }
  record(): LockRecord {
    return this.rec;
  }

  stopHeartbeat(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  /** Starts the heartbeat (`beat` every `refreshMs`) and the deadline. Unref'd: a heartbeat
   * alone never keeps a process alive. `paced`: each heartbeat is sent `refreshMs` after the one
   * before was sent (the first one `refreshMs` after the lease was confirmed), waiting for it to
   * end first; on a slow link the time a statement takes then counts against the refresh, not
   * on top of it (a lease acquired in 3 s with refresh 3 s beats at once). */
  protected startTimers(beat: () => unknown, refreshMs: number, paced = false): void {
    if (this.timer || this.released || this.lostInfo) return;
    if (!paced) {
      this.timer = setInterval(beat, refreshMs);
      this.timer.unref();
    } else {
      const schedule = (sentAt: number): NodeJS.Timeout => {
        const t = setTimeout(
          () => {
            const sent = this.clock.monotonic();
            void Promise.resolve(beat()).finally(() => {
              // stopped meanwhile (released, lost): stopHeartbeat cleared this.timer
              if (this.timer === t && !this.released && !this.lostInfo) this.timer = schedule(sent);
            });
          },
          Math.max(0, sentAt + refreshMs - this.clock.monotonic()),
        );
        t.unref();
        return t;
      };
      this.timer = schedule(this.confirmedAt);
    }
    this.armDeadline();
  }

  /** A heartbeat went through (sent at monotonic `at`): the lease runs from there. */
  protected confirmed(at: number): void {
    this.confirmedAt = at;
    if (this.timer) this.armDeadline();
  }

  /** Checks the lease again the moment it would run out, whatever the heartbeat is doing: a
   * heartbeat that fails or hangs must not let us work past the lease. */
  private armDeadline(): void {
    clearTimeout(this.deadline);
    if (this.released || this.lostInfo) return;
    const left = this.confirmedAt + this.ttlMs - giveUpLeadMs(this.ttlMs) - this.clock.monotonic();
    this.deadline = setTimeout(
      () => {
        const expired = this.expiredBy();
        if (expired) this.markLost(expired);
        else this.armDeadline();
      },
      Math.max(0, left),
    );
    this.deadline.unref();
  }

  /** Why our lease has run out, or null: timed on our own monotonic clock, immune to
   * wall-clock steps. Implementations may add their own reasons. */
  protected expiredBy(): string | null {
    const elapsed = this.clock.monotonic() - this.confirmedAt;
    if (elapsed >= this.ttlMs - giveUpLeadMs(this.ttlMs)) {
      const past = elapsed >= this.ttlMs - safetyMarginMs(this.ttlMs);
      return past
        ? `no successful heartbeat for ${tenthsOfSeconds(elapsed)}, past the ${this.ttlMs / 1000}s TTL (was the process paused?)`
        : `no successful heartbeat for ${tenthsOfSeconds(elapsed)}; the lease (TTL ${this.ttlMs / 1000}s) runs out in ${tenthsOfSeconds(this.ttlMs - elapsed)}, so the work stops now`;
    }
    return null;
  }

  /** Time left for our work to die before the lease may expire for others (SPEC §4.14). */
  protected graceLeft(): number {
    return Math.max(0, this.confirmedAt + this.ttlMs - safetyMarginMs(this.ttlMs) - this.clock.monotonic());
  }

  /** Replaces the recorded child group `child.pid` (or adds it). */
  protected withChild(child: ChildGroup): void {
    const children = (this.rec.owner.children ?? []).filter((c) => c.pid !== child.pid);
    children.push(child);
    this.rec = { ...this.rec, owner: { ...this.rec.owner, children } };
  }

  untrackChild(pid: number): void {
    const children = (this.rec.owner.children ?? []).filter((c) => c.pid !== pid);
    this.rec = { ...this.rec, owner: { ...this.rec.owner, children } };
  }

  protected withOwner(fields: Partial<LockOwnerInfo>): void {
    this.rec = { ...this.rec, owner: { ...this.rec.owner, ...fields } };
  }

  /** Marks the lease lost once (stopping the heartbeat and aborting `signal`). `takenOver`:
   * someone else holds it already, so the work gets no grace at all. */
  protected markLost(why: string, takenOver = false): LockLost {
    if (!this.lostInfo) {
      this.lostInfo = { code: 'LOCK_LOST', why, graceMs: takenOver ? 0 : this.graceLeft() };
      if (lostHere.size > 500) lostHere.clear();
      lostHere.add(this.rec.lock_id);
      this.stopHeartbeat();
      this.onLost();
      this.controller.abort(this.lostInfo);
    }
    return this.lostInfo;
  }

  /** Implementation clean-up when the lease is lost (before `signal` aborts). */
  protected onLost(): void {}
}
