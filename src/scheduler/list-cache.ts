// The cache `routine list` starts from (SPEC §6): the running scheduler writes, for the
// config it validated, each routine's next fire times already formatted in its zone, keyed by
// the config file's identity and the environment. `routine list` and `validate` (cli/) answer
// from it while the key matches and a future time is left for every routine, so they need
// neither zod, croner nor ICU's zone data; otherwise they validate the config.
// (Over 300 lines: the two files' formats and their checks on reading are one contract.)
// It is a cache: losing it, or finding it stale, garbled or not ours, only costs speed. Written
// atomically (temp + rename, no fsync: a torn cache after a power cut is discarded on read).

import { join } from 'node:path';
import { readFileChecked } from '../fs/files.js';
import { writeFileDurable } from '../fs/durable.js';
import { statExact } from '../fs/look.js';
import type { ZoneTime } from '../zone-time.js';
import { isObj } from '../is-object.js';

export const LIST_CACHE_FILE = 'list-cache.json';
/** Fire times kept per routine: enough to cover COVER_MS, at least 3 (what `validate` prints), at
 * most 16 (and a step); rewritten when a routine is down to its last quarter. */
export const UPCOMING_MIN = 3;
export const UPCOMING_MAX = 16;
export const COVER_MS = 10 * 60_000;
const CACHE_CAP = 4 * 1024 * 1024;

export interface CachedRoutine {
  id: string;
  schedule: string;
  timezone: string | null;
  action: string;
  enabled: boolean;
  /** The lock it takes: "exec", a named lock, "none". */
  lock: string;
  starvedAfterSkips: number;
  jitter?: number; // its jitterSeconds, when not 0 (validate warns of one reaching the next fire)
  /** The next fire times in its zone, ascending (none when disabled), in one string (encodeTimes):
   * a list of 1 000 routines parses a string a routine, not an object a time (issue 52). */
  times: string;
  /** After the last of `times`, the routine fires every `step` ms up to `until`, on the same
   * zone offset (the scheduler checked every one of those times): a per-second routine covers
   * ten minutes in a few bytes, so the cache is rewritten every few minutes, not seconds. */
  every?: { step: number; until: number };
}

/** Wall-clock milliseconds of a zone time (its date and time read as if UTC). */
const wallMs = (t: ZoneTime): number => {
  const [y, mo, d] = t.date.split('-').map(Number) as [number, number, number];
  const [h, mi, se] = t.time.split(':').map(Number) as [number, number, number];
  return Date.UTC(y, mo - 1, d, h, mi, se);
};

/** `t` moved by `ms` on the same zone offset. */
export function shifted(t: ZoneTime, ms: number): ZoneTime {
  const iso = new Date(wallMs(t) + ms).toISOString();
  return { at: t.at + ms, date: iso.slice(0, 10), time: iso.slice(11, 19), zone: t.zone };
}

/** Whether `b` is `a` moved by their difference on the same zone offset (no DST change between). */
export const sameOffset = (a: ZoneTime, b: ZoneTime): boolean =>
  a.zone === b.zone && wallMs(b) - wallMs(a) === b.at - a.at;

/** Fire times in a cache's form: `<at> <date> <time> <zone>` each, joined by commas (a zone name
 * has no space, ICU's no comma; an entry that does not read back whole is no time: ENTRY). */
export function encodeTimes(times: readonly ZoneTime[]): string {
  return times.map((t) => `${t.at} ${t.date} ${t.time} ${t.zone}`).join(',');
}

/** One entry of a routine's times, read where the one before it ended (sticky): every part
 * checked by one native match (issue 52: a list of 1 000 routines reads 1 000 of them). */
const ENTRY = /(\d{1,16}) (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) ([^ ,]{0,64})(?:,|$)/y;

/** The next entry of `times` from ENTRY.lastIndex, or null when it is not a time. */
function nextEntry(times: string): ZoneTime | null {
  const m = ENTRY.exec(times);
  if (!m) return null;
  const at = Number(m[1]);
  return Number.isSafeInteger(at) ? { at, date: m[2]!, time: m[3]!, zone: m[4]! } : null;
}

/** The times of `times` up to the first after `afterMs`, or null when one of them is not a time. */
function readTimes(times: string, afterMs: number): ZoneTime[] | null {
  const out: ZoneTime[] = [];
  ENTRY.lastIndex = 0;
  while (ENTRY.lastIndex < times.length) {
    const t = nextEntry(times);
    if (!t) return null;
    out.push(t);
    if (t.at > afterMs) break;
  }
  return out;
}

