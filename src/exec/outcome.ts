// Pure conclusions about a run: its final status with explainability, and what it means for
// the task registry.

import type { StopCause } from './executor.js';
import { emptyRegistry, syncRegistry, type Registry, type RegistryStatus } from './registry.js';
import type { SourcedTask } from './task-source.js';
import { summarize, type RunEvent, type RunState, type RunStatus, type Why } from './run-state.js';
import { own } from '../is-object.js';

export function finalStatus(
  state: RunState,
  stoppedBy: StopCause | null,
  lostWhy?: string,
): { status: RunStatus } & Partial<Why> {
  const resume = `routinely exec resume ${state.run_id}`;
  switch (stoppedBy) {
    case 'LOCK_LOST':
      return {
        status: 'ABORTED',
        why_code: 'LOCK_LOST',
        why: `the exec lock was lost${lostWhy ? `: ${lostWhy}` : ''}; its tasks were stopped`,
        next: resume,
      };
    case 'RUN_TIMEOUT':
      return {
        status: 'ABORTED',
        why_code: 'RUN_TIMEOUT',
        why: 'the run exceeded its timeout; its tasks were stopped',
        next: resume,
      };
    case 'INTERRUPTED':
      return {
        status: 'INTERRUPTED',
        why_code: 'INTERRUPTED',
        why: 'stopped by a signal; unfinished tasks were stopped',
        next: resume,
      };
    case 'STATE_ERROR':
      // out of descriptors is no disk problem: the next step says what helps
      return {
        status: 'ABORTED',
        why_code: 'STATE_WRITE_FAILED',
        why: `run state could not be written${lostWhy ? ` (${lostWhy})` : ''}; unfinished tasks were stopped`,
        next: /too many open files/.test(lostWhy ?? '')
          ? `raise the open-file limit (ulimit -n) or lower --parallel, then: ${resume}`
          : `free space or fix the state folder, then: ${resume}`,
      };
  }
  const failed = Object.entries(state.tasks).filter(([, t]) => t.status === 'failed');
  const skipped = Object.entries(state.tasks).filter(([, t]) => t.status === 'skipped_dependency');
  if (failed.length === 0 && skipped.length === 0) return { status: 'SUCCEEDED' };
  const counts = summarize(state);
  const names = failed.map(
    ([id, t]) =>
      `${id} (${t.why_code === 'TASK_TIMEOUT' ? 'timeout' : t.exit_code !== null ? `exit ${t.exit_code}` : (t.why_code ?? 'failed').toLowerCase()})`,
  );
  const first = failed[0]?.[1];
  return {
    status: 'FAILED',
    why_code: first?.why_code ?? 'DEPENDENCY_FAILED',
    why: `${failed.length} of ${counts.total} task${counts.total === 1 ? '' : 's'} failed${names.length ? `: ${names.join(', ')}` : ''}${skipped.length ? `; ${skipped.length} skipped (dependency failed)` : ''}`,
    // tasks no longer defined fail nothing a fix would change: another resume ran them not
    next:
      failed.length > 0 && skipped.length === 0 && failed.every(([, t]) => t.why_code === 'RETIRED')
        ? `${failed.map(([id]) => id).join(', ')} ${failed.length === 1 ? 'is' : 'are'} no longer defined in the config: define ${failed.length === 1 ? 'it' : 'them'} again, then: ${resume}; or leave the run as it is`
        : // every one failed to start for the same cause (out of descriptors): what helps, as each says
          skipped.length === 0 &&
            first?.next &&
            failed.every(([, t]) => t.why_code === 'SPAWN_FAILED' && t.next === first.next) &&
            first.next.startsWith('raise ')
          ? first.next
          : `${showStep(state.run_id)}fix, then: ${resume}`,
  };
}

const showStep = (runId: string): string => `routinely exec show ${runId} (logs beside it), `;

/** A run's `next` as `exec show` of that same run prints it: without the advice to run it. */
export function nextBesideShow(runId: string, next: string): string {
  const step = showStep(runId);
  return next.startsWith(step)
    ? `fix the failed tasks (logs below), then: ${next.slice(step.length + 'fix, then: '.length)}`
    : next;
}

/** When this attempt of the run began: its latest resume, else its creation. */
export const attemptStart = (state: RunState): string => state.resumed_at ?? state.created_at;

