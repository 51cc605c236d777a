// /healthz (SPEC §11): 200 while the scheduler loop is alive and holds its scheduler lock, else 503
// with the reason. The loop says how long it means to sleep each time it goes to sleep (its
// observer hook); it has stalled when it is not back well after that. A loop whose event loop is
// blocked cannot be judged here (this server runs in the same process): the probe then times
// out, which a prober reads as a failure too.

import type { Clock } from '../clock.js';

export type Health = { ok: true } | { ok: false; reason: string };

/** How late past its announced wake-up the loop may be before it counts as stalled: timers on a
 * loaded machine run late by far less, a stuck loop never comes back. */
export const STALL_GRACE_MS = 10_000;

export interface LoopReading {
  /** Monotonic ms by which the loop said it would be awake again; null before its first sleep. */
  dueBy: number | null;
  nowMs: number;
  stopping: boolean;
  /** null while the scheduler lock is held; else why it is not. */
  lockProblem: string | null;
  graceMs?: number;
}

/** Pure judgement over one reading. */
export function judgeHealth(r: LoopReading): Health {
  // a lost lock is the cause of a stop that follows it: name it first
  if (r.lockProblem !== null) return { ok: false, reason: r.lockProblem };
  if (r.stopping) return { ok: false, reason: 'scheduler stopping' };
  if (r.dueBy === null) return { ok: false, reason: 'scheduler starting: the loop has not run yet' };
  const late = r.nowMs - r.dueBy;
  if (late > (r.graceMs ?? STALL_GRACE_MS)) {
    return {
      ok: false,
      reason: `scheduler loop stalled: no loop iteration for ${Math.round(late / 1000)}s past its wake-up time`,
    };
  }
  return { ok: true };
}

/** Follows the loop through the scheduler's observer hook. */
export class LoopWatch {
  private dueBy: number | null = null;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly lockProblem: () => string | null,
    private readonly graceMs = STALL_GRACE_MS,
  ) {}

  sleeping(sleepMs: number): void {
    this.dueBy = this.clock.monotonic() + sleepMs;
  }

  /** The scheduler was asked to stop: not healthy any more (a load balancer drains it). */
  stopping(): void {
    this.stopped = true;
  }

  health(): Health {
    return judgeHealth({
      dueBy: this.dueBy,
      nowMs: this.clock.monotonic(),
      stopping: this.stopped,
      lockProblem: this.lockProblem(),
      graceMs: this.graceMs,
    });
  }
}
