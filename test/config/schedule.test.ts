// Fire times on DST days, as cron (Vixie/Debian) computes them: a schedule whose minute and hour
// fields do not start with * is fixed-time (once in a repeated hour, at the first minute after a
// skipped one); the others run in both passes of a repeated hour and skip times in a gap. Every
// case is checked in the three places that compute fire times: `validate` (cronSchedule), the
// scheduler (lightSchedule) and `routine list` (the calculator cronProblem hands over).
//
// 2026 transitions, checked with Intl: Europe/Berlin 03-29 02:00 CET -> 03:00 CEST and 10-25
// 03:00 CEST -> 02:00 CET; America/New_York 03-08 02:00 EST -> 03:00 EDT and 11-01 02:00 EDT ->
// 01:00 EST; Australia/Lord_Howe 04-05 02:00 (+11) -> 01:30 (+10:30) and 10-04 02:00 (+10:30) ->
// 02:30 (+11); America/Havana 03-08 00:00 -> 01:00 and 11-01 01:00 -> 00:00.

import { describe, expect, it } from 'vitest';
import { cronProblem } from '../../src/config/cron.js';
import { cronSchedule, lightSchedule, nextRuns, type Schedule } from '../../src/config/schedule.js';
import { rng } from '../helpers/rng.js';

/** What `routine list` uses: the croner calculator cronProblem passes to its callback. */
function listSchedule(pattern: string, zone: string): Schedule {
  let schedule: Schedule | undefined;
  expect(
    cronProblem(pattern, zone, (cron) => {
      schedule = {
        next: (from) => cron.nextRun(from),
        previous: (at) => cron.previousRuns(1, new Date(at.getTime() + 1))[0] ?? null,
      };
    }),
  ).toBeNull();
  return schedule!;
}

const PLACES = { validate: cronSchedule, scheduler: lightSchedule, 'routine list': listSchedule };

const iso = (dates: Date[]): string[] => dates.map((d) => d.toISOString());

interface Case {
  what: string;
  pattern: string;
  zone: string;
  /** An instant before the first expected run. */
  from: string;
  /** The next runs from `from`, as cron has them (local time in the comment). */
  runs: string[];
}

