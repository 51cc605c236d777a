// A held file lock: heartbeat, child tracking, loss detection and owner-only release
// (SPEC §4.3, §4.6). Created only by attemptAcquire().

import type { Clock } from '../clock.js';
import { ChildJournal } from './children.js';
import { errnoCode } from '../errors.js';
import { readNoFollow, replaceFile, unlinkQuiet } from './files.js';
import { claimGeneration } from './generation.js';
import type { LivenessProbe } from './identity.js';
import type { Lease, LockOwnerInfo, RefreshResult, ReleaseResult } from './lease.js';
import { LeaseState, safetyMarginMs } from './lease-state.js';
import type { LockPaths } from './paths.js';
import { parseLockRecord, serializeLockRecord, toEpochSeconds, type LockRecord } from './record.js';

const CHILD_WRITE_MS = 250;

export interface LeaseTiming {
  ttlMs: number;
  refreshMs: number;
}

export { safetyMarginMs } from './lease-state.js';

/** When this process last released each lock (monotonic ms), for the waiters' fair turn. */
export const lastReleased = new Map<string, number>();

export class FileLease extends LeaseState implements Lease {
  private readonly childJournal: ChildJournal;
  private childTimer: NodeJS.Timeout | undefined;
  private lastChildWrite = -Infinity;

  constructor(
    private readonly paths: LockPaths,
    record: LockRecord,
    private readonly timing: LeaseTiming,
    clock: Clock,
    private readonly probe: LivenessProbe,
    confirmedAt: number,
  ) {
    super(record, clock, timing.ttlMs, confirmedAt);
    this.childJournal = new ChildJournal(paths.dir, paths.key, record.lock_id, probe);
  }

  get path(): string {
    return this.paths.lock;
  }

  /** Starts the heartbeat timer. Unref'd: the heartbeat alone never keeps a process alive. */
  startHeartbeat(): void {
    this.startTimers(() => this.refresh(), this.timing.refreshMs);
  }

  refresh(): RefreshResult {
    const check = this.verify();
    if (!check.ok) return check;
    const mono = this.clock.monotonic();
    const now = this.clock.now();
    const next: LockRecord = {
      ...this.rec,
      heartbeat_at: toEpochSeconds(now),
      expires_at: toEpochSeconds(now + this.timing.ttlMs),
    };
    try {
      // The verify() above and this rename are not one atomic step; the monotonic expiry check
      // keeps the gap to microseconds, because nobody may reclaim a lock that has not expired.
      replaceFile(this.paths.lock, serializeLockRecord(next));
    } catch (err) {
      // A transient write error (ENOSPC, EIO) is retried on the next beat; once the lease has
      // run out without a successful write, verify() reports it lost.
      if (errnoCode(err) === undefined) throw err;
      return { ok: true };
    }
    this.rec = next;
    this.confirmed(mono);
    return { ok: true };
  }

  verify(): RefreshResult {
    if (this.lostInfo) return { ok: false, lost: this.lostInfo };
    if (this.released) return { ok: false, lost: { code: 'LOCK_LOST', why: 'the lease was released' } };
    const expired = this.expiredBy();
    if (expired) return this.lose(expired);
    let raw: string | null;
    try {
      raw = readNoFollow(this.paths.lock);
    } catch (err) {
      if (errnoCode(err) === undefined) throw err;
      return { ok: true }; // unreadable for now; expiry decides if it stays so
    }
    if (raw === null) return this.lose(`the lock file ${this.paths.lock} was removed`);
    const current = parseLockRecord(raw);
    if (current?.lock_id !== this.rec.lock_id) {
      const by = current
        ? `pid ${current.owner.pid} on ${current.owner.host} (generation ${current.generation})`
        : 'an unreadable record';
      return this.lose(`the lock now belongs to ${by}`);
    }
    return { ok: true };
  }

