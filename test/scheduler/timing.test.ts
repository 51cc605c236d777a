import { describe, expect, it } from 'vitest';
import { cronSchedule, nextRuns } from '../../src/config/schedule.js';
import {
  MAX_SLEEP_MS,
  SLEPT_RECORD_CAP,
  STALL_REPLAY_MS,
  backwardStep,
  catchUpTime,
  clockWentBack,
  coverAfterStep,
  dueIds,
  missedTimes,
  nextFire,
  nextUncovered,
  sleepMs,
  sleptThrough,
} from '../../src/scheduler/timing.js';
import { stepText } from '../../src/duration.js';
import { rng } from '../helpers/rng.js';

const at = (iso: string): number => Date.parse(iso);

describe('schedule math (croner as a calculator)', () => {
  it('next is strictly after, previous is at or before', () => {
    const s = cronSchedule('*/15 * * * *');
    expect(s.next(new Date('2026-11-29T19:15:00Z'))?.toISOString()).toBe('2026-11-29T19:30:00.000Z');
    expect(s.previous(new Date('2026-11-29T19:15:00Z'))?.toISOString()).toBe('2026-11-29T19:15:00.000Z');
    expect(s.previous(new Date('2026-11-29T19:14:59Z'))?.toISOString()).toBe('2026-11-29T19:00:00.000Z');
  });

  it('supports seconds-first 6-field patterns and nicknames', () => {
    expect(
      nextRuns(cronSchedule('*/10 * * * * *'), new Date('2026-11-29T19:00:01Z'), 3).map((d) => d.toISOString()),
    ).toEqual(['2026-11-29T19:00:10.000Z', '2026-11-29T19:00:20.000Z', '2026-11-29T19:00:30.000Z']);
    expect(cronSchedule('@daily').next(new Date('2026-11-29T19:00:00Z'))?.toISOString()).toBe(
      '2026-11-30T00:00:00.000Z',
    );
  });

  it('honours the time zone', () => {
    const berlin = cronSchedule('0 3 * * *', 'Europe/Berlin');
    expect(berlin.next(new Date('2026-11-29T19:00:00Z'))?.toISOString()).toBe('2026-11-30T02:00:00.000Z'); // CET = UTC+1
    expect(berlin.next(new Date('2026-07-01T00:00:00Z'))?.toISOString()).toBe('2026-07-01T01:00:00.000Z'); // CEST = UTC+2
  });

  it('DST spring forward: a fixed time in the gap runs at the first valid time after it, once', () => {
    // Europe/Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST
    const s = cronSchedule('30 2 * * *', 'Europe/Berlin');
    const runs = nextRuns(s, new Date('2026-03-28T12:00:00Z'), 3).map((d) => d.toISOString());
    expect(runs).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z']);
  });

  it('DST fall back: a fixed time that occurs twice runs once; an interval job runs on both', () => {
    // Europe/Berlin 2026-10-25: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice
    const fixed = nextRuns(cronSchedule('30 2 * * *', 'Europe/Berlin'), new Date('2026-10-24T12:00:00Z'), 2).map((d) =>
      d.toISOString(),
    );
    expect(fixed).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
    const interval = nextRuns(cronSchedule('30 * * * *', 'Europe/Berlin'), new Date('2026-10-24T23:45:00Z'), 3).map(
      (d) => d.toISOString(),
    );
    expect(interval).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-25T01:30:00.000Z', '2026-10-25T02:30:00.000Z']);
  });
});

/** A field and its set of matching values, built together. */
function field(r: () => number, min: number, max: number): { text: string; values: Set<number> } {
  const pick = (): number => min + Math.floor(r() * (max - min + 1));
  const kind = Math.floor(r() * 4);
  if (kind === 0) return { text: '*', values: new Set(Array.from({ length: max - min + 1 }, (_, i) => min + i)) };
  if (kind === 1) {
    const step = 1 + Math.floor(r() * 10);
    const values = new Set<number>();
    for (let v = min; v <= max; v += step) values.add(v);
    return { text: `*/${step}`, values };
  }
  if (kind === 2) {
    const a = pick();
    const b = Math.min(max, a + Math.floor(r() * 10));
    return { text: `${a}-${b}`, values: new Set(Array.from({ length: b - a + 1 }, (_, i) => a + i)) };
  }
  const vs = [...new Set([pick(), pick(), pick()])].sort((x, y) => x - y);
  return { text: vs.join(','), values: new Set(vs) };
}