const CASES: Case[] = [
  // Fall back: a repeated hour runs a fixed-time list or range once, on its first pass.
  {
    what: 'fall-back list',
    pattern: '0 1,13 * * *',
    zone: 'America/New_York',
    from: '2026-10-31T16:00:00Z',
    runs: [
      '2026-10-31T17:00:00.000Z',
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T18:00:00.000Z',
      '2026-11-02T06:00:00.000Z',
    ],
  }, // 13:00 EDT, 01:00 EDT (not 01:00 EST), 13:00 EST, 01:00 EST
  {
    what: 'fall-back range',
    pattern: '30 1-2 * * *',
    zone: 'America/New_York',
    from: '2026-10-31T16:00:00Z',
    runs: ['2026-11-01T05:30:00.000Z', '2026-11-01T07:30:00.000Z', '2026-11-02T06:30:00.000Z'],
  }, // 01:30 EDT, 02:30 EST, 01:30 EST
  {
    what: 'fall-back list',
    pattern: '30 2,14 * * *',
    zone: 'Europe/Berlin',
    from: '2026-10-24T12:00:00Z',
    runs: ['2026-10-24T12:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-25T13:30:00.000Z'],
  }, // 14:30 CEST, 02:30 CEST (not CET), 14:30 CET
  {
    what: 'fall-back range',
    pattern: '30 1-3 * * *',
    zone: 'Europe/Berlin',
    from: '2026-10-24T12:00:00Z',
    runs: [
      '2026-10-24T23:30:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T02:30:00.000Z',
      '2026-10-26T00:30:00.000Z',
    ],
  }, // 01:30 CEST, 02:30 CEST, 03:30 CET, 01:30 CET
  {
    what: 'fall-back list',
    pattern: '40 1,13 * * *',
    zone: 'Australia/Lord_Howe',
    from: '2026-04-04T00:00:00Z',
    runs: [
      '2026-04-04T02:40:00.000Z',
      '2026-04-04T14:40:00.000Z',
      '2026-04-05T03:10:00.000Z',
      '2026-04-05T15:10:00.000Z',
    ],
  }, // 13:40 +11, 01:40 +11 (not +10:30), 13:40 +10:30, 01:40 +10:30
  {
    what: 'fall-back range',
    pattern: '45 0-1 * * *',
    zone: 'Australia/Lord_Howe',
    from: '2026-04-04T00:00:00Z',
    runs: ['2026-04-04T13:45:00.000Z', '2026-04-04T14:45:00.000Z', '2026-04-05T14:15:00.000Z'],
  }, // 00:45 +11, 01:45 +11 (not +10:30), 00:45 +10:30
  {
    what: 'fall-back range step',
    pattern: '0 0-23/2 * * *',
    zone: 'Europe/Berlin',
    from: '2026-10-24T21:00:00Z',
    runs: ['2026-10-24T22:00:00.000Z', '2026-10-25T00:00:00.000Z', '2026-10-25T03:00:00.000Z'],
  }, // 00:00 CEST, 02:00 CEST (not CET), 04:00 CET

  // Spring forward: a fixed-time list, range or step in the gap runs at its end, once.
  {
    what: 'spring list',
    pattern: '30 2,14 * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-28T12:00:00Z',
    runs: [
      '2026-03-28T13:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T12:30:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ],
  }, // 14:30 CET, 03:00 CEST, 14:30 CEST, 02:30 CEST
  {
    what: 'spring range',
    pattern: '30 1-3 * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-28T12:00:00Z',
    runs: [
      '2026-03-29T00:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T01:30:00.000Z',
      '2026-03-29T23:30:00.000Z',
    ],
  }, // 01:30 CET, 03:00 CEST (for 02:30), 03:30 CEST, 01:30 CEST
  {
    what: 'spring range meeting the end of the gap (once, where Vixie starts it twice)',
    pattern: '0 1-3 * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-28T12:00:00Z',
    runs: ['2026-03-29T00:00:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-29T23:00:00.000Z'],
  }, // 01:00 CET, 03:00 CEST, 01:00 CEST
  {
    what: 'spring range step',
    pattern: '0 0-23/2 * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-28T22:00:00Z',
    runs: ['2026-03-28T23:00:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-29T02:00:00.000Z'],
  }, // 00:00 CET, 03:00 CEST (for 02:00), 04:00 CEST
  {
    what: 'spring list',
    pattern: '30 2,14 * * *',
    zone: 'America/New_York',
    from: '2026-03-07T17:00:00Z',
    runs: ['2026-03-07T19:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-08T18:30:00.000Z'],
  }, // 14:30 EST, 03:00 EDT, 14:30 EDT
  {
    what: 'spring range',
    pattern: '15 1-3 * * *',
    zone: 'America/New_York',
    from: '2026-03-07T17:00:00Z',
    runs: [
      '2026-03-08T06:15:00.000Z',
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T07:15:00.000Z',
      '2026-03-09T05:15:00.000Z',
    ],
  }, // 01:15 EST, 03:00 EDT (for 02:15), 03:15 EDT, 01:15 EDT
  {
    what: 'spring range step',
    pattern: '0 0-23/2 * * *',
    zone: 'America/New_York',
    from: '2026-03-08T04:00:00Z',
    runs: ['2026-03-08T05:00:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-08T08:00:00.000Z'],
  }, // 00:00 EST, 03:00 EDT (for 02:00), 04:00 EDT
  {
    what: 'spring list',
    pattern: '15 2,14 * * *',
    zone: 'Australia/Lord_Howe',
    from: '2026-10-03T00:00:00Z',
    runs: ['2026-10-03T03:45:00.000Z', '2026-10-03T15:30:00.000Z', '2026-10-04T03:15:00.000Z'],
  }, // 14:15 +10:30, 02:30 +11 (for 02:15), 14:15 +11
  {
    what: 'spring range',
    pattern: '20 1-2 * * *',
    zone: 'Australia/Lord_Howe',
    from: '2026-10-03T00:00:00Z',
    runs: [
      '2026-10-03T14:50:00.000Z',
      '2026-10-03T15:30:00.000Z',
      '2026-10-04T14:20:00.000Z',
      '2026-10-04T15:20:00.000Z',
    ],
  }, // 01:20 +10:30, 02:30 +11 (for 02:20), 01:20 +11, 02:20 +11
  {
    what: 'spring range step',
    pattern: '0 0-23/2 * * *',
    zone: 'Australia/Lord_Howe',
    from: '2026-10-03T13:00:00Z',
    runs: ['2026-10-03T13:30:00.000Z', '2026-10-03T15:30:00.000Z', '2026-10-03T17:00:00.000Z'],
  }, // 00:00 +10:30, 02:30 +11 (for 02:00), 04:00 +11

  // Nicknames are fixed-time like the patterns they stand for (Havana changes at midnight).
  {
    what: 'spring nickname',
    pattern: '@daily',
    zone: 'America/Havana',
    from: '2026-03-06T12:00:00Z',
    runs: ['2026-03-07T05:00:00.000Z', '2026-03-08T05:00:00.000Z', '2026-03-09T04:00:00.000Z'],
  }, // 00:00 CST, 01:00 CDT (for 00:00), 00:00 CDT
  {
    what: 'fall-back nickname',
    pattern: '@midnight',
    zone: 'America/Havana',
    from: '2026-10-31T00:00:00Z',
    runs: ['2026-10-31T04:00:00.000Z', '2026-11-01T04:00:00.000Z', '2026-11-02T05:00:00.000Z'],
  }, // 00:00 CDT, 00:00 CDT (not CST), 00:00 CST
  {
    what: 'fixed-time with seconds (seconds first: they do not make it an interval)',
    pattern: '*/20 30 2 * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-28T12:00:00Z',
    runs: ['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-30T00:30:20.000Z'],
  }, // 03:00:00 CEST once, then 02:30:00 and 02:30:20 CEST

  // Interval jobs (minute or hour starts with *) are as croner computes them: both passes, gaps skipped.
  {
    what: 'interval in a repeat',
    pattern: '*/30 * * * *',
    zone: 'America/New_York',
    from: '2026-11-01T04:45:00Z',
    runs: [
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ],
  }, // 01:00, 01:30 EDT, 01:00, 01:30, 02:00 EST
  {
    what: 'hourly in a repeat',
    pattern: '0 * * * *',
    zone: 'America/New_York',
    from: '2026-11-01T04:45:00Z',
    runs: ['2026-11-01T05:00:00.000Z', '2026-11-01T06:00:00.000Z', '2026-11-01T07:00:00.000Z'],
  }, // 01:00 EDT, 01:00 EST, 02:00 EST
  {
    what: 'interval in a 30-minute repeat',
    pattern: '*/30 * * * *',
    zone: 'Australia/Lord_Howe',
    from: '2026-04-04T13:45:00Z',
    runs: [
      '2026-04-04T14:00:00.000Z',
      '2026-04-04T14:30:00.000Z',
      '2026-04-04T15:00:00.000Z',
      '2026-04-04T15:30:00.000Z',
    ],
  }, // 01:00, 01:30 +11, 01:30, 02:00 +10:30
  {
    what: '@hourly in a repeat',
    pattern: '@hourly',
    zone: 'America/Havana',
    from: '2026-11-01T03:30:00Z',
    runs: ['2026-11-01T04:00:00.000Z', '2026-11-01T05:00:00.000Z', '2026-11-01T06:00:00.000Z'],
  }, // 00:00 CDT, 00:00 CST, 01:00 CST
  {
    what: 'interval with a fixed hour in a repeat',
    pattern: '*/30 2 * * *',
    zone: 'Europe/Berlin',
    from: '2026-10-24T23:45:00Z',
    runs: [
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T01:30:00.000Z',
      '2026-10-26T01:00:00.000Z',
    ],
  }, // 02:00, 02:30 CEST, 02:00, 02:30 CET
  {
    what: 'interval in a gap',
    pattern: '30 * * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-29T00:00:00Z',
    runs: ['2026-03-29T00:30:00.000Z', '2026-03-29T01:30:00.000Z'],
  }, // 01:30 CET, 03:30 CEST: 02:30 skipped
  {
    what: 'stepped hours from * in a gap',
    pattern: '0 */2 * * *',
    zone: 'Europe/Berlin',
    from: '2026-03-28T22:00:00Z',
    runs: ['2026-03-28T23:00:00.000Z', '2026-03-29T02:00:00.000Z'],
  }, // 00:00 CET, 04:00 CEST: 02:00 skipped (0-23/2 runs it at 03:00)
  {
    what: 'interval with a fixed hour in a gap',
    pattern: '*/15 2 * * *',
    zone: 'America/New_York',
    from: '2026-03-07T12:00:00Z',
    runs: ['2026-03-09T06:00:00.000Z'],
  }, // 02:00 EDT on 03-09: nothing on 03-08
];

describe.each(Object.entries(PLACES))('DST days, as cron runs them: %s', (_place, make) => {
  it.each(CASES.map((c) => [`${c.what}: ${c.pattern} ${c.zone}`, c] as const))('%s', (_name, c) => {
    const s = make(c.pattern, c.zone);
    expect(iso(nextRuns(s, new Date(c.from), c.runs.length))).toEqual(c.runs);
  });

  it.each(CASES.map((c) => [`${c.what}: ${c.pattern} ${c.zone}`, c] as const))(
    'previous() walks the same runs back: %s',
    (_name, c) => {
      const s = make(c.pattern, c.zone);
      c.runs.forEach((run, i) => {
        const at = new Date(run);
        expect(s.previous(at)?.toISOString(), `at ${run}`).toBe(run);
        if (i > 0) expect(s.previous(new Date(at.getTime() - 1))?.toISOString(), `before ${run}`).toBe(c.runs[i - 1]);
      });
    },
  );
});

describe('previous() inside a repeated hour (catch-up)', () => {
  it('a fixed-time job looks back to the first pass, an interval job to the latest pass', () => {
    // 2026-11-01 06:40Z is 01:40 EST, on the second pass of New York's 01:00-01:59
    const at = new Date('2026-11-01T06:40:00Z');
    expect(lightSchedule('0 1,13 * * *', 'America/New_York').previous(at)?.toISOString()).toBe(
      '2026-11-01T05:00:00.000Z',
    );
    expect(lightSchedule('0 * * * *', 'America/New_York').previous(at)?.toISOString()).toBe('2026-11-01T06:00:00.000Z');
    // 03:10 CEST on Berlin's spring day: the 02:30 run happened at 03:00
    expect(
      lightSchedule('30 2,14 * * *', 'Europe/Berlin').previous(new Date('2026-03-29T01:10:00Z'))?.toISOString(),
    ).toBe('2026-03-29T01:00:00.000Z');
  });
});

describe('fixed-seed randomized: next() is a minute-by-minute simulation of cron', () => {
  // Windows of 8 hours on either side of each 2026 transition.
  const TRANSITIONS: [string, string][] = [
    ['Europe/Berlin', '2026-03-29T01:00:00Z'],
    ['Europe/Berlin', '2026-10-25T01:00:00Z'],
    ['America/New_York', '2026-03-08T07:00:00Z'],
    ['America/New_York', '2026-11-01T06:00:00Z'],
    ['Australia/Lord_Howe', '2026-04-04T15:00:00Z'],
    ['Australia/Lord_Howe', '2026-10-03T15:30:00Z'],
  ];

  it('for fixed-time and interval minute/hour fields in three zones', () => {
    const r = rng(20260329);
    const windows = TRANSITIONS.map(([zone, at]) =>
      wallMinutes(zone, Date.parse(at) - 8 * 3600_000, Date.parse(at) + 8 * 3600_000),
    );
    for (let i = 0; i < 60; i++) {
      const minute = field(r, 59);
      const hour = field(r, 23);
      const pattern = `${minute.text} ${hour.text} * * *`;
      const fixed = !minute.text.startsWith('*') && !hour.text.startsWith('*');
      const matches = (wall: number): boolean =>
        minute.values.has(wall % 60) && hour.values.has(Math.floor(wall / 60) % 24);
      for (const w of windows) {
        const expected = simulateCron(w, fixed, matches);
        const s = cronSchedule(pattern, w.zone);
        const got: string[] = [];
        for (let t = s.next(new Date(w.start - 1)); t && t.getTime() < w.end; t = s.next(t)) got.push(t.toISOString());
        expect(got, `${pattern} ${w.zone} around ${new Date(w.start).toISOString()}`).toEqual(expected);
        for (let k = 1; k < got.length; k++)
          expect(s.previous(new Date(Date.parse(got[k]!) - 1))?.toISOString()).toBe(got[k - 1]);
      }
    }
  });
});

interface Window {
  zone: string;
  start: number;
  end: number;
  /** The local wall-clock minute (minutes since 1970-01-01T00:00 local) of each minute from start. */
  walls: number[];
}

function wallMinutes(zone: string, start: number, end: number): Window {
  const f = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
  });
  const walls: number[] = [];
  for (let t = start; t < end; t += 60_000) {
    const p = Object.fromEntries(f.formatToParts(new Date(t)).map((x) => [x.type, Number(x.value)]));
    walls.push(Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!) / 60_000);
  }
  return { zone, start, end, walls };
}

