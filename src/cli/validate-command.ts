// `routinely validate`: the config is valid, and when each routine fires next.

import { keepCrons } from '../config/cron-cache.js';
import { displayPath, loadProject, type Project } from '../config/load.js';
import { ConfigError, ExitCode, RoutinelyError } from '../errors.js';
import { cronSchedule, nextRuns, routineZone } from '../config/schedule.js';
import { ensureListCache } from '../scheduler/upcoming.js';
import { habitWarnings } from '../config/cron-habits.js';
import { err, formatInZone, machineZone, out } from './io.js';
import type { GlobalOptions } from './globals.js';
import { routineLine, timeLine, validHeader } from './validate-lines.js';

/** `validate --json` (for CI): one JSON document on stdout whatever the outcome — valid with
 * each routine's next three times, or not with every problem (file, JSON path, message) — and
 * the exit code of the text form (0 valid, 2 invalid, 74 unreadable). */
export async function validate(g: GlobalOptions, flags: { json?: boolean } = {}): Promise<number> {
  if (!flags.json) return validateText(g);
  keepCrons();
  let project: Project;
  try {
    project = loadProject({ configPath: g.config });
  } catch (error) {
    if (!(error instanceof RoutinelyError)) throw error;
    const issues =
      error instanceof ConfigError
        ? error.issues.map((i) => ({ file: i.file ?? error.file, path: i.path, message: i.message }))
        : [{ file: null, path: '', message: error.message }];
    out(
      JSON.stringify(
        { valid: false, config: error instanceof ConfigError ? error.file : null, errors: issues, warnings: [] },
        null,
        2,
      ),
    );
    return error.exitCode;
  }
  const { configPath: path, config } = project;
  const backend = { type: config.backend.type };
  const now = new Date();
  const routines = config.routines.map((r) => {
    const tz = routineZone(r, { backend });
    return {
      id: r.id,
      schedule: r.schedule,
      timezone: tz ?? machineZone(),
      action: r.action,
      enabled: r.enabled,
      next: nextRuns(cronSchedule(r.schedule, tz), now, 3).map((at) => at.toISOString()),
    };
  });
  const warnings = habitWarnings(config.routines).map((w) => w.replace(/^routinely: warning: /, ''));
  out(
    JSON.stringify(
      { valid: true, config: displayPath(path), routines, tasks: config.exec.tasks.length, errors: [], warnings },
      null,
      2,
    ),
  );
  ensureListCache(project);
  return ExitCode.OK;
}

async function validateText(g: GlobalOptions): Promise<number> {
  keepCrons();
  // The environment overrides (SPEC §2) are checked as every other command checks them, so a
  // value that would make them exit 2 never passes as valid here.
  const project = loadProject({ configPath: g.config });
  const { configPath: path, config } = project;
  const backend = { type: config.backend.type };
  const tasks = config.exec.tasks.length;
  // one write for the whole report (a line at a time was 400 writes for 100 routines)
  const lines = [validHeader(displayPath(path), config.routines.length, tasks)];
  const now = new Date();
  for (const r of config.routines) {
    const tz = routineZone(r, { backend });
    lines.push(routineLine(r, tz ?? machineZone()));
    for (const at of nextRuns(cronSchedule(r.schedule, tz), now, 3))
      lines.push(timeLine(formatInZone(at, tz), at.getTime()));
  }
  out(lines.join('\n'));
  for (const w of habitWarnings(config.routines)) err(w);
  // the next `validate`, `routine list` or `lock run` of this very config starts without
  // validating it again (fast-config.ts)
  ensureListCache(project);
  return ExitCode.OK;
}
