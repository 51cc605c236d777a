// The scheduler's side of `routine list`'s cache (list-cache.ts): each routine's next fire times
// in its zone, computed with the same croner calculator and DST rule as everything else.

import { readConfigBytes } from '../config/find.js';
import { croner } from '../config/cron.js';
import { cronerPattern } from '../config/dialect.js';
import type { Project } from '../config/load.js';
import { zoneTime } from '../zone-time.js';
import { VERSION } from '../version.js';
import { COVER_MS, UPCOMING_MAX, UPCOMING_MIN, listCacheKey, writeListCache, type CachedRoutine } from './list-cache.js';
import { routineZone } from './schedule.js';

/** The cache entries for a validated config at `nowMs`. */
export function cachedRoutines(project: Project, nowMs: number): CachedRoutine[] {
  return project.config.routines.map((def) => {
    const zone = routineZone(def, project);
    const upcoming = [];
    if (def.enabled) {
      // one parse per routine, dropped afterwards (see lightSchedule)
      const cron = croner(cronerPattern(def.schedule, zone), zone);
      let cursor: Date | null = new Date(nowMs);
      while (upcoming.length < UPCOMING_MAX && (upcoming.length < UPCOMING_MIN || upcoming.at(-1)!.at - nowMs < COVER_MS) && (cursor = cron.nextRun(cursor))) {
        upcoming.push(zoneTime(cursor, zone));
      }
    }
    return { id: def.id, schedule: def.schedule, timezone: zone ?? null, action: def.action, enabled: def.enabled, starvedAfterSkips: def.starvedAfterSkips, upcoming };
  });
}

/** Writes the cache for `project` when its config file still holds the text that validated (a
 * file edited since waits for the reload that follows); returns when to write again. */
export function cacheSchedules(project: Project, nowMs: number, env: NodeJS.ProcessEnv = process.env): number | null {
  if (project.backend.type !== 'file' || project.configText === undefined) return null;
  const key = listCacheKey(project.configPath, env, VERSION);
  let text: string;
  try {
    text = readConfigBytes(project.configPath).toString('utf8');
  } catch {
    return nowMs + 5_000;
  }
  if (key === null || text !== project.configText || listCacheKey(project.configPath, env, VERSION) !== key) return nowMs + 5_000;
  return writeListCache(project.stateDir, key, cachedRoutines(project, nowMs), nowMs);
}
