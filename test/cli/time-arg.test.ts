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
    expect(parseTimeArg('--since', 'yesterday', NOW)).toBe(new Date(midnight.getFullYear(), midnight.getMonth(), midnight.getDate() - 1).getTime());
  });

  it('names the flag and what it takes for anything else', () => {
    for (const bad of ['last night', '2h ago', '2026-13-45', '2026-02-31', '2026-04-31T10:00', '', 'tomorrow']) {
      expect(() => parseTimeArg('--until', bad, NOW), bad).toThrow(/^--until ".*" is not a time: give ISO-8601/);
    }
  });
});
