// The scheduler's own queue for the exec lock (SPEC §6 "The scheduler never competes with
// itself"): routines of one scheduler that are due together, or fall due while another of its
// routines holds the exec lock, wait here and start one after another — cron runs the jobs of a
// minute side by side, `flock -n` fails all but one of them, we run them all in turn. Only a lock
// held by something else (a manual command, `lock run`, another host) is a busy skip.
//
// Pure bookkeeping (no I/O, no timers, no promises), like timing.ts: the runner asks for a turn,
// says when its fire waits for a foreign holder, has the lock, or is done, and starts what this
// returns. Order: scheduled time, then config order, then arrival.
//
// While the turn's holder waits for a lock that someone else holds (ifBusy "wait"), the lock is
// not ours: a queued `skip` routine may try it then (one at a time), and is skipped as busy if it
// is still held, exactly as without a queue. A try that meets a lock held by a fire of this
// scheduler (the waiter got it first) is not a skip: it goes back in the queue.

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

export class ExecTurns {
  private holder: Active | null = null;
  /** A `skip` request trying the lock while the holder waits for a foreign one. */
  private trying: TurnRequest | null = null;
  private readonly queue: { req: TurnRequest; seq: number }[] = [];
  private seq = 0;

  /** A request may start now, or waits behind the routine named. */
  ask(req: TurnRequest): Ask {
    if (this.holder === null && this.trying === null && this.queue.length === 0) {
      this.holder = { req, waiting: false };
      return { now: true };
    }
    if (this.holder?.waiting && this.trying === null && req.ifBusy === 'skip') {
      this.trying = req;
      return { now: true };
    }
    this.insert(req);
    return { now: false, behind: this.trying?.id ?? this.holder?.req.id ?? this.queue[0]!.req.id };
  }

  /** The fire of `id` waits for a lock held by someone else: a queued `skip` request may try. */
  waiting(id: string): TurnRequest[] {
    if (this.holder?.req.id === id) this.holder.waiting = true;
    return this.dispatch();
  }

  /** The fire of `id` holds the exec lock now. */
  locked(id: string): void {
    if (this.holder?.req.id === id) this.holder.waiting = false;
  }

  /** The fire of `id` is over (its lock released). `metOwn`: it found the lock held by a fire of
   * this scheduler; if such a fire is still active it goes back in the queue (no skip), else it
   * was a real busy skip. Returns whether it was requeued and what starts now. */
  done(id: string, metOwn = false): Done {
    let req: TurnRequest | null = null;
    if (this.holder?.req.id === id) {
      req = this.holder.req;
      this.holder = null;
    } else if (this.trying?.id === id) {
      req = this.trying;
      this.trying = null;
    }
    const othersActive = this.holder !== null || this.trying !== null;
    const requeued = req !== null && metOwn && othersActive;
    if (requeued) {
      // the other active fire has the lock: the holder stopped waiting for a foreign one
      if (this.holder) this.holder.waiting = false;
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
    return this.holder?.req.id ?? this.trying?.id ?? null;
  }

  queued(): TurnRequest[] {
    return this.queue.map((q) => q.req);
  }

  private insert(req: TurnRequest): void {
    const entry = { req, seq: this.seq++ };
    const before = (a: typeof entry, b: typeof entry): boolean =>
      a.req.scheduledAt !== b.req.scheduledAt ? a.req.scheduledAt < b.req.scheduledAt : a.req.order !== b.req.order ? a.req.order < b.req.order : a.seq < b.seq;
    let i = this.queue.length;
    while (i > 0 && before(entry, this.queue[i - 1]!)) i--;
    this.queue.splice(i, 0, entry);
  }

  /** What may start: the queue's head when nothing is active; a `skip` request to try the lock
   * while the holder waits for a foreign one. */
  private dispatch(): TurnRequest[] {
    if (this.holder === null && this.trying === null) {
      const next = this.queue.shift();
      if (!next) return [];
      this.holder = { req: next.req, waiting: false };
      return [next.req];
    }
    if (this.holder?.waiting && this.trying === null) {
      const i = this.queue.findIndex((q) => q.req.ifBusy === 'skip');
      if (i === -1) return [];
      this.trying = this.queue.splice(i, 1)[0]!.req;
      return [this.trying];
    }
    return [];
  }
}
