// routine list's cache (list-cache.ts, upcoming.ts): a routine at an even step keeps ten minutes
// of fire times in a few bytes; what routine list counts out from it is what croner computes.

import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import {
  LIST_CACHE_FILE,
  listCacheKey,
  nextCached,
  nextCachedTimes,
  readListCache,
  timesOf,
  writeListCache,
} from '../../src/scheduler/list-cache.js';
import { cachedProject, cachedRoutines, ensureListCache } from '../../src/scheduler/upcoming.js';
import { VERSION } from '../../src/version.js';
import { ensureStateRoot } from '../../src/state/json-file.js';
import { cronSchedule } from '../../src/config/schedule.js';
import { zoneTime } from '../../src/zone-time.js';
import { testProject } from '../helpers/testdir.js';

const routine = (id: string, schedule: string, timezone?: string) => ({
  id,
  schedule,
  action: 'command',
  run: 'true',
  ...(timezone ? { timezone } : {}),
});

describe('the list cache of fire times', () => {
  const project = () =>
    loadProject({
      cwd: testProject({
        routines: [
          routine('sec', '* * * * * *', 'Europe/Berlin'),
          routine('ten', '*/10 * * * * *'),
          routine('seven', '*/7 * * * * *'),
          routine('daily', '0 3 * * *'),
          routine('dst', '* * * * * *', 'Europe/Berlin'),
        ],
      }),
    });

  it('covers ten minutes of an evenly firing routine, and every time counted out from it is the real one', () => {
    const now = Date.parse('2026-11-29T19:00:00.300Z');
    const cached = Object.fromEntries(cachedRoutines(project(), now).map((r) => [r.id, r]));
    expect(timesOf(cached.sec!)).toHaveLength(16);
    expect(cached.sec!.every).toEqual({ step: 1000, until: Date.parse('2026-11-29T19:10:00.000Z') });
    expect(cached.ten!.every).toEqual({ step: 10_000, until: Date.parse('2026-11-29T19:10:00.000Z') });
    // */7 restarts at each minute: not even, so only its listed times
    expect(cached.seven!.every).toBeUndefined();
    expect(cached.daily!.every).toBeUndefined();
    for (const [id, schedule, zone] of [
      ['sec', '* * * * * *', 'Europe/Berlin'],
      ['ten', '*/10 * * * * *', undefined],
    ] as const) {
      const s = cronSchedule(schedule, zone);
      for (let t = now; t < Date.parse('2026-11-29T19:09:59Z'); t += 37_123) {
        expect(nextCached(cached[id]!, t), `${id} at ${new Date(t).toISOString()}`).toEqual(
          zoneTime(s.next(new Date(t))!, zone),
        );
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

  it('is written whole where the state folder is, never makes a missing one, and never writes through a symlink', () => {
    const p = project();
    const now = Date.parse('2026-11-29T19:00:00.300Z');
    const write = () => writeListCache(cachedProject(p), 'key', cachedRoutines(p, now), now);
    // no state folder (removed under a running scheduler): an error, and no folder made
    expect(write).toThrow(/ENOENT|no such file/i);
    expect(existsSync(p.stateDir)).toBe(false);
    mkdirSync(p.stateDir, { mode: 0o700 });
    write();
    const cache = JSON.parse(readFileSync(join(p.stateDir, LIST_CACHE_FILE), 'utf8')) as {
      key: string;
      routines: unknown[];
    };
    expect([cache.key, cache.routines.length]).toEqual(['key', 5]);
    // a symlink planted at the cache's name is refused, and its target left as it was
    const target = join(p.root, 'elsewhere');
    rmSync(join(p.stateDir, LIST_CACHE_FILE));
    symlinkSync(target, join(p.stateDir, LIST_CACHE_FILE));
    expect(write).toThrow(/symbolic link/);
    expect(existsSync(target)).toBe(false);
  });

  it('is written again by a command that validated once any reader would run out (validate reads three times)', () => {
    const p = loadProject({ cwd: testProject({ routines: [routine('daily', '0 3 * * *', 'UTC')] }) });
    const key = listCacheKey(p.configPath, process.env, VERSION)!;
    ensureStateRoot(p.stateDir);
    const written = Date.parse('2026-11-29T02:00:00.000Z');
    writeListCache(cachedProject(p), key, cachedRoutines(p, written), written);
    // a day and a half later: the list still has its next time, validate's three are not there
    const later = written + 36 * 3600_000;
    const read = () => readListCache(p.stateDir, key)!.routines[0]!;
    expect(nextCached(read(), later)).not.toBeNull();
    expect(nextCachedTimes(read(), later)).toBeNull();
    // the scheduler writes it again before then: by the first of the three times validate reads
    expect(writeListCache(cachedProject(p), key, cachedRoutines(p, written), written)).toBe(
      Date.parse('2026-11-29T03:00:00.000Z'),
    );
    writeListCache(cachedProject(p), key, cachedRoutines(p, written), written);
    ensureListCache(p, later);
    expect(nextCachedTimes(read(), later)?.map((t) => new Date(t.at).toISOString())).toEqual([
      '2026-12-01T03:00:00.000Z',
      '2026-12-02T03:00:00.000Z',
      '2026-12-03T03:00:00.000Z',
    ]);
  });

  it("keeps a routine's times in one string, and reads back every time it wrote; an entry that is not a time is no time", () => {
    const now = Date.parse('2026-11-29T19:00:00.300Z');
    const p = project();
    for (const r of cachedRoutines(p, now)) {
      expect(typeof r.times).toBe('string');
      const times = timesOf(r)!;
      expect(times.length).toBeGreaterThanOrEqual(3);
      // each one what croner gives, in the routine's zone
      const def = p.config.routines.find((d) => d.id === r.id)!;
      const s = cronSchedule(def.schedule, def.timezone);
      let t = now;
      for (const got of times) {
        expect(got).toEqual(zoneTime(s.next(new Date(t))!, def.timezone));
        t = got.at;
      }
    }
    const daily = cachedRoutines(p, now).find((r) => r.id === 'daily')!;
    const first = timesOf(daily)![0]!;
    for (const damaged of [
      daily.times.replace(/^\d+/, 'x'),
      daily.times.replace(first.date, 'soon'),
      daily.times.replace(first.time, '7'),
      daily.times.replace(` ${first.zone},`, ` ${'Z'.repeat(65)},`),
      daily.times.replace(` ${first.zone},`, ` ${first.zone} more,`),
    ]) {
      expect(nextCached({ ...daily, times: damaged }, now), damaged).toBeNull();
      expect(timesOf({ times: damaged })).toBeNull();
    }
  });
});
