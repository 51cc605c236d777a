// The offset to the database clock (src/pg/db-clock.ts): pure math with fixed numbers, and the
// clock itself against a stand-in database whose clock is a known distance from ours.

import { describe, expect, it } from 'vitest';
import {
  DbClock,
  OFFSET_LOG_STEP_MS,
  SKEW_WARN_MS,
  bestSample,
  describeOffset,
  nextOffset,
  offsetNews,
  offsetSample,
  skewWarning,
} from '../../src/pg/db-clock.js';

describe('offset math', () => {
  it('offset = db_now − (t_send + rtt/2)', () => {
    // sent at 1000, answered 40 ms later; the database read 10 020 in the middle (1020 local)
    expect(offsetSample(1000, 40, 11_020)).toEqual({ offsetMs: 10_000, rttMs: 40 });
    // a host 10 s fast: the database is behind, the offset negative
    expect(offsetSample(20_000, 2, 10_001).offsetMs).toBe(-10_000);
  });

  it('the shortest round trip wins; nonsense samples are ignored', () => {
    const best = bestSample([
      { offsetMs: 9_950, rttMs: 120 },
      { offsetMs: 10_001, rttMs: 2 },
      { offsetMs: NaN, rttMs: 0 },
      { offsetMs: 10_030, rttMs: 60 },
    ]);
    expect(best).toEqual({ offsetMs: 10_001, rttMs: 2 });
    expect(bestSample([])).toBeNull();
  });

  it('a new offset only when the sample really differs (beyond its own uncertainty)', () => {
    expect(nextOffset(null, { offsetMs: 123, rttMs: 50 })).toBe(123);
    // within ±rtt/2 + 5 ms: jitter, keep the old value
    expect(nextOffset(100, { offsetMs: 120, rttMs: 40 })).toBe(100);
    expect(nextOffset(100, { offsetMs: 126, rttMs: 40 })).toBe(126);
    // a step (the host clock was set, NTP stepped)
    expect(nextOffset(-10_000, { offsetMs: 0.4, rttMs: 1 })).toBe(0.4);
  });

  it('logged when first measured and when it moves notably; a warning past the threshold', () => {
    expect(offsetNews(null, 3)).toBe('first');
    expect(offsetNews(3, 3 + OFFSET_LOG_STEP_MS - 1)).toBeNull();
    expect(offsetNews(3, 3 - OFFSET_LOG_STEP_MS)).toBe('changed');
    expect(skewWarning(SKEW_WARN_MS - 1)).toBeNull();
    expect(skewWarning(-SKEW_WARN_MS)).toMatch(/this host's clock is 1\.0s ahead of the database's/);
    expect(describeOffset(10_000)).toBe("this host's clock is 10.0s behind the database's");
    expect(describeOffset(-2.5)).toBe("this host's clock is 0.003s ahead of the database's");
  });
});

describe('DbClock', () => {
  /** A database whose clock runs `skewMs` ahead of ours and answers after `delayMs`. */
  const fakeDb = (skew: { ms: number }, delayMs = 2) => ({
    query: async <R>() => {
      await new Promise((r) => setTimeout(r, delayMs / 2));
      const ms = Date.now() + skew.ms;
      await new Promise((r) => setTimeout(r, delayMs / 2));
      return { rows: [{ ms }] as R[] } as never;
    },
  });

  it('now() follows the database clock once measured; steps are reported to listeners', async () => {
    const skew = { ms: 10_000 };
    const clock = new DbClock(fakeDb(skew));
    expect(clock.offsetMs).toBeNull();
    const seen: number[] = [];
    clock.onMeasured((o) => seen.push(o));
    await clock.measure(3);
    // off by at most half the round trip of the sample it rests on (the database read its clock
    // somewhere in between), however slow this machine is today
    const within = (): number => clock.lastSample!.rttMs / 2 + 1;
    expect(Math.abs(clock.offsetMs! - 10_000)).toBeLessThanOrEqual(within());
    // this machine's clock read on both sides of now(): a pause between the reads (a loaded
    // machine) widens the window, never fails the check
    const before = Date.now();
    const now = clock.now();
    const after = Date.now();
    expect(now - 10_000).toBeGreaterThanOrEqual(before - within() - 1);
    expect(now - 10_000).toBeLessThanOrEqual(after + within() + 1);
    skew.ms = -5_000;
    await clock.measure();
    expect(Math.abs(clock.offsetMs! + 5_000)).toBeLessThanOrEqual(within());
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe(clock.offsetMs);
  });

  it('a failed measurement keeps the last offset', async () => {
    let fail = false;
    const db = {
      query: async <R>() => {
        if (fail) throw new Error('database away');
        return { rows: [{ ms: Date.now() + 3_000 }] as R[] } as never;
      },
    };
    const clock = new DbClock(db);
    await clock.measure();
    const before = clock.offsetMs;
    fail = true;
    await expect(clock.measure()).rejects.toThrow(/away/);
    expect(clock.offsetMs).toBe(before);
  });
});
