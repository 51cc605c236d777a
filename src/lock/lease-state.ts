// What every lease implementation keeps the same way: the record it holds, whether it was lost
// (and the AbortSignal that says so), its heartbeat timer, and the child groups it tracks.

import type { ChildGroup, LockRecord } from './record.js';
import type { LockLost, LockOwnerInfo } from './lease.js';

export abstract class LeaseState {
  protected rec: LockRecord;
  protected lostInfo: LockLost | null = null;
  protected released = false;
  protected timer: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private readonly controller = new AbortController();

  constructor(record: LockRecord) {
    this.rec = record;
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

  /** Checks the lease again the moment it would run out (`inMs` from now), whatever the
   * heartbeat is doing: a heartbeat that fails or hangs must not let us work past the lease.
   * Called after every confirmation. */
  protected armDeadline(inMs: number): void {
    clearTimeout(this.deadline);
    if (this.released || this.lostInfo) return;
    this.deadline = setTimeout(() => this.checkExpiry(), Math.max(0, inMs));
    this.deadline.unref();
  }

  /** Marks the lease lost if it has run out (each implementation knows its clocks). */
  protected abstract checkExpiry(): void;

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

  /** Marks the lease lost once (stopping the heartbeat and aborting `signal`). */
  protected markLost(why: string): LockLost {
    if (!this.lostInfo) {
      this.lostInfo = { code: 'LOCK_LOST', why };
      this.stopHeartbeat();
      this.onLost();
      this.controller.abort(this.lostInfo);
    }
    return this.lostInfo;
  }

  /** Implementation clean-up when the lease is lost (before `signal` aborts). */
  protected onLost(): void {}
}
