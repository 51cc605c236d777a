// The scheduler's own queue for one lock (SPEC §6 "The scheduler never competes with itself",
// §4.16): routines of one scheduler due together, or due while another of its routines holds
// their lock, wait here and start one after another (N at once for a lock of N slots). Only a lock
// held by something else is a busy skip. Pure bookkeeping (no I/O, no timers, no promises), like
// timing.ts. Order, waiters and queued skips: docs/design.md "The scheduler's turns".

export interface TurnRequest {
  /** The routine. At most one request per routine is queued or active. */
  id: string;
  scheduledAt: number;
  /** The routine's index in the config. */
  order: number;
  /** What the fire does when a foreign holder has the lock. */
  ifBusy: 'skip' | 'wait';
}

interface Active {
  req: TurnRequest;
  /** It waits for a lock that someone else holds. */
  waiting: boolean;
}

export type Ask = { now: true } | { now: false; behind: string };

export type Done = { requeued: boolean; start: TurnRequest[] };

export class LockTurns {
  /** The requests whose fires have a turn: at most one per slot of the lock. */
  private readonly holders: Active[] = [];
  /** A `skip` request trying the lock while a holder waits for a foreign one. */
  private trying: TurnRequest | null = null;
  private readonly queue: { req: TurnRequest; seq: number }[] = [];
  private seq = 0;

  /** `slots`: how many may hold the lock at once (a named lock's slots; 1 for the exec lock). */
  constructor(private slots = 1) {}

  /** The lock's slots changed (a reload): what may start now. */
  resize(slots: number): TurnRequest[] {
    this.slots = slots;
    return this.dispatch();
  }

  /** A request may start now, or waits behind the routine named. */
  ask(req: TurnRequest): Ask {
    if (this.holders.length < this.slots && this.trying === null && this.queue.length === 0) {
      this.holders.push({ req, waiting: false });
      return { now: true };
    }
    if (this.holders.some((h) => h.waiting) && this.trying === null && req.ifBusy === 'skip') {
      this.trying = req;
      return { now: true };
    }
    this.insert(req);
    return { now: false, behind: this.trying?.id ?? this.holders[0]?.req.id ?? this.queue[0]!.req.id };
  }

  /** The fire of `id` waits for a lock held by someone else: a queued `skip` request may try. */
  waiting(id: string): TurnRequest[] {
    const h = this.holders.find((x) => x.req.id === id);
    if (h) h.waiting = true;
    return this.dispatch();
  }

  /** The fire of `id` holds the lock now. */
  locked(id: string): void {
    const h = this.holders.find((x) => x.req.id === id);
    if (h) h.waiting = false;
  }

  /** The fire of `id` is over (its lock released). `metOwn`: it found the lock held by a fire of
   * this scheduler; if such a fire is still active it goes back in the queue (no skip), else it
   * was a real busy skip. Returns whether it was requeued and what starts now. */
  done(id: string, metOwn = false): Done {
    let req: TurnRequest | null = null;
    const i = this.holders.findIndex((h) => h.req.id === id);
    if (i !== -1) {
      req = this.holders[i]!.req;
      this.holders.splice(i, 1);
    } else if (this.trying?.id === id) {
      req = this.trying;
      this.trying = null;
    }
    const othersActive = this.holders.length > 0 || this.trying !== null;
    const requeued = req !== null && metOwn && othersActive;
    if (requeued) {
      // another active fire has the lock: no holder waits for a foreign one
      for (const h of this.holders) h.waiting = false;
      this.insert(req!);
    }
    return { requeued, start: this.dispatch() };
  }

  /** Takes a queued request out (its routine's next tick came first, or shutdown). */
  drop(id: string): TurnRequest | null {
    const i = this.queue.findIndex((q) => q.req.id === id);
    return i === -1 ? null : this.queue.splice(i, 1)[0]!.req;
  }

  isQueued(id: string): boolean {
    return this.queue.some((q) => q.req.id === id);
  }

  /** The routine whose fire has the turn (or tries the lock), for "behind <id>". */
  activeId(): string | null {
    return this.holders[0]?.req.id ?? this.trying?.id ?? null;
  }

  queued(): TurnRequest[] {
    return this.queue.map((q) => q.req);
  }

  private insert(req: TurnRequest): void {
    const entry = { req, seq: this.seq++ };
    const before = (a: typeof entry, b: typeof entry): boolean =>
      a.req.scheduledAt !== b.req.scheduledAt
        ? a.req.scheduledAt < b.req.scheduledAt
        : a.req.order !== b.req.order
          ? a.req.order < b.req.order
          : a.seq < b.seq;
    let i = this.queue.length;
    while (i > 0 && before(entry, this.queue[i - 1]!)) i--;
    this.queue.splice(i, 0, entry);
  }

  /** What may start: the queue's head while a slot is free (and nothing tries the lock); a
   * `skip` request to try the lock while a holder waits for a foreign one. */
  private dispatch(): TurnRequest[] {
    const start: TurnRequest[] = [];
    while (this.holders.length < this.slots && this.trying === null && this.queue.length > 0) {
      const next = this.queue.shift()!;
      this.holders.push({ req: next.req, waiting: false });
      start.push(next.req);
    }
    if (start.length > 0) return start;
    if (this.holders.some((h) => h.waiting) && this.trying === null) {
      const i = this.queue.findIndex((q) => q.req.ifBusy === 'skip');
      if (i === -1) return [];
      this.trying = this.queue.splice(i, 1)[0]!.req;
      return [this.trying];
    }
    return [];
  }
}
