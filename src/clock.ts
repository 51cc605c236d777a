// The clock is injected everywhere time matters: lease expiry, missed ticks and
// waits are tested with a fake clock; production uses the wall clock for timestamps that other
// processes read, and the monotonic clock for durations a process measures itself.

export interface Clock {
  /** Wall-clock epoch milliseconds (what goes into files other processes read). */
  now(): number;
  /** Monotonic milliseconds; only differences are meaningful. Immune to wall-clock jumps. */
  monotonic(): number;
  /** Resolves after `ms`, or early (without throwing) when `signal` aborts. `unref`: the wait
   * alone does not keep the process up (a process that is done exits; the sleep never ends). */
  sleep(ms: number, signal?: AbortSignal, opts?: { unref?: boolean }): Promise<void>;
}

/** Monotonic milliseconds (only differences mean anything). Not `performance.now()`: Node loads
 * perf_hooks and a dozen modules behind that global, ≈ 1 MB of a scheduler's memory. */
export function monotonicMs(): number {
  const [s, ns] = process.hrtime();
  return s * 1e3 + ns / 1e6;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: monotonicMs,
  sleep: (ms, signal, opts) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      if (opts?.unref) timer.unref();
      signal?.addEventListener('abort', done, { once: true });
    }),
};

/** A manually advanced clock for tests of pure timing logic. */
export class ManualClock implements Clock {
  private wall: number;
  private mono = 0;
  private sleepers: { until: number; resolve: () => void }[] = [];

  constructor(startMs = Date.UTC(2026, 10, 29, 19, 0, 0)) {
    this.wall = startMs;
  }

  now(): number {
    return this.wall;
  }

  monotonic(): number {
    return this.mono;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const entry = {
        until: this.mono + ms,
        resolve: () => {
          signal?.removeEventListener('abort', entry.resolve);
          this.sleepers = this.sleepers.filter((s) => s !== entry);
          resolve();
        },
      };
      this.sleepers.push(entry);
      signal?.addEventListener('abort', entry.resolve, { once: true });
    });
  }

  /** How many sleeps are waiting for the clock to move (a test advances it once they are). */
  get sleeping(): number {
    return this.sleepers.length;
  }

  /** Moves both clocks forward and wakes the sleepers whose time has come. */
  advance(ms: number): void {
    this.wall += ms;
    this.mono += ms;
    const due = this.sleepers.filter((s) => s.until <= this.mono);
    this.sleepers = this.sleepers.filter((s) => s.until > this.mono);
    for (const s of due) s.resolve();
  }

  /** Moves only the wall clock (an NTP step or a manual `date -s`). */
  jumpWall(ms: number): void {
    this.wall += ms;
  }
}

/** A signal that aborts when any of `signals` does, and `unlink()`, which takes its listeners off
 * the sources again. Call it once the signal is no longer needed: a long-lived source (the
 * scheduler's halt signal) would otherwise keep one listener per sleep for ever. */
export function anySignal(...signals: AbortSignal[]): { signal: AbortSignal; unlink(): void } {
  // one source: that signal itself (a fire under a lease alone, a sleep without a halt)
  if (signals.length === 1) return { signal: signals[0]!, unlink: () => {} };
  const both = new AbortController();
  const linked: [AbortSignal, () => void][] = [];
  for (const s of signals) {
    if (s.aborted) {
      both.abort(s.reason);
      break;
    }
    const onAbort = (): void => both.abort(s.reason);
    s.addEventListener('abort', onAbort, { once: true });
    linked.push([s, onAbort]);
  }
  // removed by hand: an AbortController to unlink them would build an AbortError for each call
  return { signal: both.signal, unlink: () => linked.forEach(([s, f]) => s.removeEventListener('abort', f)) };
}
