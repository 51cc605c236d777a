// The config the scheduler runs with, written for its children (see SNAPSHOT_ENV).

import { join } from 'node:path';
import type { ConfigSnapshot, Project } from '../config/load.js';
import { createHash } from 'node:crypto';
import { writeFileDurable } from '../state/durable.js';

export function snapshotPath(project: Project): string {
  return join(project.stateDir, 'scheduler-config.json');
}

/** Writes the snapshot; returns its path and the SHA-256 of its content (for SNAPSHOT_HASH_ENV). */
export function writeConfigSnapshot(project: Project): { path: string; sha256: string } {
  const path = snapshotPath(project);
  const snapshot: ConfigSnapshot = { config_path: project.configPath, text: project.configText ?? '' };
  const text = `${JSON.stringify(snapshot, null, 2)}\n`;
  writeFileDurable(path, text);
  return { path, sha256: createHash('sha256').update(text).digest('hex') };
}
