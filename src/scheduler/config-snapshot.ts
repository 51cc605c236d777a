// The config the scheduler runs with, written for its children (see SNAPSHOT_ENV).

import { join } from 'node:path';
import type { ConfigSnapshot, Project } from '../config/load.js';
import { writeJsonAtomicSync } from '../state/json-file.js';

export function snapshotPath(project: Project): string {
  return join(project.stateDir, 'scheduler-config.json');
}

export function writeConfigSnapshot(project: Project): string {
  const path = snapshotPath(project);
  const snapshot: ConfigSnapshot = { config_path: project.configPath, text: project.configText ?? '' };
  writeJsonAtomicSync(path, snapshot);
  return path;
}
