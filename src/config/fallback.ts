// Where a project's state is when its routinely.json is invalid. The read-only views (`routine
// list`, `lock status`, `exec runs`, …) still show what the state holds, because a typo in the
// config must not hide whether something is running or failing. The state's location is taken
// from the parts of the config that still validate on their own (`project`, `stateDir`, `lock`,
// `backend`), else the defaults next to the file (`.routinely`, files), and the environment
// overrides of SPEC §2 apply as always (a bad override stays an error).

import { configTextOf, readConfigBytes } from './find.js';
import { resolveProject, stripJsonComments, type Project } from './load.js';
import { validateConfig } from './validate.js';

/** The keys that locate the state, in an order where each may depend on the ones before. */
const LOCATING_KEYS = ['project', 'stateDir', 'lock', 'backend'] as const;

export function stateLocation(configPath: string, env: NodeJS.ProcessEnv = process.env): Project {
  const raw = readRaw(configPath);
  let kept: Record<string, unknown> = {};
  let config = validateConfig(kept, { schedules: false });
  for (const key of LOCATING_KEYS) {
    if (raw[key] === undefined) continue;
    const candidate = { ...kept, [key]: raw[key] };
    const checked = validateConfig(candidate, { schedules: false });
    if (checked.ok) [kept, config] = [candidate, checked];
  }
  if (!config.ok) throw new Error('bug: an empty config does not validate');
  // No routines and no tasks: the views show what the state holds, not what the config wants.
  return resolveProject(configPath, config.value, env);
}

function readRaw(configPath: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(stripJsonComments(configTextOf(readConfigBytes(configPath))));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {}; // unreadable or not JSON: nothing to take from it
  }
}
