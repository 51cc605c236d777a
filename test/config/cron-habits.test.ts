// The 6-field expression that reads like a crontab line with a field too many (SPEC §10).

import { describe, expect, it } from 'vitest';
import { cronProblem } from '../../src/config/cron.js';
import { extraFieldWarning, habitWarnings, jitterWarning } from '../../src/config/cron-habits.js';

describe('extraFieldWarning', () => {
  it('warns on a crontab line with one * too many, showing both readings', () => {
    expect(extraFieldWarning('0 3 * * * *')).toBe(
      '"0 3 * * * *" has 6 fields, so it is seconds first: second 0 of minute 3, every hour. If "0 3 * * *" (5 fields: daily at 03:00) was meant, drop the last field',
    );
    expect(extraFieldWarning(' 30 4 * 1 * * ')).toBe(
      '"30 4 * 1 * *" has 6 fields, so it is seconds first: second 30 of minute 4, every hour (day-of-month 1, month *). If "30 4 1 * *" (5 fields: minute 30 of hour 4) was meant, drop the last field',
    );
    expect(extraFieldWarning('0 9,17 * * * *')).toMatch(
      /If "0 9,17 \* \* \*" \(5 fields: minute 0 of hour 9,17, every day\)/,
    );
  });

  it('stays quiet for what reads as meant: seconds-first with an hour, every N seconds, a minute no hour could be, 5 fields, nicknames', () => {
    for (const s of [
      '0 0 3 * * *',
      '*/10 * * * * *',
      '0 */5 * * * *',
      '0 30 * * * *',
      '0 3 * * *',
      '@daily',
      '0 3 * * * 1',
      '61 3 * * * *',
    ])
      expect(extraFieldWarning(s), s).toBeNull();
  });
});

describe('cronProblem in our words', () => {
  it('names the field, the word and what is allowed where croner says "contains illegal characters"', () => {
    expect(cronProblem('0 9 * * mon-fry')).toBe('day-of-week "mon-fry": "fry" is not a day name (sun…sat, or 0-7)');
    expect(cronProblem('0 9 * jna *')).toBe('month "jna": "jna" is not a month name (jan…dec, or 1-12)');
    expect(cronProblem('0 nine * * *')).toBe('hour "nine": "nine" is not a number (0-23)');
    // names in any case, and croner's own letters, still pass
    for (const ok of ['0 9 * * MON-FRI', '0 9 * JAN,jul *', '0 9 L * *', '0 9 * * 5L', '0 9 * * sun#2'])
      expect(cronProblem(ok), ok).toBeNull();
  });

  it("keeps croner's words for what it alone refuses, without its Value/Type tail", () => {
    expect(cronProblem('0 0 * * MON-SUN#9')).toBe('nth weekday out of range, should be 1-5 or L; got 9');
  });
});

describe('jitterWarning', () => {
  const at = (...iso: string[]): number[] => iso.map((t) => Date.parse(t));
  it('warns when the jitter reaches the least time between the next fires, naming that time', () => {
    const hourly = at('2026-01-01T01:00:00Z', '2026-01-01T02:00:00Z', '2026-01-01T03:00:00Z');
    expect(jitterWarning(3600, hourly)).toBe(
      'jitterSeconds 3600 is not shorter than the 1 h between its fires: a tick that comes while a fire still waits out its jitter is skipped ("previous run still running"); keep the jitter under that time',
    );
    expect(jitterWarning(3599, hourly)).toBeNull();
    expect(jitterWarning(90, at('2026-01-01T00:00:00Z', '2026-01-01T00:01:30Z'))).toMatch(/the 90 s between/);
    expect(jitterWarning(45, at('2026-01-01T00:00:00Z', '2026-01-01T00:00:45Z'))).toMatch(/the 45 s between/);
    // weekdays: the least gap counts (Friday to Monday is three days, Monday to Tuesday one)
    const weekdays = at('2026-01-02T09:00:00Z', '2026-01-05T09:00:00Z', '2026-01-06T09:00:00Z');
    expect(jitterWarning(86_400, weekdays)).toMatch(/the 1 day between/);
    expect(jitterWarning(86_399, weekdays)).toBeNull();
  });

  it('says nothing without a jitter or with fewer than two fire times (a disabled routine has none)', () => {
    expect(jitterWarning(0, at('2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z'))).toBeNull();
    expect(jitterWarning(600, at('2026-01-01T00:00:00Z'))).toBeNull();
    expect(jitterWarning(600, [])).toBeNull();
    expect(
      habitWarnings(
        [
          { id: 'a', schedule: '* * * * *', jitter: 60 },
          { id: 'b', schedule: '* * * * *' },
        ],
        [at('2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z'), at('2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z')],
      ),
    ).toEqual([
      expect.stringMatching(/^routinely: warning: routine a: jitterSeconds 60 is not shorter than the 1 min/),
    ]);
  });
});