/** Every cached time of the routine, or null when one is not a time. */
export const timesOf = (r: Pick<CachedRoutine, 'times'>): ZoneTime[] | null => readTimes(r.times, Infinity);

/** The first cached fire time after `nowMs`; null: the cache ran out, or a time is not one. */
export function nextCached(r: CachedRoutine, nowMs: number): ZoneTime | null {
  const last = readTimes(r.times, nowMs)?.at(-1);
  if (!last) return null;
  return last.at > nowMs ? last : r.every ? everyAfter(r.every, last, nowMs) : null;
}

/** After the listed times, the evenly spaced ones (CachedRoutine.every): the first after `nowMs`. */
function everyAfter(every: { step: number; until: number }, last: ZoneTime, nowMs: number): ZoneTime | null {
  const k = Math.floor((nowMs - last.at) / every.step) + 1;
  return last.at + k * every.step <= every.until ? shifted(last, k * every.step) : null;
}

/** How many fire times the readers take from the cache: `validate` prints each routine's next 3. */
export const TIMES_READ = 3;

/** The routine's next `n` cached fire times after `nowMs`, or null when the cache has fewer (or
 * one of them is not a time). */
export function nextCachedTimes(r: CachedRoutine, nowMs: number, n = TIMES_READ): ZoneTime[] | null {
  const times: ZoneTime[] = [];
  for (let t = nowMs; times.length < n;) {
    const next = nextCached(r, t);
    if (!next) return null;
    times.push(next);
    t = next.at;
  }
  return times;
}

/** What the short commands need of a validated config (lock run, lock status, validate): with
 * the cache's key matching, the config is the one that validated, so they load no validator. */
export interface CachedProject {
  stateDir: string;
  lockDir: string;
  lockTtlMs: number;
  lockRefreshMs: number;
  passEnv: string[];
  /** The machine's time zone (routines without `timezone` run in it). */
  machineZone: string;
  inlineTasks: number;
  /** Task folders named (validate reads their files each time; absent in older caches). */
  taskDirs?: number;
  /** The slots of each declared named lock (`lock status` shows them). */
  locks: Record<string, number>;
  /** It asks for the HTTP server: validate checks it in full (the token's check; absent: unknown). */
  http?: boolean;
}

export interface ListCache {
  version: 4;
  key: string;
  /** When the times were computed: a reader whose clock is earlier cannot use them. */
  written_at: number;
  routines: CachedRoutine[];
}

/** The short commands' settings: a file of its own beside the list cache, so that `lock run`
 * reads a few hundred bytes however many routines the project has. */
export const PROJECT_CACHE_FILE = 'config-cache.json';

/** Variables that change nothing listed: diagnostics and this cache's own switch. */
const UNKEYED = new Set(['ROUTINELY_DEBUG', 'ROUTINELY_LIST_CACHE']);

/** What the cache is valid for: this config file, unchanged (inode, size, change time to the
 * nanosecond), read with this environment (every ROUTINELY_* variable and TZ) by this version
 * under this user. */
export function listCacheKey(configPath: string, env: NodeJS.ProcessEnv, version: string): string | null {
  const st = statExact(configPath);
  if (!st) return null;
  const vars = Object.keys(env)
    .filter((k) => (k.startsWith('ROUTINELY_') && !UNKEYED.has(k)) || k === 'TZ')
    .sort()
    .map((k) => [k, env[k]]);
  const uid = typeof process.geteuid === 'function' ? process.geteuid() : null;
  return JSON.stringify([
    version,
    uid,
    configPath,
    String(st.dev),
    String(st.ino),
    String(st.size),
    String(st.mtimeNs),
    String(st.ctimeNs),
    vars,
  ]);
}

/** Writes the cache; returns when it should be written again (the earliest time a routine is
 * down to its last few cached times), or null when no routine has a future time. */
/** Writes a cache file whole (temp file, rename; no fsync: a cache lost to a power cut is
 * rebuilt), never making the state folder (where there is none, there is nothing to speed up). */
function writeCacheFile(path: string, value: unknown): void {
  // cleanTemps: of a writer killed mid-write
  writeFileDurable(path, JSON.stringify(value), { cleanTemps: true, sync: false, createFolder: false });
}

