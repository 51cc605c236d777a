// The registry kept in step with the runs and the task definitions (SPEC §5): rebuilt from the
// runs when it is missing or damaged, runs left RUNNING by dead holders folded in under the
// lock, and which tasks an `exec run` picks from it (and why none, when none).

import { basename } from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import { samePidSpace, systemProbe } from '../process/identity.js';
import type { Lease } from '../lock/lease.js';
import { printable } from '../printable.js';
import { nowIso, type ExecContext } from './context.js';
import { foldRun, rebuildRegistry } from './outcome.js';
import { emptyRegistry, foldedThrough, syncRegistry, type Registry } from './registry.js';
import { applyEvent, type RunEvent, type RunState } from './run-state.js';
import { isRunId } from '../run-id.js';
import { passedOver } from '../errors.js';
import type { ExecStore } from './store.js';
import type { SourcedTask } from './task-source.js';
import { own } from '../is-object.js';

export interface RegisterSummary {
  added: string[];
  changed: string[];
  retired: string[];
  total: number;
}

/** Every run the store can read, oldest first (damaged ones reported and skipped; one the
 * storage could not give stops the rebuild: errors.ts UnreadableRunError). */
async function allRuns(store: ExecStore, warn: (m: string) => void): Promise<RunState[]> {
  const runs: RunState[] = [];
  for (const id of await store.listRunIds(100_000)) {
    try {
      const run = await store.loadRun(id);
      if (run) runs.push(run);
    } catch (err) {
      if (!passedOver(err)) throw err;
      warn(err.message);
    }
  }
  return runs.reverse();
}

/** The registry; a missing or corrupt one is rebuilt from the runs, never taken for "nothing
 * ever ran" (SPEC §3). `write`: under the exec lock, about to save it (a corrupt file is moved
 * aside); else a read-only view (nothing is moved or written). */
export async function currentRegistry(
  ctx: ExecContext,
  store: ExecStore,
  defs: SourcedTask[],
  write: boolean,
  clock: Clock = ctx.clock ?? systemClock,
): Promise<{ registry: Registry; rebuilt: boolean }> {
  const warn = ctx.warn ?? (() => {});
  let read = await store.loadRegistry({ write });
  let behind = read.kind === 'ok' ? await newerRun(store, read.registry) : null;
  if (behind !== null) {
    // a run may have started between the two reads (its registry names it first): read again
    read = await store.loadRegistry({ write });
    behind = read.kind === 'ok' ? await newerRun(store, read.registry) : null;
  }
  if (read.kind === 'ok' && behind === null) return { registry: read.registry, rebuilt: false };
  if (read.kind === 'ok') return foldNewer(store, read.registry, behind!, defs, warn, clock);
  const runs = await allRuns(store, warn);
  if (read.kind === 'missing' && runs.length === 0) return { registry: emptyRegistry(), rebuilt: false };
  const how =
    read.kind === 'missing'
      ? 'is missing'
      : `is corrupt (${read.problem})${read.movedTo ? `; moved aside to ${basename(read.movedTo)}` : ''}`;
  warn(`${store.registryLocation} ${how}; rebuilt from ${runs.length} run${runs.length === 1 ? '' : 's'}`);
  const registry = rebuildRegistry(runs, defs, nowIso(clock));
  // A run still RUNNING is either someone's live run (a read-only view) or a dead holder's (we
  // hold the lock): either way it must be folded again when it ends.
  registry.active_runs = runs.filter((r) => r.status === 'RUNNING').map((r) => r.run_id);
  return { registry, rebuilt: true };
}

/** A registry that is readable but older than the runs (a restored copy; a crash between a
 * run's folder and the registry naming it): the runs it has not folded in, folded onto it, oldest
 * first — never thrown away for a rebuild from every run, which loses what a damaged older run
 * alone recorded. A run still RUNNING is listed as active, to be folded when it ends. */