describe('fixed-seed randomized schedule math', () => {
  it('next(from) is the first minute after `from` that matches, by brute force (UTC)', () => {
    const r = rng(20261129);
    for (let i = 0; i < 150; i++) {
      const minute = field(r, 0, 59);
      const hour = field(r, 0, 23);
      const pattern = `${minute.text} ${hour.text} * * *`;
      const from = Date.UTC(
        2026,
        Math.floor(r() * 12),
        1 + Math.floor(r() * 28),
        Math.floor(r() * 24),
        Math.floor(r() * 60),
        Math.floor(r() * 60),
      );
      const got = cronSchedule(pattern).next(new Date(from))!.getTime();
      let expected = Math.floor(from / 60_000) * 60_000 + 60_000;
      while (!(
        minute.values.has(new Date(expected).getUTCMinutes()) && hour.values.has(new Date(expected).getUTCHours())
      ))
        expected += 60_000;
      expect(got, `${pattern} from ${new Date(from).toISOString()}`).toBe(expected);
    }
  });

  it('in zones with DST: next is strictly increasing and previous(next) = next', () => {
    const r = rng(42);
    const zones = ['Europe/Berlin', 'America/New_York', 'Australia/Sydney', 'Asia/Kolkata', 'UTC'];
    for (let i = 0; i < 60; i++) {
      const pattern = `${field(r, 0, 59).text} ${field(r, 0, 23).text} * * *`;
      const zone = zones[Math.floor(r() * zones.length)]!;
      const s = cronSchedule(pattern, zone);
      let t = new Date(Date.UTC(2026, 2, 27) + Math.floor(r() * 5) * 86_400_000); // around the March DST changes
      for (let k = 0; k < 20; k++) {
        const n = s.next(t)!;
        expect(n.getTime(), `${pattern} ${zone}`).toBeGreaterThan(t.getTime());
        expect(s.previous(n)?.getTime()).toBe(n.getTime());
        t = n;
      }
    }
  });
});

describe('loop decisions', () => {
  it('picks the due routines and sleeps until the next, at most MAX_SLEEP_MS', () => {
    const next = new Map<string, number | null>([
      ['a', at('2026-11-29T19:00:00Z')],
      ['b', at('2026-11-29T19:00:05Z')],
      ['c', null],
    ]);
    expect(dueIds(next, at('2026-11-29T19:00:00Z'))).toEqual(['a']);
    expect(sleepMs(next, at('2026-11-29T19:00:01Z'))).toBe(0);
    next.set('a', at('2026-11-29T20:00:00Z'));
    expect(sleepMs(next, at('2026-11-29T19:00:01Z'))).toBe(4000);
    next.set('b', at('2026-11-29T21:00:00Z'));
    expect(sleepMs(next, at('2026-11-29T19:00:01Z'))).toBe(MAX_SLEEP_MS);
    expect(sleepMs(new Map(), 0)).toBe(MAX_SLEEP_MS);
  });

  it('notices the wall clock going back', () => {
    expect(clockWentBack(10_000, 9_500)).toBe(false);
    expect(clockWentBack(10_000, 5_000)).toBe(true);
  });

  it('after a late wake, the next fire time continues from now (missed ticks are not replayed)', () => {
    const s = cronSchedule('*/5 * * * *');
    expect(nextFire(s, at('2026-11-29T19:27:00Z'))).toBe(at('2026-11-29T19:30:00Z'));
  });

  it('a wake-up a few seconds late (a stall) deals with every time it missed; later than STALL_REPLAY_MS, one late fire', () => {
    const s = cronSchedule('* * * * * *');
    const t0 = at('2026-11-29T19:00:00Z');
    expect(missedTimes(s, t0, t0 + 20, [])).toEqual([t0]);
    expect(missedTimes(s, t0, t0 + 2300, [])).toEqual([t0, t0 + 1000, t0 + 2000]);
    expect(missedTimes(s, t0, t0 + STALL_REPLAY_MS, [])).toEqual(Array.from({ length: 6 }, (_, i) => t0 + i * 1000));
    expect(missedTimes(s, t0, t0 + STALL_REPLAY_MS + 1, [])).toEqual([t0]);
    // times already dealt with (before a clock step) stay covered
    expect(missedTimes(s, t0, t0 + 3000, [{ from: t0, to: t0 + 2000 }])).toEqual([t0, t0 + 3000]);
    // a per-minute routine missed nothing more in a few seconds
    expect(missedTimes(cronSchedule('* * * * *'), t0, t0 + 4000, [])).toEqual([t0]);
  });

  it('later than STALL_REPLAY_MS: every other time slept through is returned to be recorded (issue 50, item 3), none already dealt with, at most SLEPT_RECORD_CAP', () => {
    const s = cronSchedule('* * * * * *');
    const t0 = at('2026-11-29T19:00:00Z');
    expect(sleptThrough(s, t0, t0 + STALL_REPLAY_MS, [])).toEqual({ times: [], more: 0 });
    expect(sleptThrough(s, t0, t0 + 12_300, [])).toEqual({
      times: Array.from({ length: 12 }, (_, i) => t0 + (i + 1) * 1000),
      more: 0,
    });
    expect(sleptThrough(s, t0, t0 + 12_300, [{ from: t0, to: t0 + 10_000 }]).times).toEqual([t0 + 11_000, t0 + 12_000]);
    const hour = sleptThrough(s, t0, t0 + 3_600_000, []);
    expect([hour.times.length, hour.more]).toEqual([SLEPT_RECORD_CAP, 3600 - SLEPT_RECORD_CAP]);
  });

  it('catch-up fires the latest missed time only when it passed after the last recorded one', () => {
    const s = cronSchedule('0 3 * * *');
    const now = at('2026-11-29T19:00:00Z');
    expect(catchUpTime(s, '2026-11-28T03:00:00.000Z', now)?.toISOString()).toBe('2026-11-29T03:00:00.000Z');
    expect(catchUpTime(s, '2026-11-29T03:00:00.000Z', now)).toBeNull();
    expect(catchUpTime(s, null, now)).toBeNull();
  });
});

