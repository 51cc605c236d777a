// Exec state in files: `<stateDir>/exec/tasks.json` (the registry) and one folder per run.

import { join, relative } from 'node:path';
import type { Project } from '../config/load.js';
import type { Lease } from '../lock/lease.js';
import { loadRegistry, saveRegistry, type Registry } from './registry.js';
import { RunStore, listRunIds, loadRun, runDir } from './run-store.js';
import { FencedError, type ExecStore, type RunWriter, type Warn } from './store.js';

export function fileExecStore(project: Project): ExecStore {
  const dir = join(project.stateDir, 'exec');
  const registryPath = join(dir, 'tasks.json');
  const runs = join(dir, 'runs');
  return {
    location: relative(process.cwd(), runs) || runs,
    loadRegistry: async (warn: Warn) => loadRegistry(registryPath, warn),
    saveRegistry: async (registry: Registry, now: string, lease: Lease) => {
      if (!lease.verify().ok) throw new FencedError('the exec lock is no longer ours');
      return saveRegistry(registryPath, { ...registry, generation: Math.max(registry.generation ?? 0, lease.generation) }, now);
    },
    loadRun: async (runId) => loadRun(runs, runId),
    listRunIds: async (limit) => listRunIds(runs).slice(0, limit),
    runWriter: (runId: string, lease: Lease): RunWriter =>
      new RunStore(runs, runId, { append: () => lease.held(), snapshot: () => lease.verify().ok }),
    logPath: (runId, taskId) => join(runDir(runs, runId), `${taskId}.log`),
  };
}