async function foldNewer(
  store: ExecStore,
  current: Registry,
  newest: string,
  defs: SourcedTask[],
  warn: (m: string) => void,
  clock: Clock,
): Promise<{ registry: Registry; rebuilt: boolean }> {
  const through = foldedThrough(current);
  const newer = (await store.listRunIds(100_000))
    .filter((id) => (through === null || id > through) && !current.active_runs.includes(id))
    .reverse();
  // defined tasks first, as a rebuild does: a task the newer runs ran is known when they fold
  let registry = syncRegistry(current, defs, nowIso(clock)).registry;
  let folded = 0;
  for (const id of newer) {
    let run: RunState | null;
    try {
      run = await store.loadRun(id);
    } catch (err) {
      if (!passedOver(err)) throw err;
      warn(err.message);
      continue;
    }
    if (run === null) continue; // never came to be
    folded++;
    if (run.status === 'RUNNING') registry = { ...registry, active_runs: [...registry.active_runs, run.run_id] };
    else registry = foldRun(registry, run, nowIso(clock));
  }
  if (registry.folded_through === undefined || newest > registry.folded_through)
    registry = { ...registry, folded_through: newest };
  warn(
    `${store.registryLocation} is older than run ${newest} (it never folded it in); folded in the ${folded} newer run${folded === 1 ? '' : 's'}`,
  );
  return { registry, rebuilt: true };
}

/** The newest run when the registry has not folded it in and does not list it as started (so
 * the registry is older than the runs), else null. One listing of the runs. */
async function newerRun(store: ExecStore, registry: Registry): Promise<string | null> {
  const [newest] = await store.listRunIds(1);
  if (newest === undefined || registry.active_runs.includes(newest)) return null;
  const through = foldedThrough(registry);
  return through === null || newest > through ? newest : null;
}

/** Under the lock: fold runs left unfinished by dead holders, then sync with the definitions. */
export async function prepareRegistry(
  ctx: ExecContext,
  store: ExecStore,
  clock: Clock,
  lease: Lease,
  defs: SourcedTask[],
  currentRun?: string,
) {
  const warn = ctx.warn ?? (() => {});
  let { registry, rebuilt } = await currentRegistry(ctx, store, defs, true, clock);
  await lease.raiseGeneration((registry.generation ?? 0) + 1);
  let dirty = rebuilt;
  /** Runs whose end this holder recorded just now (with its own generation). */
  const ended = new Set<string>();
  for (const runId of registry.active_runs) {
    if (runId === currentRun) continue;
    let run: RunState | null;
    try {
      run = isRunId(runId) ? await store.loadRun(runId) : null;
    } catch (err) {
      // damaged past rebuilding: dropped as below; one that could not be read now stops here,
      // never dropped (its done tasks would run again)
      if (!passedOver(err)) throw err;
      warn(err.message);
      run = null;
    }
    if (run === null) {
      // a run that never came to be (a crash or a full disk as it was created): dropped, and
      // counted as folded, so that its empty folder never makes this registry look older
      const through = registry.folded_through;
      registry = {
        ...registry,
        active_runs: registry.active_runs.filter((r) => r !== runId),
        ...(isRunId(runId) && (through === undefined || runId > through) ? { folded_through: runId } : {}),
      };
      dirty = true;
      continue;
    }
    await lease.raiseGeneration(run.generation + 1);
    // We hold the exec lock, which every run holds for its whole run: a run left RUNNING by
    // someone else is not running any more. Its owner died, or it lost the lock (paused past the
    // TTL, its tasks ended by whoever took the lock over, SPEC §4.4) and is at most winding
    // down, its last writes fenced off. Either way it is recorded as ended here and folded, so
    // what it finished stays done and what it did not belongs to it (exec resume), never
    // picked up again by a plain exec run.
    if (run.status === 'RUNNING') {
      run = await markEnded(store, run, lease, clock);
      ended.add(run.run_id);
    }
    registry = foldRun(registry, run, nowIso(clock));
    dirty = true;
  }
  const sync = syncRegistry(registry, defs, nowIso(clock), lease.generation);
  if (dirty || sync.added.length || sync.changed.length || sync.retired.length) {
    await store.saveRegistry(sync.registry, nowIso(clock), lease);
  }
  const summary: RegisterSummary = {
    added: sync.added,
    changed: sync.changed,
    retired: sync.retired,
    total: defs.length,
  };
  return { registry: sync.registry, summary, ended };
}

