// The project as the read-only views load it: like every command, except that an invalid config
// does not hide the state. They warn on stderr, show what the state folder holds, and exit as
// they would otherwise (0): a broken config must not hide what is running or failing.
// Commands that act (and `routine list --check`, which monitoring relies on) still exit 2.

import { relative } from 'node:path';
import { stateLocation } from '../config/fallback.js';
import { displayPath, findConfig, loadProject, type LoadOptions, type Project } from '../config/load.js';
import { ConfigError } from '../errors.js';
import { err } from './io.js';
import type { GlobalOptions } from './globals.js';

export interface ViewProject {
  project: Project;
  /** Why the config was not used; null when it is valid. */
  invalid: ConfigError | null;
}

export function loadForView(g: GlobalOptions, options: LoadOptions = {}): ViewProject {
  try {
    return { project: loadProject({ ...options, configPath: g.config }), invalid: null };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { project: stateOnly(g, error), invalid: error };
  }
}

/** The state of a project whose config turned out invalid, with the warning said once. */
export function stateOnly(g: GlobalOptions, error: ConfigError): Project {
  const configPath = findConfig({ configPath: g.config });
  const project = stateLocation(configPath);
  const state = relative(process.cwd(), project.stateDir) || '.';
  const where = project.backend.type === 'postgres' ? `the database (project ${project.backend.project})` : state;
  err(
    `routinely: warning: ${displayPath(configPath)} is invalid, so this shows only what the state in ${where} holds:`,
  );
  for (const line of error.message.split('\n')) err(`routinely:   ${line}`);
  return project;
}
