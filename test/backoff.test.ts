// The one back-off helper: doubling pauses up to a cap, on the injected clock.

import { describe, expect, it } from 'vitest';
import { Backoff } from '../src/backoff.js';
import { ManualClock } from '../src/clock.js';

/** Runs `wait` and answers how far the clock had to move before it resolved. */
async function pauseOf(clock: ManualClock, wait: () => Promise<void>): Promise<number> {
  let done = false;
  const p = wait().then(() => {
    done = true;
  });
  let moved = 0;
  while (!done) {
    await Promise.resolve();
    if (done) break;
    clock.advance(1);
    moved++;
    await new Promise((r) => setImmediate(r));
  }
  await p;
  return moved;
}

describe('Backoff', () => {
  it('doubles from the first pause up to the cap, and starts over on reset', async () => {
    const clock = new ManualClock();
    const b = new Backoff(5, 30, clock);
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) seen.push(await pauseOf(clock, () => b.wait()));
    expect(seen).toEqual([5, 10, 20, 30, 30]);
    b.reset();
    expect(b.pendingMs).toBe(5);
    expect(await pauseOf(clock, () => b.wait())).toBe(5);
  });

  it('a wait is cut to capMs (time left before a deadline) and by its signal', async () => {
    const clock = new ManualClock();
    const b = new Backoff(40, 100, clock);
    expect(await pauseOf(clock, () => b.wait(undefined, 7))).toBe(7);
    expect(b.pendingMs).toBe(80); // the cap of one wait does not change the sequence
    const stop = new AbortController();
    const p = b.wait(stop.signal);
    expect(clock.sleeping).toBe(1);
    stop.abort();
    await p; // resolves without the clock moving
  });
});
