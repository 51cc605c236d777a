// `routinely validate`: the config is valid, and when each routine fires next. One
// implementation: the routines and their next times come from the validated config's cache when
// it is for this very config file and environment (cached-config.ts; then neither zod, croner nor
// ICU's zone data is loaded), else from validating the config (`fresh`, validate-fresh.ts, which
// the command line's full path hands in); whichever it was, the lines are made here.

import { displayPath } from '../config/find.js';
import { habitWarnings } from '../config/cron-habits.js';
import { ConfigError, ExitCode, RoutinelyError } from '../errors.js';
import { stdoutIsTTY, writeOut } from '../fs/terminal.js';
import { terminalText } from '../printable.js';
import { nextCachedTimes, readListCache, type CachedRoutine } from '../scheduler/list-cache.js';
import type { ZoneTime } from '../zone-time.js';
import { cachedConfig } from './cached-config.js';
import type { GlobalOptions } from './globals.js';
import { err, out } from './io.js';

/** A validated config as validate prints it: each routine with its next three fire times. */
export interface ValidatedView {
  configPath: string;
  /** Inline exec tasks. */
  tasks: number;
  /** The zone of routines without `timezone`. */
  machineZone: string;
  routines: CachedRoutine[];
  /** Each routine's next fire times (three; fewer for a schedule that runs out). */
  times: ZoneTime[][];
}

/** The view from the cache, or null when the cache cannot answer (not for this config, or a
 * routine down to fewer than three cached times). Throws nothing: a bad cache is no cache. */
export function cachedView(configArg: string | undefined, env: NodeJS.ProcessEnv = process.env): ValidatedView | null {
  try {
    const found = cachedConfig(configArg, env);
    // task files are read by the full path each time: the cache keys the config file only; an
    // HTTP server's settings are checked against the token each time (whoever wrote the cache:
    // routine list, or a scheduler that reloaded them, never started the server with them)
    if (!found || found.project.taskDirs !== 0 || found.project.http !== false) return null;
    const cache = readListCache(found.project.stateDir, found.key);
    const now = Date.now();
    if (!cache || now < cache.written_at) return null;
    const times: ZoneTime[][] = [];
    for (const r of cache.routines) {
      const next = nextCachedTimes(r, now);
      if (!next) return null; // the cache ran out (validating writes it again)
      times.push(next);
    }
    const { inlineTasks: tasks, machineZone } = found.project;
    return { configPath: found.configPath, tasks, machineZone, routines: cache.routines, times };
  } catch {
    return null;
  }
}

/** The command. Without `fresh` (the entry's start-up path) it answers only from the cache and
 * returns null when that cannot answer; the full path then runs it with `fresh`. `--json` (for
 * CI) prints one JSON document whatever the outcome — valid with each routine's next three
 * times, or not with every problem (file, JSON path, message) — with the text form's exit code
 * (0 valid, 2 invalid, 74 unreadable). */
export async function validate(
  g: GlobalOptions,
  flags: { json?: boolean } = {},
  fresh: ((g: GlobalOptions) => Promise<ValidatedView>) | null = null,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number | null> {
  let view = cachedView(g.config, env);
  if (view && env.ROUTINELY_DEBUG) err('routinely: debug: validate from the cache of a config that validated');
  if (!view && !fresh) return null;
  try {
    view ??= await fresh!(g);
  } catch (error) {
    if (!flags.json || !(error instanceof RoutinelyError)) throw error;
    const issues =
      error instanceof ConfigError
        ? error.issues.map((i) => ({ file: i.file ?? error.file, path: i.path, message: i.message }))
        : [{ file: null, path: '', message: error.message }];
    const config = error instanceof ConfigError ? error.file : null;
    out(JSON.stringify({ valid: false, config, errors: issues, warnings: [] }, null, 2));
    return error.exitCode;
  }
  const warnings = habitWarnings(
    view.routines,
    view.times.map((ts) => ts.map((t) => t.at)),
  );
  if (flags.json) {
    const routines = view.routines.map((r, i) => ({
      id: r.id,
      schedule: r.schedule,
      timezone: r.timezone ?? view.machineZone,
      action: r.action,
      enabled: r.enabled,
      next: view.times[i]!.map((t) => new Date(t.at).toISOString()),
    }));
    const doc = {
      valid: true,
      config: displayPath(view.configPath),
      routines,
      tasks: view.tasks,
      errors: [],
      warnings: warnings.map((w) => w.replace(/^routinely: warning: /, '')),
    };
    out(JSON.stringify(doc, null, 2));
    return ExitCode.OK;
  }
  const lines = [validHeader(displayPath(view.configPath), view.routines.length, view.tasks)];
  view.routines.forEach((r, i) => {
    lines.push(routineLine(r, r.timezone ?? view.machineZone));
    for (const t of view.times[i]!) lines.push(timeLine(`${t.date} ${t.time} ${t.zone}`, t.at));
  });
  // one write for the whole report; to a pipe or a file at once, without creating Node's stdout
  // stream (2 ms of a short start)
  if (stdoutIsTTY()) out(lines.join('\n'));
  else writeOut(1, `${terminalText(lines.join('\n'))}\n`);
  for (const w of warnings) err(w);
  return ExitCode.OK;
}

/** `routinely.json: valid (3 routines, 2 inline tasks)` */
function validHeader(path: string, routines: number, tasks: number): string {
  return `${path}: valid (${routines} routine${routines === 1 ? '' : 's'}, ${tasks} inline task${tasks === 1 ? '' : 's'})`;
}

/** `nightly  0 3 * * *  (Europe/Paris; command, disabled)` */
function routineLine(r: { id: string; schedule: string; action: string; enabled: boolean }, zone: string): string {
  const flags = [r.action, r.enabled ? null : 'disabled'].filter(Boolean).join(', ');
  return `${r.id}  ${r.schedule}  (${zone}; ${flags})`;
}

/** `  2026-12-03 03:00:00 GMT+1   2026-12-03T02:00:00.000Z`: the time as shown in its zone, and UTC. */
function timeLine(shown: string, atMs: number): string {
  return `  ${shown}   ${new Date(atMs).toISOString()}`;
}