/** A RUNNING run's owner is alive when it is this very process or a live process on this host
 * with the recorded start time. */
export function ownerAlive(run: RunState): boolean {
  const probe = systemProbe();
  const o = run.owner;
  if (!samePidSpace(o, probe)) return false; // we hold the lock: a writer elsewhere has lost it
  const p = probe.inspect(o.pid);
  return p.state === 'alive' && (!p.startTime || !o.start_time || p.startTime === o.start_time);
}

/** Records the end of a run left RUNNING by another holder of the exec lock, which we now hold:
 * INTERRUPTED / OWNER_DEAD when its process is gone, ABORTED / LOCK_LOST when it lives on after
 * losing the lock (exec.md's why_code table). Written with our generation: the lost holder's own
 * late record, with its older one, never replaces it (SPEC §4.7). */
async function markEnded(store: ExecStore, run: RunState, lease: Lease, clock: Clock): Promise<RunState> {
  const who = `its process (pid ${run.owner.pid} on ${printable(run.owner.host)})`;
  const alive = ownerAlive(run);
  const event: RunEvent = {
    type: 'run-finished',
    gen: lease.generation,
    at: nowIso(clock),
    status: alive ? 'ABORTED' : 'INTERRUPTED',
    why_code: alive ? 'LOCK_LOST' : 'OWNER_DEAD',
    why: alive
      ? `${who} no longer holds the exec lock (its generation ${run.generation}) and did not finish the run`
      : `${who} ended without finishing the run`,
    next: `routinely exec resume ${run.run_id}`,
  };
  const writer = store.runWriter(run.run_id, lease);
  try {
    writer.append(event);
    await writer.flush();
  } finally {
    await writer.close();
  }
  return applyEvent(run, event);
}

/** Selects the ready tasks: pending (or skipped earlier for a dependency) with every dependency
 * already succeeded or itself selected. Named tasks are taken as they are. */
export function selectTasks(registry: Registry, named: string[] | undefined): string[] {
  const entries = Object.values(registry.tasks).filter((e) => e.status !== 'retired');
  if (named && named.length > 0) return named;
  const chosen = new Set(
    entries.filter((e) => e.status === 'pending' || e.status === 'skipped_dependency').map((e) => e.id),
  );
  let changed = true;
  while (changed) {
    changed = false;
    for (const id of chosen) {
      const deps = own(registry.tasks, id)!.definition.dependsOn ?? [];
      if (!deps.every((d) => chosen.has(d) || own(registry.tasks, d)?.status === 'succeeded')) {
        chosen.delete(id);
        changed = true;
      }
    }
  }
  return entries.filter((e) => chosen.has(e.id)).map((e) => e.id);
}

/** Why `exec run` found nothing to run, and how to run again: counts by status, then the
 * command that changes that (reset, resume). */
export function nothingToRunWhy(registry: Registry): string {
  const entries = Object.values(registry.tasks).filter((e) => e.status !== 'retired');
  if (entries.length === 0) return 'nothing to run: the config has no tasks (exec.tasks, exec.taskDirs)';
  const count = (s: string): number => entries.filter((e) => e.status === s).length;
  const WORDS: [string, string][] = [
    ['succeeded', 'succeeded'],
    ['failed', 'failed'],
    ['skipped_dependency', 'waiting for a failed dependency'],
    ['interrupted', 'interrupted'],
    ['running', 'running'],
    ['pending', 'pending behind those'],
  ];
  const parts = WORDS.filter(([s]) => count(s) > 0).map(([s, w]) => `${count(s)} ${w}`);
  const hints: string[] = [];
  if (count('failed') + count('skipped_dependency') + count('interrupted') > 0)
    hints.push('routinely exec resume retries the failed and interrupted tasks of their run');
  hints.push(`routinely exec reset TASK… sets tasks back to pending for the next exec run`);
  return `nothing to run: ${entries.length === count('succeeded') ? `all ${entries.length} task${entries.length === 1 ? '' : 's'} succeeded` : parts.join(', ')}\n  ${hints.join('\n  ')}`;
}
