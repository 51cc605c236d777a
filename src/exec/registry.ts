// The task registry, `exec/tasks.json` (SPEC §5): every task ever registered, its definition
// hash and its status. `register` syncs it with the config by content hash. It is rewritten a
// few times per run (at the start and at the end), never once per task transition: a run's
// per-task progress lives in that run's journal and is folded in when the run ends, or by the
// next command when the run was cut short (`active_runs`).

import { createRequire } from 'node:module';
import type { TaskDef } from '../config/types.js';
import { readJsonState, writeJsonDurable } from '../state/json-file.js';
import type { SourcedTask } from './task-source.js';
import { isRunId } from '../run-id.js';
import { own } from '../is-object.js';

// node:crypto when a task's hash is asked for: the scheduler, which shares this module's chunk,
// never loads it (≈ 1 MB of its memory, docs/benchmarks.md)
const lazyRequire = createRequire(import.meta.url);

/** The registry as stored. `missing` and `corrupt` are rebuilt from the runs by the caller
 * (the registry is an index of them, SPEC §3). */
export type RegistryRead =
  | { kind: 'ok'; registry: Registry }
  | { kind: 'missing' }
  | { kind: 'corrupt'; problem: string; movedTo: string | null };

export const TASK_STATUSES = [
  'pending',
  'running',
  'succeeded',
  'failed',
  'skipped_dependency',
  'interrupted',
] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export type RegistryStatus = TaskStatus | 'retired';

export interface RegistryEntry {
  id: string;
  hash: string;
  source: string;
  definition: TaskDef;
  status: RegistryStatus;
  registered_at: string;
  updated_at: string;
  last_run_id: string | null;
  last_exit_code: number | null;
  /** Lock generation that set `status`: a run of an older generation never replaces it. */
  generation?: number;
}

export interface Registry {
  version: 1;
  updated_at: string | null;
  /** Runs started but not yet folded into the statuses below (a crash leaves them here). */
  active_runs: string[];
  /** The highest lock generation that wrote exec state: if the lock's counter is ever lost (a
   * wiped lock folder), the next holder raises its own generation above it, or readers would
   * fence off its writes as older than the state they already have. */
  generation?: number;
  /** The newest run folded in. A run newer than it that is not in `active_runs` means the file
   * is older than the runs (restored from a backup, emptied by hand): it is rebuilt from them,
   * never taken for "that never ran" (SPEC §3). */
  folded_through?: string;
  tasks: Record<string, RegistryEntry>;
}

export const emptyRegistry = (): Registry => ({ version: 1, updated_at: null, active_runs: [], tasks: {} });

/** Hashes already taken, by definition object: a run hashes each task when the registry is
 * synced and again when the run is created (config objects are never changed once loaded). */
const hashes = new WeakMap<TaskDef, string>();

/** Content hash of a definition: key order does not matter, every value does. */
export function taskHash(def: TaskDef): string {
  let hash = hashes.get(def);
  if (hash === undefined) hashes.set(def, (hash = hashOf(def)));
  return hash;
}

function hashOf(def: TaskDef): string {
  const canonical = (v: unknown): unknown =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
        )
      : Array.isArray(v)
        ? v.map(canonical)
        : v;
  return (lazyRequire('node:crypto') as typeof import('node:crypto'))
    .createHash('sha256')
    .update(JSON.stringify(canonical(def)))
    .digest('hex')
    .slice(0, 16);
}

export interface SyncResult {
  registry: Registry;
  added: string[];
  changed: string[];
  retired: string[];
}

/** Pure: new → pending, changed definition → pending, unchanged keep their status, removed →
 * retired (a retired task that comes back counts as new). `generation`: the lock generation
 * making the change (statuses it sets are not replaced by older runs). */
export function syncRegistry(
  current: Registry,
  defs: readonly SourcedTask[],
  now: string,
  generation?: number,
): SyncResult {
  const gen = generation !== undefined ? { generation } : {};
  const tasks: Record<string, RegistryEntry> = { ...current.tasks };
  const added: string[] = [];
  const changed: string[] = [];
  const retired: string[] = [];
  const seen = new Set<string>();
  for (const { task, source } of defs) {
    seen.add(task.id);
    const hash = taskHash(task);
    const prior = own(tasks, task.id);
    if (!prior || prior.status === 'retired') {
      added.push(task.id);
      tasks[task.id] = {
        id: task.id,
        hash,
        source,
        definition: task,
        status: 'pending',
        registered_at: now,
        updated_at: now,
        last_run_id: prior?.last_run_id ?? null,
        last_exit_code: null,
        ...gen,
      };
    } else if (prior.hash !== hash) {
      changed.push(task.id);
      tasks[task.id] = { ...prior, hash, source, definition: task, status: 'pending', updated_at: now, ...gen };
    } else if (prior.source !== source || prior.definition === undefined) {
      tasks[task.id] = { ...prior, source, definition: task };
    }
  }
  for (const [id, entry] of Object.entries(tasks)) {
    if (!seen.has(id) && entry.status !== 'retired') {
      retired.push(id);
      tasks[id] = { ...entry, status: 'retired', updated_at: now, ...gen };
    }
  }
  return { registry: { ...current, tasks }, added, changed, retired };
}

export function checkRegistry(v: unknown): Registry | string {
  if (!v || typeof v !== 'object') return 'not an object';
  const r = v as Partial<Registry>;
  if (r.version !== 1) return `unknown version ${JSON.stringify(r.version)}`;
  if (!r.tasks || typeof r.tasks !== 'object') return 'no "tasks" object';
  for (const [id, e] of Object.entries(r.tasks)) {
    if (!e || typeof e !== 'object' || e.id !== id || typeof e.hash !== 'string' || typeof e.status !== 'string') {
      return `task entry ${JSON.stringify(id)} is malformed`;
    }
  }
  return {
    version: 1,
    updated_at: r.updated_at ?? null,
    active_runs: Array.isArray(r.active_runs) ? r.active_runs : [],
    tasks: r.tasks,
    ...(typeof r.generation === 'number' ? { generation: r.generation } : {}),
    ...(typeof r.folded_through === 'string' && isRunId(r.folded_through) ? { folded_through: r.folded_through } : {}),
  };
}

/** The newest run the registry has folded in: its own record of it, or (a file written before
 * it kept one) the newest run a task's result comes from; null: none. */
export function foldedThrough(r: Registry): string | null {
  if (r.folded_through !== undefined) return r.folded_through;
  let newest: string | null = null;
  for (const e of Object.values(r.tasks))
    if (e.last_run_id && (newest === null || e.last_run_id > newest)) newest = e.last_run_id;
  return newest;
}

export function loadRegistry(path: string, write: boolean): RegistryRead {
  const r = readJsonState(path, checkRegistry, { moveAside: write });
  if (r.kind === 'ok') return { kind: 'ok', registry: r.value };
  if (r.kind === 'missing') return r;
  return { kind: 'corrupt', problem: r.problem, movedTo: r.movedTo };
}

export async function saveRegistry(path: string, registry: Registry, now: string): Promise<number> {
  return writeJsonDurable(path, { ...registry, updated_at: now }, { cleanTemps: true });
}
