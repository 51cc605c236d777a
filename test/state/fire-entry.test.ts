import { describe, expect, it } from 'vitest';
import { checkFireEntry, REASON_MAX } from '../../src/state/fire-entry.js';

describe('checkFireEntry: a line or row is input (SPEC §12)', () => {
  const good = {
    scheduled_at: '2026-01-01T00:00:00.000Z',
    started_at: '2026-01-01T00:00:00.000Z',
    finished_at: '2026-01-01T00:00:01.000Z',
    result: 'failure',
    reason: 'exit 1',
    exit_code: 1,
    run_id: 'r-1',
  };

  it('keeps a fire as written, and nothing else of the value', () => {
    expect(
      checkFireEntry({ ...good, trigger: 'retry', attempt: 2, id: 'abc', html: '<script>', owner: { pid: 1 } }),
    ).toEqual({ ...good, trigger: 'retry', attempt: 2, id: 'abc' });
  });

  it('refuses what is not a fire', () => {
    for (const v of [
      [1, 2, 3],
      'x',
      5,
      null,
      {},
      { ...good, result: 'maybe' },
      { ...good, scheduled_at: 5 },
      { ...good, exit_code: 1.5 },
      { ...good, reason: {} },
      { ...good, run_id: 'r'.repeat(300) },
      { ...good, started_at: 'x'.repeat(100) },
    ]) {
      expect(checkFireEntry(v), JSON.stringify(v).slice(0, 80)).toBe(null);
    }
  });

  it('cuts a reason past REASON_MAX and leaves out optional fields that are not what they should be', () => {
    const e = checkFireEntry({ ...good, reason: 'y'.repeat(30_000), trigger: 'cron', attempt: -1, key: 7 });
    expect(e?.reason).toBe(`${'y'.repeat(REASON_MAX)}…`);
    expect(e).not.toHaveProperty('trigger');
    expect(e).not.toHaveProperty('attempt');
    expect(e).not.toHaveProperty('key');
  });
});
