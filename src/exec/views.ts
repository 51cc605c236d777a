// The exec read views (SPEC §5 `exec status`, `exec runs`, `exec show`): read-only, no lock
// taken, nothing written; a RUNNING run is shown as the next command will record it.

import type { Backend } from '../backend-types.js';
import { NotFoundError, passedOver } from '../errors.js';
import { EXEC_LOCK_KEY } from '../lock/lock-backend.js';
import { samePidSpace, systemProbe } from '../process/identity.js';
import { printable } from '../printable.js';
import { withExecBackend, type ExecContext } from './context.js';
import { currentRegistry, ownerAlive } from './registry-sync.js';
import { type RunState, type TaskRun } from './run-state.js';
import { isRunId } from '../run-id.js';
import { loadTaskDefinitions } from './task-source.js';
import { own } from '../is-object.js';

export interface TaskView {
  id: string;
  status: string;
  provider: string;
  source: string;
  dependsOn: string[];
  last_run_id: string | null;
  last_exit_code: number | null;
  updated_at: string;
}

/** The registry as it stands, with the live statuses of runs still in progress. Read-only: it
 * neither takes the lock nor registers (run `register` for that). */
export async function execStatus(ctx: ExecContext): Promise<TaskView[]> {
  const defs = loadTaskDefinitions(ctx.project);
  return withExecBackend(ctx, async (backend) => {
    const store = backend.exec;
    const before = await holderGeneration(backend);
    const { registry } = await currentRegistry(ctx, store, defs, false, ctx.clock ?? backend.clock);
    const loaded: RunState[] = [];
    for (const runId of registry.active_runs) {
      try {
        const run = isRunId(runId) ? await store.loadRun(runId) : null;
        if (run) loaded.push(run);
      } catch (err) {
        // damaged: shown by `exec show`; one that could not be read stops the view (its tasks
        // would read as not done)
        if (!passedOver(err)) throw err;
      }
    }
    const holders = [before, await holderGeneration(backend)];
    // each task as the run that holds it shows it, with that run's id: as the next command will
    // fold it in (outcome.ts), a task the unfinished run never started reads as interrupted too
    const live = new Map<string, { status: TaskRun['status']; run: string; exit: number | null }>();
    for (const run of loaded.map((r) => asSeen(r, holders))) {
      const unfinished = run.status === 'INTERRUPTED' || run.status === 'ABORTED';
      for (const [id, t] of Object.entries(run.tasks)) {
        // never over what a newer generation recorded (a run of a holder that lost the lock)
        if ((t.gen ?? run.generation) < (own(registry.tasks, id)?.generation ?? 0)) continue;
        if (run.status === 'RUNNING' || t.status !== 'pending')
          live.set(id, { status: t.status, run: run.run_id, exit: t.exit_code });
        else if (unfinished) live.set(id, { status: 'interrupted', run: run.run_id, exit: null });
      }
    }
    return Object.values(registry.tasks).map((e) => {
      const l = live.get(e.id);
      return {
        id: e.id,
        status: l?.status ?? e.status,
        provider: e.definition.provider ?? 'default',
        source: e.source,
        dependsOn: e.definition.dependsOn ?? [],
        last_run_id: l ? l.run : e.last_run_id,
        last_exit_code: l ? l.exit : e.last_exit_code,
        updated_at: e.updated_at,
      };
    });
  });
}

/** Who holds the exec lock, as a reader judges a RUNNING run by it: the generation of a live
 * holder, `free`, `expired` (stale: whoever had it can write nothing more, every write is
 * fenced), or undefined when it cannot be read (then nothing is concluded from it). */
type LockSeen = number | 'free' | 'expired' | undefined;

async function holderGeneration(backend: Backend): Promise<LockSeen> {
  try {
    const s = await backend.lock.status(EXEC_LOCK_KEY);
    return s.state === 'free' ? 'free' : s.state === 'stale' ? 'expired' : s.generation;
  } catch {
    return undefined;
  }
}

/** A run as a read-only view shows it, without writing anything now:
 * - one left RUNNING by a process that is gone (SIGKILL, a crash) reads as INTERRUPTED /
 *   OWNER_DEAD, as the next command will record it;
 * - one left RUNNING by a writer whose generation no longer holds the exec lock (free, expired,
 *   or held at another epoch) reads as INTERRUPTED too: nothing runs it any more, and its final record
 *   may have been lost with the database (an asynchronous failover). `holders` are the lock's holder
 *   generations read before and after the run was read; only when every read agrees, so a run
 *   that starts or ends between the reads is not misjudged. */
export function asSeen(run: RunState, holders?: readonly LockSeen[]): RunState {
  if (run.status !== 'RUNNING') return run;
  const interrupted = (why_code: 'OWNER_DEAD' | 'LOCK_LOST', why: string): RunState => ({
    ...run,
    tasks: Object.fromEntries(
      Object.entries(run.tasks).map(([id, t]) => [
        id,
        t.status === 'running' ? { ...t, status: 'interrupted' as const } : t,
      ]),
    ),
    status: 'INTERRUPTED',
    why_code,
    why,
    next: `routinely exec resume ${run.run_id}`,
  });
  const who = `pid ${run.owner.pid} on ${printable(run.owner.host)}`;
  if (!ownerAlive(run) && samePidSpace(run.owner, systemProbe()))
    return interrupted('OWNER_DEAD', `its process (${who}) ended without finishing the run`);
  const now = holders?.at(-1);
  if (!holders?.length || !holders.every((h) => h !== undefined && h !== run.generation)) return run;
  const lock =
    now === 'free'
      ? 'the exec lock is free'
      : now === 'expired'
        ? 'its lease expired'
        : `the exec lock is held at epoch ${now}`;
  return interrupted(
    'LOCK_LOST',
    `its writer (${who}, epoch ${run.generation}) no longer holds the exec lock (${lock}); the run did not finish on record`,
  );
}

/** A run whose state cannot be read at all (its run.json damaged and no journal to rebuild it). */
export interface UnreadableRun {
  run_id: string;
  status: 'UNREADABLE';
  why: string;
}

export async function listRuns(ctx: ExecContext, limit = 20): Promise<(RunState | UnreadableRun)[]> {
  return withExecBackend(ctx, async (backend) => {
    const store = backend.exec;
    const before = await holderGeneration(backend);
    const runs: (RunState | UnreadableRun)[] = [];
    for (const id of await store.listRunIds(limit)) {
      try {
        const r = await store.loadRun(id);
        if (r) runs.push(r);
      } catch (err) {
        runs.push({ run_id: id, status: 'UNREADABLE', why: (err as Error).message });
      }
    }
    const holders = [before, await holderGeneration(backend)];
    return runs.map((r) => (r.status === 'UNREADABLE' ? r : asSeen(r as RunState, holders)));
  });
}

export async function showRun(ctx: ExecContext, runId: string): Promise<RunState> {
  if (!isRunId(runId))
    throw new NotFoundError(
      `${JSON.stringify(runId)} is not a run id (expected r-<time>-<hex>, e.g. r-20261129T190000Z-7f3a)`,
    );
  return withExecBackend(ctx, async (backend) => {
    const before = await holderGeneration(backend);
    const run = await backend.exec.loadRun(runId);
    if (!run) throw new NotFoundError(`no run ${runId} in ${backend.exec.location}`);
    return asSeen(run, [before, await holderGeneration(backend)]);
  });
}
