// The runner's side of a lock's queue (turns.ts holds the pure bookkeeping): a fire awaits its
// turn here, and what the queue decides to start is woken.

import { LockTurns, type TurnRequest } from './turns.js';

/** What became of a request waiting for its turn. */
export type TurnOutcome = 'start' | 'superseded' | 'cancelled';

export class TurnGate {
  private readonly turns: LockTurns;
  private readonly waiters = new Map<string, (o: TurnOutcome) => void>();
  /** Each queued request's `queued` callback and whom it was last told it waits behind. */
  private readonly told = new Map<string, { behind: string; tell: (behind: string) => void }>();

  /** `slots`: how many of the queue's fires may hold the lock at once. */
  constructor(slots = 1) {
    this.turns = new LockTurns(slots);
  }

  /** The lock's slots changed (a reload). */
  resize(slots: number): void {
    this.wake(this.turns.resize(slots));
  }

  /** Resolves 'start' at once, or when the turn comes; `queued` is told whom it waits behind,
   * and told again each time the turn passes to another routine while it waits. */
  take(req: TurnRequest, queued: (behind: string) => void): Promise<TurnOutcome> {
    const ask = this.turns.ask(req);
    if (ask.now) return Promise.resolve('start');
    queued(ask.behind);
    this.told.set(req.id, { behind: ask.behind, tell: queued });
    return this.next(req.id);
  }

  /** The fire of `id` is over. `metOwn`: it met the lock held by a fire of ours; then, while that
   * fire is active, it goes back in the queue, and this resolves when its turn comes again; null
   * otherwise (its result stands). */
  done(id: string, metOwn: boolean): Promise<TurnOutcome> | null {
    const d = this.turns.done(id, metOwn);
    const again = d.requeued ? this.next(id) : null;
    this.wake(d.start);
    return again;
  }

  /** Gives a turn back unused (or forgets a request that was dropped). */
  leave(id: string): void {
    this.wake(this.turns.done(id).start);
  }

  waiting(id: string): void {
    this.wake(this.turns.waiting(id));
  }

  locked(id: string): void {
    this.turns.locked(id);
  }

  /** Drops the queued request of `id` (its next tick came first): its wait ends 'superseded'. */
  supersede(id: string): boolean {
    if (!this.turns.drop(id)) return false;
    this.settle(id, 'superseded');
    return true;
  }

  /** Drops every queued request (shutdown): their waits end 'cancelled'. */
  cancelAll(): void {
    for (const req of this.turns.queued()) if (this.turns.drop(req.id)) this.settle(req.id, 'cancelled');
  }

  isQueued(id: string): boolean {
    return this.turns.isQueued(id);
  }

  activeId(): string | null {
    return this.turns.activeId();
  }

  private next(id: string): Promise<TurnOutcome> {
    return new Promise((resolve) => this.waiters.set(id, resolve));
  }

  private settle(id: string, outcome: TurnOutcome): void {
    const w = this.waiters.get(id);
    this.waiters.delete(id);
    this.told.delete(id);
    w?.(outcome);
  }

  private wake(reqs: readonly TurnRequest[]): void {
    for (const r of reqs) this.settle(r.id, 'start');
    // the turn went on: those still queued wait behind whoever has it now
    const now = this.turns.activeId();
    if (now === null) return;
    for (const [id, t] of this.told) {
      if (id === now || t.behind === now || !this.turns.isQueued(id)) continue;
      t.behind = now;
      t.tell(now);
    }
  }
}
