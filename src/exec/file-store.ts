// Exec state in files: `<stateDir>/exec/tasks.json` (the registry) and one folder per run.

import { join, relative } from 'node:path';
import type { Project } from '../config/load.js';
import type { Lease } from '../lock/lease.js';
import { checkFolder, readNoFollow, trustRoot } from '../fs/files.js';
import { childPath, removeTree } from '../fs/names.js';
import { loadRegistry, saveRegistry, type Registry } from './registry.js';
import { RunStore, listRunIds, loadRun, loadRunDetailed, rewriteSnapshot, runDir } from './run-store.js';
import { type ExecStore, type RunWriter } from './store.js';
import { FencedError } from '../errors.js';

/** The highest lock generation exec state shows (the registry and the newest runs), read
 * without changing anything: the floor for a lock folder that lost every slot (SPEC §4.12). */
export function execGenerationFloor(project: Project): number {
  const dir = join(project.stateDir, 'exec');
  let max = 0;
  try {
    const reg = JSON.parse(readNoFollow(join(dir, 'tasks.json')) ?? '{}') as { generation?: unknown };
    if (typeof reg.generation === 'number' && Number.isSafeInteger(reg.generation)) max = reg.generation;
  } catch {
    // unreadable: the runs still tell
  }
  const runs = join(dir, 'runs');
  try {
    for (const id of listRunIds(runs).slice(0, 5)) {
      try {
        const run = loadRun(runs, id);
        if (run && Number.isSafeInteger(run.generation)) max = Math.max(max, run.generation);
      } catch {
        // a corrupt run contributes nothing here
      }
    }
  } catch {
    // no runs folder
  }
  return max;
}

/** `warn`: where a run's unreadable journal lines are said, once each per process. */
export function fileExecStore(project: Project, warn: (message: string) => void = () => {}): ExecStore {
  trustRoot(project.stateDir);
  const dir = join(project.stateDir, 'exec');
  const checked = (): void => {
    checkFolder(project.stateDir);
    checkFolder(dir);
    checkFolder(join(dir, 'runs'));
  };
  const registryPath = join(dir, 'tasks.json');
  const said = new Set<string>();
  const runs = join(dir, 'runs');
  /** Runs read with a damaged snapshot (repairRuns writes them again). */
  const damaged = new Set<string>();
  // the runs' folder as the project sees it, as every message names it
  const shown = (path: string): string =>
    path.startsWith(runs) ? `${relative(process.cwd(), runs) || runs}${path.slice(runs.length)}` : path;
  return {
    location: relative(process.cwd(), runs) || runs,
    registryLocation: relative(process.cwd(), registryPath) || registryPath,
    loadRegistry: async ({ write }) => {
      checked();
      return loadRegistry(registryPath, write);
    },
    saveRegistry: async (registry: Registry, now: string, lease: Lease) => {
      const check = lease.verify();
      if (!check.ok) throw new FencedError(check.lost.why);
      return saveRegistry(
        registryPath,
        { ...registry, generation: Math.max(registry.generation ?? 0, lease.generation) },
        now,
      );
    },
    loadRun: async (runId) => {
      checked();
      const loaded = loadRunDetailed(runs, runId);
      // a damaged run.json (not one missing: a run being made) is said once, and written again
      // by the next command that reads the run under the lock (repairRuns)
      if (loaded?.recovered?.startsWith('run.json is corrupt')) {
        if (!damaged.has(runId))
          warn(
            `${shown(childPath(runDir(runs, runId), 'run.json'))} is corrupt${loaded.recovered.slice('run.json is corrupt'.length)}: rebuilt from its journal`,
          );
        damaged.add(runId);
      }
      for (const line of loaded?.unreadable ?? []) {
        if (said.has(line)) continue;
        said.add(line);
        warn(shown(line));
      }
      return loaded?.state ?? null;
    },
    listRunIds: async (limit) => {
      checked();
      return listRunIds(runs).slice(0, limit);
    },
    runWriter: (runId: string, lease: Lease): RunWriter =>
      new RunStore(runs, runId, { append: () => lease.confirm(), snapshot: () => lease.verify().ok }),
    removeRun: async (runId, lease) => {
      const check = lease.verify();
      if (!check.ok) throw new FencedError(check.lost.why);
      checked();
      // the id is checked before it becomes a path; a link is removed, never its target
      removeTree(runDir(runs, runId));
    },
    logPath: (runId, taskId) => childPath(runDir(runs, runId), `${taskId}.log`), // ids checked: no path
    repairRuns: async (lease) => {
      for (const runId of damaged) {
        damaged.delete(runId);
        // as its journal holds it now, under the lock (this command may have appended to it since
        // it read the run: a run left RUNNING, recorded as ended)
        const now = loadRunDetailed(runs, runId);
        if (!now?.recovered?.startsWith('run.json is corrupt')) continue;
        const fence = { append: () => lease.confirm(), snapshot: () => lease.verify().ok };
        const movedTo = await rewriteSnapshot(runs, now.state, fence);
        if (movedTo !== null)
          warn(
            `${shown(childPath(runDir(runs, runId), 'run.json'))} was corrupt: moved aside to ${shown(movedTo)}, written again from its journal`,
          );
      }
    },
  };
}
