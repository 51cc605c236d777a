// Which schedules are fixed-time (Vixie cron's rule), and the pattern croner is handed so that it
// agrees. The fire times themselves are tested in test/config/schedule.test.ts.

import { CronPattern } from 'croner';
import { describe, expect, it } from 'vitest';
import { cronProblem } from '../../src/config/cron.js';
import { cronerPattern, isFixedTime, NICKNAMES } from '../../src/config/dialect.js';
import { rng } from '../helpers/rng.js';

describe('isFixedTime: neither minute nor hour starts with * (Vixie cron)', () => {
  it.each([
    ['30 2 * * *', true],
    ['0 1,13 * * *', true],
    ['30 1-3 * * *', true],
    ['0 0-23/2 * * *', true],
    ['0 1,*/2 * * *', true], // Vixie looks at the first character only
    ['*/30 * * * *', false],
    ['0 * * * *', false],
    ['0 */2 * * *', false],
    ['*/15 2 * * *', false],
    ['0 ? * * *', false], // croner reads ? as *
    ['*/10 30 2 * * *', true], // seconds first: cron has none, they do not count
    ['0 * 2 * * *', false],
    ['0 30 * * * *', false],
    ['@yearly', true],
    ['@annually', true],
    ['@monthly', true],
    ['@weekly', true],
    ['@daily', true],
    ['@MIDNIGHT', true],
    ['@hourly', false],
  ])('%j -> %s', (pattern, fixed) => {
    expect(isFixedTime(pattern)).toBe(fixed);
  });
});

describe('cronerPattern', () => {
  it('leaves patterns croner already classifies alike untouched', () => {
    for (const p of [
      '30 2 * * *',
      '0 1,13 * * *',
      ' 30 1-3 * * MON ',
      '*/30 * * * *',
      '0 */2 * * *',
      '@daily',
      '@hourly',
      '5 30 2 * * *',
    ]) {
      expect(cronerPattern(p)).toBe(p.trim());
    }
  });

  it('spells out steps and wildcards in the time fields of a fixed-time pattern, keeping the date fields', () => {
    expect(cronerPattern('0 0-23/2 * * *')).toBe('0 0 0,2,4,6,8,10,12,14,16,18,20,22 * * *');
    expect(cronerPattern('*/10 30 2 * * *')).toBe('0,10,20,30,40,50 30 2 * * *');
    expect(cronerPattern('* 30 2 * * *')).toBe('0-59 30 2 * * *');
    expect(cronerPattern('0,30 9-17/4 ? * MON#2')).toBe('0 0,30 9,13,17 ? * MON#2');
    expect(cronerPattern('0 1,*/8 L * *')).toBe('0 0 0-1,8,16 L * *');
  });

  it("throws croner's own error for an invalid pattern it has to parse", () => {
    expect(() => cronerPattern('0 0-23/2 * * MON#6')).toThrow(/nth weekday out of range/);
    expect(cronProblem('0 0-23/2 * * MON#6')).toMatch(/^nth weekday out of range/);
  });

  it('fixed-seed randomized: croner (fixedTimeRule no-wildcard) classifies the translation as isFixedTime does, with the same times', () => {
    const r = rng(11);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    for (let i = 0; i < 300; i++) {
      const seconds = r() < 0.5 ? [] : [timeField(r, 59)];
      const pattern = [
        ...seconds,
        timeField(r, 59),
        timeField(r, 23),
        pick(['*', '1', 'L', '?']),
        pick(['*', '3-10']),
        pick(['*', 'MON', '?']),
      ].join(' ');
      const original = new CronPattern(pattern, undefined, { mode: '5-or-6-parts' });
      const translated = new CronPattern(cronerPattern(pattern), undefined, {
        mode: '5-or-6-parts',
        fixedTimeRule: 'no-wildcard',
      });
      expect(translated.isFixedTime, pattern).toBe(isFixedTime(pattern));
      for (const f of ['second', 'minute', 'hour', 'day', 'month', 'dayOfWeek'] as const)
        expect(translated[f], `${pattern} ${f}`).toEqual(original[f]);
      expect(translated.lastDayOfMonth).toBe(original.lastDayOfMonth);
    }
  });
});

describe('nicknames', () => {
  it('the error lists every nickname accepted', () => {
    expect(cronProblem('@reboot')).toMatch(/^@reboot is not a time: .*"catchUp": "latest".*systemd unit/);
    for (const nickname of NICKNAMES.keys()) expect(cronProblem(nickname), nickname).toBeNull();
  });
});

/** A random seconds, minutes or hours field: *, a step, a value, a range, a stepped range or a list. */
function timeField(r: () => number, max: number): string {
  const v = (): number => Math.floor(r() * (max + 1));
  const range = (): string => {
    const a = v();
    return `${a}-${Math.min(max, a + Math.floor(r() * 12))}`;
  };
  const kind = Math.floor(r() * 7);
  if (kind === 0) return '*';
  if (kind === 1) return `*/${1 + Math.floor(r() * 10)}`;
  if (kind === 2) return `${v()}`;
  if (kind === 3) return range();
  if (kind === 4) return `${range()}/${1 + Math.floor(r() * 4)}`;
  if (kind === 5) return [v(), range(), v()].join(',');
  return `${v()},*/${2 + Math.floor(r() * 10)}`;
}
