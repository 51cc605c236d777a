// `routinely validate` from the validated config's cache (fast-config.ts): when this very config
// file, with this environment, validated before, it is valid now; the next three fire times of
// each routine come from the cache (computed with the same calculator and DST rule). It prints
// what the full command prints, byte for byte; without a usable cache, null (the full path).

import { displayPath } from '../config/find.js';
import { ExitCode } from '../errors.js';
import { nextCachedTimes, readListCache } from '../scheduler/list-cache.js';
import { cachedConfig } from './fast-config.js';
import { habitWarnings } from '../config/cron-habits.js';
import { err, out } from './io.js';
import { stdoutIsTTY, writeOut } from '../fs/terminal.js';
import { terminalText } from '../printable.js';
import { routineLine, timeLine, validHeader } from './validate-lines.js';

export function fastValidate(a: { config?: string }, env: NodeJS.ProcessEnv = process.env): number | null {
  let lines: string[];
  let cache: NonNullable<ReturnType<typeof readListCache>>;
  try {
    const found = cachedConfig(a.config, env);
    if (!found) return null;
    const read = readListCache(found.project.stateDir, found.key);
    const now = Date.now();
    if (!read || now < read.written_at) return null;
    cache = read;
    const tasks = found.project.inlineTasks;
    lines = [validHeader(displayPath(found.configPath), cache.routines.length, tasks)];
    for (const r of cache.routines) {
      lines.push(routineLine(r, r.timezone ?? found.project.machineZone));
      const times = nextCachedTimes(r, now);
      if (!times) return null; // the cache ran out (the full path writes it again)
      for (const z of times) lines.push(timeLine(`${z.date} ${z.time} ${z.zone}`, z.at));
    }
  } catch {
    return null;
  }
  if (env.ROUTINELY_DEBUG) err('routinely: debug: validate from the cache of a config that validated');
  // to a pipe or a file at once, without creating Node's stdout stream (2 ms of a short start)
  if (stdoutIsTTY()) out(lines.join('\n'));
  else writeOut(1, `${terminalText(lines.join('\n'))}\n`);
  for (const w of habitWarnings(cache.routines)) err(w);
  return ExitCode.OK;
}