/** Folds a run's task outcomes into the registry, per task, and removes the run from
 * `active_runs`. Pure. A task is folded only where its definition is unchanged since the run
 * took it, and only from a lock generation at least as new as the one that set its current
 * status: a run written by a holder that lost the lock (an older generation) never replaces what
 * a newer holder recorded, whatever order the runs are folded in (SPEC §4.7). */
export function foldRun(registry: Registry, run: RunState, now: string): Registry {
  const unfinished = run.status === 'INTERRUPTED' || run.status === 'ABORTED' || run.status === 'RUNNING';
  const tasks = { ...registry.tasks };
  for (const [id, t] of Object.entries(run.tasks)) {
    const entry = own(tasks, id);
    if (!entry || entry.status === 'retired' || entry.hash !== t.hash) continue;
    // done in another run (exec resume counted it): that run stays its record
    if (t.why_code === 'SUCCEEDED_SINCE') continue;
    const gen = t.gen ?? run.generation;
    if (entry.generation !== undefined && gen < entry.generation) continue;
    let status: RegistryStatus;
    if (t.status === 'running' || t.status === 'interrupted' || (t.status === 'pending' && unfinished))
      status = 'interrupted';
    else if (t.status === 'pending') continue;
    else status = t.status;
    // An interrupted attempt does not undo a success of the same generation folded before.
    if (status === 'interrupted' && entry.status === 'succeeded' && entry.generation === gen) continue;
    tasks[id] = {
      ...entry,
      status,
      updated_at: now,
      last_run_id: run.run_id,
      last_exit_code: t.exit_code,
      generation: gen,
    };
  }
  const through = registry.folded_through;
  return {
    ...registry,
    tasks,
    active_runs: registry.active_runs.filter((r) => r !== run.run_id),
    folded_through: through !== undefined && through > run.run_id ? through : run.run_id,
  };
}

/** The registry rebuilt from the runs (SPEC §3: it is their index): every defined task pending,
 * then every run folded in, oldest first, each task only from the newest generation that
 * touched it. A task that succeeded and did not change since stays succeeded. Pure. */
export function rebuildRegistry(runs: readonly RunState[], defs: readonly SourcedTask[], now: string): Registry {
  let registry = syncRegistry(emptyRegistry(), defs, now).registry;
  for (const entry of Object.values(registry.tasks)) delete entry.generation;
  const ordered = [...runs].sort((a, b) => (a.run_id < b.run_id ? -1 : a.run_id > b.run_id ? 1 : 0));
  let generation = 0;
  for (const run of ordered) {
    registry = foldRun(registry, run, now);
    generation = Math.max(generation, run.generation);
  }
  return { ...registry, active_runs: [], ...(generation > 0 ? { generation } : {}) };
  // (folded_through: set by foldRun to the newest run, when there was one)
}

export function exitCodeFor(status: RunStatus, signalExit: number | null): number {
  if (status === 'SUCCEEDED') return 0;
  if (status === 'INTERRUPTED' && signalExit) return signalExit;
  return 1;
}

/** The final state of a holder that lost its lock, as its record has it: a task whose finish
 * event never reached the record (the store was unreachable until the lease ran out) reads as
 * interrupted there and `exec resume` runs it again, so it is reported so, with what it did;
 * and a final record that could not be stored is said too (`notStored`: why). Pure. */
export function asRecorded(state: RunState, unrecorded: readonly RunEvent[], notStored: string | null): RunState {
  const tasks = { ...state.tasks };
  const because = notStored ?? 'the exec lock was lost before it was stored';
  for (const e of unrecorded) {
    const t = e.type === 'task-finished' ? own(tasks, e.task) : undefined;
    if (e.type !== 'task-finished' || !t || t.status !== e.status) continue;
    tasks[e.task] = {
      ...t,
      status: 'interrupted',
      why_code: 'NOT_RECORDED',
      why: `${e.status}, but the result could not be recorded (${because})`,
      next: `routinely exec resume ${state.run_id} will run it again`,
    };
  }
  if (notStored === null) return { ...state, tasks };
  return {
    ...state,
    tasks,
    why: `${state.why ?? state.status}; this could not be recorded (${notStored}), so the run reads as interrupted until resumed`,
  };
}
