// `routinely validate`: the config is valid, and when each routine fires next.

import { keepCrons } from '../config/cron.js';
import { displayPath, loadProject } from '../config/load.js';
import { ExitCode } from '../errors.js';
import { cronSchedule, nextRuns, routineZone } from '../scheduler/schedule.js';
import { ensureListCache } from '../scheduler/upcoming.js';
import { habitWarnings } from '../config/cron-habits.js';
import { err, formatInZone, machineZone, out } from './io.js';
import type { GlobalOptions } from './main.js';

export async function validate(g: GlobalOptions): Promise<number> {
  keepCrons();
  // The environment overrides (SPEC §2) are checked as every other command checks them, so a
  // value that would make them exit 2 never passes as valid here.
  const project = loadProject({ configPath: g.config });
  const { configPath: path, config } = project;
  const backend = { type: config.backend.type };
  const tasks = config.exec.tasks.length;
  // one write for the whole report (a line at a time was 400 writes for 100 routines)
  const lines = [`${displayPath(path)}: valid (${config.routines.length} routine${config.routines.length === 1 ? '' : 's'}, ${tasks} inline task${tasks === 1 ? '' : 's'})`];
  const now = new Date();
  for (const r of config.routines) {
    const tz = routineZone(r, { backend });
    const zone = tz ?? machineZone();
    const flags = [r.action, r.enabled ? null : 'disabled'].filter(Boolean).join(', ');
    lines.push(`${r.id}  ${r.schedule}  (${zone}; ${flags})`);
    for (const at of nextRuns(cronSchedule(r.schedule, tz), now, 3)) lines.push(`  ${formatInZone(at, tz)}   ${at.toISOString()}`);
  }
  out(lines.join('\n'));
  for (const w of habitWarnings(config.routines)) err(w);
  // the next `validate`, `routine list` or `lock run` of this very config starts without
  // validating it again (fast-config.ts)
  ensureListCache(project);
  return ExitCode.OK;
}