describe('clock steps (SPEC §6)', () => {
  it('a backward step is the wall clock falling behind the monotonic one, beyond a tolerance', () => {
    expect(backwardStep({ wall: 10_000, mono: 0 }, { wall: 11_000, mono: 1_000 })).toBe(0);
    expect(backwardStep({ wall: 10_000, mono: 0 }, { wall: 5_000, mono: 30_000 })).toBe(35_000);
    expect(backwardStep({ wall: 10_000, mono: 0 }, { wall: 10_500, mono: 1_200 })).toBe(0); // 700 ms: within the tolerance
    expect(backwardStep({ wall: 10_000, mono: 0 }, { wall: 60_000, mono: 1_000 })).toBe(0); // forward
    // a faked monotonic clock that went back too: the wall clock alone
    expect(backwardStep({ wall: 10_000, mono: 5_000 }, { wall: 4_000, mono: 0 })).toBe(6_000);
  });

  it('times dealt with before a step back are covered, and skipped; times outside fire', () => {
    const s = cronSchedule('*/10 * * * * *');
    // dealt with (19:00:00.5, 19:00:30.5]; stepped back to 18:59:30.5
    const covered = coverAfterStep(
      [],
      at('2026-11-29T19:00:00.500Z'),
      at('2026-11-29T19:00:30.500Z'),
      at('2026-11-29T18:59:30.500Z'),
    );
    expect(covered).toEqual([{ from: at('2026-11-29T19:00:00.500Z'), to: at('2026-11-29T19:00:30.500Z') }]);
    const walk: string[] = [];
    for (let t: number | null = at('2026-11-29T18:59:30.500Z'); walk.length < 5 && t !== null;) {
      t = nextUncovered(s, t, covered);
      if (t !== null) walk.push(new Date(t).toISOString().slice(11, 19));
    }
    expect(walk).toEqual(['18:59:40', '18:59:50', '19:00:00', '19:00:40', '19:00:50']);
    // a routine scheduled after the covered stretch began owns only what came after
    expect(nextUncovered(s, at('2026-11-29T19:00:05Z'), covered, at('2026-11-29T19:00:15Z'))).toBe(
      at('2026-11-29T19:00:10Z'),
    );
  });

  it('covered stretches merge, and those wholly in the past are dropped', () => {
    const c = coverAfterStep(
      [
        { from: 100, to: 200 },
        { from: 10, to: 40 },
      ],
      150,
      300,
      50,
    );
    expect(c).toEqual([{ from: 100, to: 300 }]);
  });

  it('says a step as the log shows it', () => {
    expect(stepText(7_200_000)).toBe('2h0m0s');
    expect(stepText(200_000)).toBe('3m20s');
    expect(stepText(45_400)).toBe('45s');
  });
});
