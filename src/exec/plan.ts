// Pure decisions for a run (no I/O, so they are tested as plain functions): which tasks are ready, which start next under the
// parallel and per-provider caps, and which dependants a failure skips.

import type { TaskStatus } from './registry.js';

export interface PlanTask {
  id: string;
  provider: string;
  dependsOn: readonly string[];
}

export interface Caps {
  parallel: number;
  /** maxConcurrency per provider; a provider without an entry is capped only by `parallel`. */
  providers: Readonly<Record<string, { maxConcurrency: number }>>;
}

/** The task ids to start now, in definition order: pending, every dependency succeeded (in this
 * run, or before it when `doneBefore` says so), and a free slot overall and for its provider. */
export function tasksToStart(
  tasks: readonly PlanTask[],
  status: ReadonlyMap<string, TaskStatus>,
  doneBefore: (id: string) => boolean,
  caps: Caps,
): string[] {
  const running = new Map<string, number>();
  let total = 0;
  for (const t of tasks) {
    if (status.get(t.id) === 'running') {
      running.set(t.provider, (running.get(t.provider) ?? 0) + 1);
      total++;
    }
  }
  const start: string[] = [];
  for (const t of tasks) {
    if (total >= caps.parallel) break;
    if (status.get(t.id) !== 'pending') continue;
    const cap = caps.providers[t.provider]?.maxConcurrency ?? Infinity;
    if ((running.get(t.provider) ?? 0) >= cap) continue;
    const ready = t.dependsOn.every((d) => (status.has(d) ? status.get(d) === 'succeeded' : doneBefore(d)));
    if (!ready) continue;
    start.push(t.id);
    running.set(t.provider, (running.get(t.provider) ?? 0) + 1);
    total++;
  }
  return start;
}

/** Pending tasks that can never run in this run: a dependency failed, was skipped or
 * interrupted here, or lies outside the run without having succeeded. Transitive. */
export function blockedTasks(
  tasks: readonly PlanTask[],
  status: ReadonlyMap<string, TaskStatus>,
  doneBefore: (id: string) => boolean,
): Map<string, string> {
  const blocked = new Map<string, string>(); // id -> the dependency that blocks it
  let grew = true;
  while (grew) {
    grew = false;
    for (const t of tasks) {
      if (status.get(t.id) !== 'pending' || blocked.has(t.id)) continue;
      for (const d of t.dependsOn) {
        const s = status.get(d);
        const dead =
          blocked.has(d) ||
          (s === undefined ? !doneBefore(d) : s === 'failed' || s === 'skipped_dependency' || s === 'interrupted');
        if (dead) {
          blocked.set(t.id, d);
          grew = true;
          break;
        }
      }
    }
  }
  return blocked;
}

/** Orders a subset of tasks so every dependency inside the subset comes first (stable). */
export function dependencyOrder<T extends PlanTask>(tasks: readonly T[]): T[] {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const out: T[] = [];
  const seen = new Set<string>();
  const visit = (t: T): void => {
    if (seen.has(t.id)) return;
    seen.add(t.id);
    for (const d of t.dependsOn) {
      const dep = byId.get(d);
      if (dep) visit(dep);
    }
    out.push(t);
  };
  for (const t of tasks) visit(t);
  return out;
}
