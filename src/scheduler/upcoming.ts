// The scheduler's side of `routine list`'s cache (list-cache.ts): each routine's next fire times
// in its zone, computed with the same croner calculator and DST rule as everything else.

import { backendCaps } from '../config/backend-caps.js';
import { configTextOf, readConfigBytes } from '../config/find.js';
import { croner } from '../config/cron-cache.js';
import { cronerPattern } from '../config/dialect.js';
import type { Project } from '../config/load.js';
import { machineZone, zoneTime, type ZoneTime } from '../zone-time.js';
import { VERSION } from '../version.js';
import {
  COVER_MS,
  encodeTimes,
  UPCOMING_MAX,
  UPCOMING_MIN,
  listCacheKey,
  nextCachedTimes,
  readListCache,
  readProjectCache,
  sameOffset,
  writeListCache,
  type CachedProject,
  type CachedRoutine,
} from './list-cache.js';
import { ensureStateRoot } from '../state/json-file.js';
import { routineZone } from '../config/schedule.js';

/** The cache entries for a validated config at `nowMs`. */
export function cachedRoutines(project: Project, nowMs: number): CachedRoutine[] {
  return project.config.routines.map((def) => {
    const zone = routineZone(def, project);
    const upcoming = [];
    let every: CachedRoutine['every'];
    {
      // one parse per routine, dropped afterwards (see lightSchedule)
      const cron = croner(cronerPattern(def.schedule, zone), zone);
      let cursor: Date | null = new Date(nowMs);
      while (
        upcoming.length < UPCOMING_MAX &&
        (upcoming.length < UPCOMING_MIN || upcoming.at(-1)!.at - nowMs < COVER_MS) &&
        (cursor = cron.nextRun(cursor))
      ) {
        upcoming.push(zoneTime(cursor, zone));
      }
      every = evenlyOn(cron, upcoming, nowMs + COVER_MS, zone);
    }
    return {
      id: def.id,
      schedule: def.schedule,
      timezone: zone ?? null,
      action: def.action,
      enabled: def.enabled,
      lock: def.exclusive ? def.lock : 'none',
      starvedAfterSkips: def.starvedAfterSkips,
      ...(def.jitterSeconds > 0 ? { jitter: def.jitterSeconds } : {}),
      times: encodeTimes(upcoming),
      ...(every ? { every } : {}),
    };
  });
}

/** The next `count` fire times (ms) of a routine, as the cache has them (`scheduler start`'s
 * warnings, for the few routines with a jitter). */
export function nextFireTimes(
  project: Project,
  def: Project['config']['routines'][number],
  nowMs: number,
  count: number,
): number[] {
  const zone = routineZone(def, project);
  const cron = croner(cronerPattern(def.schedule, zone), zone);
  const times: number[] = [];
  for (let at: Date | null = new Date(nowMs); times.length < count && (at = cron.nextRun(at));)
    times.push(at.getTime());
  return times;
}

/** A routine that fires at an even step (every second, every 10 s) keeps doing so up to `until`
 * on the same zone offset: checked fire time by fire time (at most COVER_MS / 1 s of them), and
 * only then is the rest of the cover left to `routine list` to count out (list-cache.ts). */
function evenlyOn(
  cron: { nextRun(d: Date): Date | null },
  upcoming: ZoneTime[],
  until: number,
  zone: string | undefined,
): CachedRoutine['every'] {
  if (upcoming.length < UPCOMING_MAX) return undefined; // already covered
  const step = upcoming[1]!.at - upcoming[0]!.at;
  if (step < 1000 || !upcoming.every((t, i) => i === 0 || t.at - upcoming[i - 1]!.at === step)) return undefined;
  let last = upcoming.at(-1)!.at;
  for (let at = cron.nextRun(new Date(last)); at && at.getTime() <= until; at = cron.nextRun(at)) {
    if (at.getTime() !== last + step) return undefined;
    last = at.getTime();
  }
  if (last === upcoming.at(-1)!.at) return undefined;
  return sameOffset(upcoming.at(-1)!, zoneTime(new Date(last), zone)) ? { step, until: last } : undefined;
}

/** Writes the cache for `project` when its config file still holds the text that validated (a
 * file edited since waits for the reload that follows); returns when to write again. `routines`:
 * the entries when the caller computed them already (cachedRoutines at `nowMs`). */
export function cacheSchedules(
  project: Project,
  nowMs: number,
  env: NodeJS.ProcessEnv = process.env,
  routines?: CachedRoutine[],
): number | null {
  if (!backendCaps(project.backend).localState || project.configText === undefined) return null;
  const key = listCacheKey(project.configPath, env, VERSION);
  let text: string;
  try {
    text = configTextOf(readConfigBytes(project.configPath));
  } catch {
    return nowMs + 5_000;
  }
  if (key === null || text !== project.configText || listCacheKey(project.configPath, env, VERSION) !== key)
    return nowMs + 5_000;
  return writeListCache(cachedProject(project), key, routines ?? cachedRoutines(project, nowMs), nowMs);
}

/** The settings the short commands take from the cache. */
export function cachedProject(project: Project): CachedProject {
  return {
    stateDir: project.stateDir,
    lockDir: project.lockDir,
    lockTtlMs: project.lockTtlMs,
    lockRefreshMs: project.lockRefreshMs,
    passEnv: project.config.passEnv,
    machineZone: machineZone(),
    inlineTasks: project.config.exec.tasks.length,
    taskDirs: project.config.exec.taskDirs.length,
    locks: Object.fromEntries(Object.entries(project.config.locks).map(([name, l]) => [name, l.slots])),
    http: project.config.http?.listen != null,
  };
}

/** Writes the cache for `project` unless one for this config, this environment and this version
 * is there and can still answer (the full path of the short commands leaves it behind, so their
 * next start is fast). A cache that cannot be written only costs speed. */
export function ensureListCache(
  project: Project,
  nowMs = Date.now(),
  env: NodeJS.ProcessEnv = process.env,
  routines?: CachedRoutine[],
): void {
  if (!backendCaps(project.backend).localState || env.ROUTINELY_LIST_CACHE === '0') return;
  try {
    const key = listCacheKey(project.configPath, env, VERSION);
    if (key === null) return;
    const cache = readListCache(project.stateDir, key);
    if (
      cache &&
      readProjectCache(project.stateDir, key) &&
      cache.written_at <= nowMs &&
      // enough for every reader: validate's next three times, not only the list's next one
      cache.routines.every((r) => nextCachedTimes(r, nowMs) !== null)
    )
      return;
    ensureStateRoot(project.stateDir);
    cacheSchedules(project, nowMs, env, routines);
  } catch {
    // a cache
  }
}
