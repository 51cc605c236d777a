// TIME of `routine history --since/--until` (SPEC §10).

import { describe, expect, it } from 'vitest';
import { parseTimeArg } from '../../src/cli/time-arg.js';

const NOW = Date.parse('2026-12-01T15:00:00Z');

describe('parseTimeArg', () => {
  it('reads relative times, ISO-8601 with and without a zone, and today/yesterday', () => {
    expect(parseTimeArg('--since', '2h', NOW)).toBe(NOW - 2 * 3_600_000);
    expect(parseTimeArg('--since', '30m', NOW)).toBe(NOW - 30 * 60_000);
    expect(parseTimeArg('--since', '1d', NOW)).toBe(NOW - 86_400_000);
    expect(parseTimeArg('--since', '1w', NOW)).toBe(NOW - 7 * 86_400_000);
    expect(parseTimeArg('--since', '2026-11-30T22:00Z', NOW)).toBe(Date.parse('2026-11-30T22:00:00Z'));
    expect(parseTimeArg('--since', '2026-11-30T22:00:00+01:00', NOW)).toBe(Date.parse('2026-11-30T21:00:00Z'));
    // no zone: this machine's local time, as journalctl reads it
    expect(parseTimeArg('--since', '2026-11-30 22:00', NOW)).toBe(new Date(2026, 10, 30, 22, 0).getTime());
    expect(parseTimeArg('--since', '2026-11-30', NOW)).toBe(new Date(2026, 10, 30).getTime());
    const midnight = new Date(NOW);
    midnight.setHours(0, 0, 0, 0);
    expect(parseTimeArg('--since', 'today', NOW)).toBe(midnight.getTime());
    expect(parseTimeArg('--since', 'yesterday', NOW)).toBe(
      new Date(midnight.getFullYear(), midnight.getMonth(), midnight.getDate() - 1).getTime(),
    );
  });

  it('takes what journalctl --since takes: a time of today, spans with a sign, "ago" and words, @epoch, tomorrow', () => {
    const at = (h: number, m: number, s = 0): number => {
      const d = new Date(NOW);
      d.setHours(h, m, s, 0);
      return d.getTime();
    };
    expect(parseTimeArg('--since', '10:00', NOW)).toBe(at(10, 0));
    expect(parseTimeArg('--since', '9:05:30', NOW)).toBe(at(9, 5, 30));
    const H = 3_600_000;
    for (const [text, ms] of [
      ['1h30m', 1.5 * H],
      ['1h 30m', 1.5 * H],
      ['-1h', H],
      ['2h ago', 2 * H],
      ['1 hour ago', H],
      ['2 hours ago', 2 * H],
      ['1 hour 30 min ago', 1.5 * H],
      ['90 min', 1.5 * H],
      ['45s', 45_000],
      ['3 days', 72 * H],
      ['1 week ago', 168 * H],
      ['- 2h', 2 * H],
    ] as const)
      expect(parseTimeArg('--since', text, NOW), text).toBe(NOW - ms);
    expect(parseTimeArg('--until', '+1h', NOW)).toBe(NOW + H);
    expect(parseTimeArg('--since', '1M', NOW)).toBe(NOW - 30.4375 * 24 * H);
    expect(parseTimeArg('--since', '@1764600000', NOW)).toBe(1_764_600_000_000);
    const midnight = new Date(NOW);
    midnight.setHours(0, 0, 0, 0);
    expect(parseTimeArg('--until', 'tomorrow', NOW)).toBe(
      new Date(midnight.getFullYear(), midnight.getMonth(), midnight.getDate() + 1).getTime(),
    );
    expect(parseTimeArg('--since', 'now', NOW)).toBe(NOW);
  });

  it('names the flag and what it takes for anything else', () => {
    for (const bad of [
      'last night',
      '2 fortnights ago',
      'ago',
      '-',
      '25:00',
      '10:61',
      '2026-13-45',
      '2026-02-31',
      '2026-04-31T10:00',
      '',
      '1h30',
      'h',
    ]) {
      expect(() => parseTimeArg('--until', bad, NOW), bad).toThrow(
        /^--until ".*" is not a time: give ISO-8601 \(2026-11-30, 2026-11-30 22:00, 2026-11-30T22:00Z\), a time of today \(10:00\), today, yesterday, or a span before now \(2h, 1h30m, -1h, 2h ago, 1 hour ago\)$/,
      );
    }
  });
});
