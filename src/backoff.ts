// One doubling pause for every retry loop (the lock's waiters, record and spool retries, the
// database writers, notification delivery): the first pause, then twice the last up to a cap,
// slept on the injected Clock so tests drive it with a ManualClock and a wall-clock step never
// shortens or stretches it.

import { systemClock, type Clock } from './clock.js';

export class Backoff {
  private next: number;

  constructor(
    private readonly firstMs: number,
    private readonly maxMs: number = Infinity,
    private readonly clock: Clock = systemClock,
  ) {
    this.next = firstMs;
  }

  /** The pause the next wait() takes. */
  get pendingMs(): number {
    return this.next;
  }

  /** Sleeps the next pause (at most `capMs`), cut short when `signal` aborts; the pause after
   * it is twice as long, up to the cap. */
  async wait(signal?: AbortSignal, capMs = Infinity): Promise<void> {
    const ms = Math.min(this.next, capMs);
    this.next = Math.min(this.next * 2, this.maxMs);
    await this.clock.sleep(ms, signal);
  }

  /** Starts over from the first pause (something changed: no reason to wait long). */
  reset(): void {
    this.next = this.firstMs;
  }
}