/** Vixie cron's loop (cron.c), one real minute at a time, with our one deviation: after a
 * forward jump a fixed-time job runs once, however many of its times were skipped. */
function simulateCron(w: Window, fixed: boolean, matches: (wall: number) => boolean): string[] {
  const fires: string[] = [];
  let previous = w.walls[0]! - 1;
  let highest = previous;
  w.walls.forEach((wall, i) => {
    let fire: boolean;
    if (!fixed)
      fire = matches(wall); // wildcard jobs: every minute the clock shows, gaps skipped
    else if (wall <= highest)
      fire = false; // the clock went back: fixed-time jobs already ran
    else {
      // After a jump forward, the skipped minutes run now (Vixie: each of them; we: once).
      fire = false;
      for (let m = previous + 1; m <= wall; m++) fire ||= matches(m);
    }
    if (fire) fires.push(new Date(w.start + i * 60_000).toISOString());
    previous = wall;
    highest = Math.max(highest, wall);
  });
  return fires;
}

/** A minute or hour field and the values it matches: *, a step, a value, a range, a stepped range or a list. */
function field(r: () => number, max: number): { text: string; values: Set<number> } {
  const v = (): number => Math.floor(r() * (max + 1));
  const span = (a: number, b: number, step = 1): number[] =>
    Array.from({ length: Math.floor((b - a) / step) + 1 }, (_, k) => a + k * step);
  const kind = Math.floor(r() * 6);
  if (kind === 0 && max === 23) return { text: '*', values: new Set(span(0, max)) };
  if (kind <= 1) {
    const step = 2 + Math.floor(r() * 10);
    return { text: `*/${step}`, values: new Set(span(0, max, step)) };
  }
  if (kind === 2) {
    const a = v();
    return { text: `${a}`, values: new Set([a]) };
  }
  const a = v();
  const b = Math.min(max, a + Math.floor(r() * 6));
  if (kind === 3) return { text: `${a}-${b}`, values: new Set(span(a, b)) };
  if (kind === 4) {
    const step = 1 + Math.floor(r() * 3);
    return { text: `${a}-${b}/${step}`, values: new Set(span(a, b, step)) };
  }
  const c = v();
  return { text: `${c},${a}-${b}`, values: new Set([c, ...span(a, b)]) };
}
