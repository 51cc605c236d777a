// croner's parsed patterns the scheduler keeps (config/cron-cache.ts): the few used last, and
// none once it settles idle (scheduler/settle-heap.ts).

import { describe, expect, it } from 'vitest';
import { forgetRecentCrons, recentCron } from '../../src/config/cron-cache.js';

describe('recent crons', () => {
  it('are kept for reuse, sixteen at most, and dropped by forgetRecentCrons', () => {
    const first = recentCron('0 * * * *', 'UTC');
    expect(recentCron('0 * * * *', 'UTC')).toBe(first);
    expect(recentCron('0 * * * *', 'Europe/Berlin')).not.toBe(first); // the zone is part of the key
    for (let m = 1; m <= 16; m++) recentCron(`${m} * * * *`, 'UTC');
    expect(recentCron('0 * * * *', 'UTC')).not.toBe(first); // the oldest of 17 went
    const kept = recentCron('5 * * * *', 'UTC');
    expect(recentCron('5 * * * *', 'UTC')).toBe(kept);
    forgetRecentCrons();
    const again = recentCron('5 * * * *', 'UTC');
    expect(again).not.toBe(kept);
    expect(again.nextRun(new Date('2026-12-05T10:00:00Z'))?.toISOString()).toBe('2026-12-05T10:05:00.000Z');
  });
});
