// routine list's cache (list-cache.ts, upcoming.ts): a routine at an even step keeps ten minutes
// of fire times in a few bytes; what routine list counts out from it is what croner computes.

import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { nextCached } from '../../src/scheduler/list-cache.js';
import { cachedRoutines } from '../../src/scheduler/upcoming.js';
import { cronSchedule } from '../../src/scheduler/schedule.js';
import { zoneTime } from '../../src/zone-time.js';
import { testProject } from '../helpers/testdir.js';

const routine = (id: string, schedule: string, timezone?: string) => ({ id, schedule, action: 'command', run: 'true', ...(timezone ? { timezone } : {}) });

describe('the list cache of fire times', () => {
  const project = () => loadProject({ cwd: testProject({ routines: [routine('sec', '* * * * * *', 'Europe/Berlin'), routine('ten', '*/10 * * * * *'), routine('seven', '*/7 * * * * *'), routine('daily', '0 3 * * *'), routine('dst', '* * * * * *', 'Europe/Berlin')] }) });

  it('covers ten minutes of an evenly firing routine, and every time counted out from it is the real one', () => {
    const now = Date.parse('2026-11-29T19:00:00.300Z');
    const cached = Object.fromEntries(cachedRoutines(project(), now).map((r) => [r.id, r]));
    expect(cached.sec!.upcoming).toHaveLength(16);
    expect(cached.sec!.every).toEqual({ step: 1000, until: Date.parse('2026-11-29T19:10:00.000Z') });
    expect(cached.ten!.every).toEqual({ step: 10_000, until: Date.parse('2026-11-29T19:10:00.000Z') });
    // */7 restarts at each minute: not even, so only its listed times
    expect(cached.seven!.every).toBeUndefined();
    expect(cached.daily!.every).toBeUndefined();
    for (const [id, schedule, zone] of [['sec', '* * * * * *', 'Europe/Berlin'], ['ten', '*/10 * * * * *', undefined]] as const) {
      const s = cronSchedule(schedule, zone);
      for (let t = now; t < Date.parse('2026-11-29T19:09:59Z'); t += 37_123) {
        expect(nextCached(cached[id]!, t), `${id} at ${new Date(t).toISOString()}`).toEqual(zoneTime(s.next(new Date(t))!, zone));
      }
    }
    // past its cover: run out (the full path computes it)
    expect(nextCached(cached.sec!, Date.parse('2026-11-29T19:10:00.000Z'))).toBeNull();
  });

  it('does not count across a change of the zone offset', () => {
    // Europe/Berlin: 2026-03-29 01:00Z, CET becomes CEST
    const cached = cachedRoutines(project(), Date.parse('2026-03-29T00:55:00.000Z')).find((r) => r.id === 'dst')!;
    expect(cached.every).toBeUndefined();
  });
});
