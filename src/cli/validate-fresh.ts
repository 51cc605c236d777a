// `validate`'s view of a config it validates (validate-command.ts prints it): loads the validator
// and the cron calculator, computes each routine's fire times as the scheduler's cache does
// (scheduler/upcoming.ts), and leaves that cache behind so that the next `validate`, `routine
// list` or `lock run` of this very config starts without validating it again.

import { keepCrons } from '../config/cron-cache.js';
import { loadProject } from '../config/load.js';
import { loadTaskDefinitions } from '../exec/task-source.js';
import { httpSetup } from './http-options.js';
import { TIMES_READ, timesOf } from '../scheduler/list-cache.js';
import { cachedRoutines, ensureListCache } from '../scheduler/upcoming.js';
import { machineZone } from '../zone-time.js';
import type { GlobalOptions } from './globals.js';
import type { ValidatedView } from './validate-command.js';

export async function freshView(g: GlobalOptions): Promise<ValidatedView> {
  keepCrons();
  // The environment overrides (SPEC §2) are checked as every other command checks them, so a
  // value that would make them exit 2 never passes as valid here.
  const project = loadProject({ configPath: g.config });
  // the task files too (SPEC §2: never found by the first fire); a problem is a ConfigError
  if (project.config.exec.taskDirs.length > 0) loadTaskDefinitions(project);
  // what scheduler start refuses of the HTTP server (no token for a port others can reach)
  if (project.config.http?.listen) await httpSetup(undefined, project);
  const now = Date.now();
  const routines = cachedRoutines(project, now);
  ensureListCache(project, now, process.env, routines);
  return {
    configPath: project.configPath,
    tasks: project.config.exec.tasks.length,
    machineZone: machineZone(),
    routines,
    // a schedule that runs out (a year's last fire) shows what it has
    times: routines.map((r) => (timesOf(r) ?? []).filter((t) => t.at > now).slice(0, TIMES_READ)),
  };
}
