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
  return startable(tasks, 0, status, doneBefore, caps, running, total);
}

/** tasksToStart from `from` on, with the running tasks already counted (by provider, `running`,
 * changed in place; and `total`). */
function startable(
  tasks: readonly PlanTask[],
  from: number,
  status: ReadonlyMap<string, TaskStatus>,
  doneBefore: (id: string) => boolean,
  caps: Caps,
  running: Map<string, number>,
  total: number,
): string[] {
  const start: string[] = [];
  for (let i = from; i < tasks.length; i++) {
    const t = tasks[i]!;
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

/** tasksToStart for a run in progress, without looking at every task each time (a run of n tasks
 * asked it n times: O(n²), 17 ms of 500 tasks, minutes of 10 000): it keeps the running tasks'
 * counts and the first task still pending. Tell it each start and finish; same answers. */
export class StartPlanner {
  private readonly running = new Map<string, number>();
  private total = 0;
  private firstPending = 0;
  private readonly providerOf: Map<string, string>;

  constructor(
    private readonly tasks: readonly PlanTask[],
    private readonly status: ReadonlyMap<string, TaskStatus>,
    private readonly doneBefore: (id: string) => boolean,
    private readonly caps: Caps,
  ) {
    this.providerOf = new Map(tasks.map((t) => [t.id, t.provider]));
    for (const t of tasks) if (status.get(t.id) === 'running') this.started(t.id);
  }

  /** `id` runs now. */
  started(id: string): void {
    const p = this.providerOf.get(id) ?? '';
    this.running.set(p, (this.running.get(p) ?? 0) + 1);
    this.total++;
  }

  /** `id`, which was running, is done. */
  finished(id: string): void {
    const p = this.providerOf.get(id) ?? '';
    this.running.set(p, (this.running.get(p) ?? 1) - 1);
    this.total--;
  }

  next(): string[] {
    // statuses only ever leave 'pending': the tasks before the first pending one are done with
    while (this.firstPending < this.tasks.length && this.status.get(this.tasks[this.firstPending]!.id) !== 'pending')
      this.firstPending++;
    // `running` is counted again by startable for the ones it picks: they are told back as started
    const counts = new Map(this.running);
    return startable(this.tasks, this.firstPending, this.status, this.doneBefore, this.caps, counts, this.total);
  }
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