  /** Records a child group: at once in `<key>.children.<lock_id>` (one appended line; if we
   * die now, the reclaimer must know the group), and in the lock record itself at most every
   * CHILD_WRITE_MS (each rewrite of the lock is a rename, ≈ 0.3 ms here; an exec run starts
   * hundreds of tasks). */
  trackChild(pid: number): void {
    const proc = this.probe.inspect(pid);
    const child = { pid, start_time: proc.state === 'alive' ? proc.startTime : null };
    this.childJournal.add(child);
    this.withChild(child);
    this.scheduleChildWrite();
  }

  private scheduleChildWrite(): void {
    if (this.childTimer) return;
    const wait = Math.max(0, this.lastChildWrite + CHILD_WRITE_MS - this.clock.monotonic());
    if (wait === 0) {
      this.lastChildWrite = this.clock.monotonic();
      this.refresh();
      return;
    }
    this.childTimer = setTimeout(() => {
      this.childTimer = undefined;
      this.lastChildWrite = this.clock.monotonic();
      if (!this.released && !this.lostInfo) this.refresh();
    }, wait);
    this.childTimer.unref();
  }

  /** Cheap currency check for frequent fenced writes: not lost, not released, and our lease not
   * yet expired by our own clock. No I/O; verify() reads the file. */
  held(): boolean {
    if (this.lostInfo || this.released) return false;
    const expired = this.expiredBy();
    if (expired) this.markLost(expired);
    return !expired;
  }

  /** Also against the wall clock that observers judge `expires_at` by: if it jumped forward (a
   * VM resumed, NTP stepped), others may already call the lock stale, and a holder must never
   * outlive its lease in anyone's eyes. */
  protected override expiredBy(): string | null {
    const own = super.expiredBy();
    if (own) return own;
    const left = this.rec.expires_at * 1000 - this.clock.now();
    if (left <= safetyMarginMs(this.ttlMs)) {
      return `the lease's expiry time has passed by the wall clock (${(-left / 1000).toFixed(1)}s ago; did the clock jump?)`;
    }
    return null;
  }

  async raiseGeneration(atLeast: number): Promise<void> {
    if (atLeast <= this.rec.generation) return;
    const check = this.verify();
    if (!check.ok) return;
    const generation = claimGeneration(this.paths, atLeast);
    this.rec = { ...this.rec, generation };
    replaceFile(this.paths.lock, serializeLockRecord(this.rec));
  }

  annotate(fields: Partial<LockOwnerInfo>): void {
    this.withOwner(fields);
    this.refresh();
  }

  async release(): Promise<ReleaseResult> {
    return this.releaseSync();
  }

  releaseSync(): ReleaseResult {
    this.stopHeartbeat();
    clearTimeout(this.childTimer);
    this.childTimer = undefined;
    if (this.released) return { released: true };
    if (this.lostInfo) return { released: false, reason: 'NOT_OWNER', holder: null, why: this.lostInfo.why };
    let current: LockRecord | null = null;
    try {
      const raw = readNoFollow(this.paths.lock);
      current = raw === null ? null : parseLockRecord(raw);
    } catch {
      current = null;
    }
    if (current?.lock_id !== this.rec.lock_id) {
      return {
        released: false,
        reason: 'NOT_OWNER',
        holder: current,
        why: current ? `the lock belongs to pid ${current.owner.pid} now; left it alone` : 'the lock file was already gone',
      };
    }
    unlinkQuiet(this.paths.lock);
    this.released = true;
    lastReleased.set(this.paths.lock, this.clock.monotonic());
    this.closeChildJournal(true);
    return { released: true };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.releaseSync();
  }

  private closeChildJournal(remove: boolean): void {
    this.childJournal.close(remove);
  }

  private lose(why: string): RefreshResult {
    return { ok: false, lost: this.markLost(why) };
  }

  protected override onLost(): void {
    clearTimeout(this.childTimer);
    this.closeChildJournal(false); // the reclaimer reads it
  }
}