export function writeListCache(
  project: CachedProject,
  key: string,
  routines: CachedRoutine[],
  writtenAt: number,
): number | null {
  writeCacheFile(join(project.stateDir, PROJECT_CACHE_FILE), { version: 1, key, project });
  const cache: ListCache = { version: 4, key, written_at: writtenAt, routines };
  writeCacheFile(join(project.stateDir, LIST_CACHE_FILE), cache);
  let refill: number | null = null;
  for (const r of routines) {
    const upcoming = timesOf(r) ?? [];
    if (upcoming.length === 0) continue;
    const left = Math.ceil(upcoming.length / 4);
    const at = r.every
      ? r.every.until - (r.every.until - upcoming[0]!.at) / 4
      : // and before fewer than `validate`'s three times are left
        upcoming[Math.max(0, Math.min(upcoming.length - left - 1, upcoming.length - TIMES_READ))]!.at;
    if (refill === null || at < refill) refill = at;
  }
  return refill;
}

function checkRoutine(v: unknown): CachedRoutine | null {
  if (!isObj(v)) return null;
  if (
    typeof v.id !== 'string' ||
    typeof v.schedule !== 'string' ||
    typeof v.action !== 'string' ||
    typeof v.enabled !== 'boolean' ||
    typeof v.lock !== 'string'
  )
    return null;
  if (v.timezone !== null && typeof v.timezone !== 'string') return null;
  if (!Number.isSafeInteger(v.starvedAfterSkips) || (v.starvedAfterSkips as number) < 1) return null;
  // its times when they are read (nextCached): a reader takes one or three of them, not all
  if (typeof v.times !== 'string' || !(v.jitter === undefined || (v.jitter as number) > 0)) return null;
  if (
    v.every !== undefined &&
    (!isObj(v.every) ||
      !Number.isSafeInteger(v.every.step) ||
      (v.every.step as number) < 1000 ||
      !Number.isSafeInteger(v.every.until))
  )
    return null;
  // the parsed object itself (a copy made with a spread cost 20 µs a routine at start-up)
  return v as unknown as CachedRoutine;
}

function checkProject(v: unknown): CachedProject | null {
  if (!isObj(v)) return null;
  const str = (x: unknown): x is string => typeof x === 'string' && x.length > 0 && x.length < 4096;
  if (!str(v.stateDir) || !str(v.lockDir) || !str(v.machineZone)) return null;
  const ms = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x) && x > 0;
  if (!ms(v.lockTtlMs) || !ms(v.lockRefreshMs) || v.lockRefreshMs * 2 >= v.lockTtlMs) return null;
  const strings = Array.isArray(v.passEnv) && v.passEnv.every((x) => typeof x === 'string');
  if (!strings || !Number.isSafeInteger(v.inlineTasks)) return null;
  if (
    !isObj(v.locks) ||
    !Object.values(v.locks).every((n) => Number.isSafeInteger(n) && (n as number) >= 1 && (n as number) <= 64)
  )
    return null;
  return {
    stateDir: v.stateDir,
    lockDir: v.lockDir,
    lockTtlMs: v.lockTtlMs,
    lockRefreshMs: v.lockRefreshMs,
    passEnv: v.passEnv as string[],
    machineZone: v.machineZone,
    inlineTasks: v.inlineTasks as number,
    ...(Number.isSafeInteger(v.taskDirs) ? { taskDirs: v.taskDirs as number } : {}),
    locks: v.locks as Record<string, number>,
    ...(typeof v.http === 'boolean' ? { http: v.http } : {}),
  };
}

/** A cache file's JSON when it is there, ours, whole and for `key`; else null. */
function readCacheFile(path: string, key: string, version: number): Record<string, unknown> | null {
  let text: string | null;
  try {
    text = readFileChecked(path, CACHE_CAP)?.text ?? null;
  } catch {
    return null;
  }
  if (text === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  return isObj(v) && v.version === version && v.key === key ? v : null;
}

/** The short commands' settings for `key`, or null. */
export function readProjectCache(stateDir: string, key: string): CachedProject | null {
  const v = readCacheFile(join(stateDir, PROJECT_CACHE_FILE), key, 1);
  return v ? checkProject(v.project) : null;
}

/** The cache in `stateDir` when it is there, ours, whole and for `key`; else null. */
export function readListCache(stateDir: string, key: string): ListCache | null {
  const v = readCacheFile(join(stateDir, LIST_CACHE_FILE), key, 4);
  if (!v || !Number.isSafeInteger(v.written_at) || !Array.isArray(v.routines)) return null;
  const routines: CachedRoutine[] = [];
  for (const r of v.routines) {
    const checked = checkRoutine(r);
    if (!checked) return null;
    routines.push(checked);
  }
  return { version: 4, key, written_at: v.written_at as number, routines };
}
