// `routinely register`, `routinely exec run | resume | status | runs | show | reset` (SPEC §5).

import { printable } from '../printable.js';
import { relative } from 'node:path';
import { loadProject } from '../config/load.js';
import { ExitCode } from '../errors.js';
import type { ExecContext } from '../exec/context.js';
import { execResume, execRun, register, resetTasks } from '../exec-api.js';
import type { RunOptions } from '../exec/operations.js';
import { registerLine, runSummary as summaryLines } from '../exec/run-lines.js';
import { execStatus, listRuns, showRun } from '../exec-api.js';
import { attemptStart, exitCodeFor, nextBesideShow } from '../exec/outcome.js';
import { summarize, type RunState } from '../exec/run-state.js';
import { busyPolicy, reportBusy, reportBusyJson, waitNotice, type BusyFlags, type Policy } from './busy.js';
import { err, humanBytes, humanDuration, out, paint, useColor } from './io.js';
import type { GlobalOptions } from './globals.js';
import { Progress } from './progress.js';
import { StopSignals } from './signals.js';
import { loadForView } from './view-project.js';

export interface RunFlags extends BusyFlags {
  parallel?: number;
  json?: boolean;
  timeout?: number;
  routine?: string;
}

function context(g: GlobalOptions): ExecContext {
  return { project: loadProject({ configPath: g.config }), warn: (m) => err(`routinely: warning: ${m}`) };
}

/** For the read-only views: the state is shown even while the config is invalid. */
function viewContext(g: GlobalOptions): ExecContext {
  return { project: loadForView(g).project, warn: (m) => err(`routinely: warning: ${m}`) };
}

const shownStateDir = (ctx: ExecContext): string => relative(process.cwd(), ctx.project.stateDir) || '.';

export const describeSummary = registerLine;

export async function registerCommand(flags: BusyFlags & { routine?: string }, g: GlobalOptions): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const ctx = context(g);
  using stop = new StopSignals();
  const r = await register(ctx, {
    ...policy,
    signal: stop.signal,
    routine: flags.routine ?? null,
    onWait: waitNotice(policy),
  });
  if (r.kind === 'busy') return busy(r.busy, policy, stop);
  out(describeSummary(r.value));
  return ExitCode.OK;
}

export async function runCommand(taskIds: string[], flags: RunFlags, g: GlobalOptions): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const ctx = context(g);
  using stop = new StopSignals();
  const progress = flags.json ? null : new Progress(shownStateDir(ctx));
  try {
    const r = await execRun(ctx, {
      ...runOptions(flags, policy, stop, progress),
      tasks: taskIds.length > 0 ? taskIds : undefined,
    });
    if (r.kind === 'busy')
      return flags.json && r.busy.reason !== 'ABORTED' ? reportBusyJson(r.busy, policy) : busy(r.busy, policy, stop);
    if (r.kind === 'nothing')
      return nothingToDo({ status: 'NOTHING_TO_RUN', why: r.why, registered: r.summary }, flags);
    return finish(r.state, flags, progress, stop);
  } finally {
    progress?.stop();
  }
}

/** Nothing was ready (or resumable): exit 0, said plainly or as JSON. */
function nothingToDo(result: { status: string; why: string } & Record<string, unknown>, flags: RunFlags): number {
  if (flags.json) out(JSON.stringify(result, null, 2));
  else out(result.why);
  return ExitCode.OK;
}

/** What `exec run` and `exec resume` pass alike: busy policy, signals, progress, reporting. */
function runOptions(flags: RunFlags, policy: Policy, stop: StopSignals, progress: Progress | null): RunOptions {
  return {
    ...policy,
    signal: stop.signal,
    stop: stop.signal,
    parallel: flags.parallel,
    routine: flags.routine ?? null,
    runTimeoutMs: flags.timeout !== undefined ? flags.timeout * 1000 : undefined,
    onWait: waitNotice(policy),
    onStart: (s) => progress?.start(s),
    onEvent: (e, s) => progress?.event(e, s),
  };
}

function finish(state: RunState, flags: RunFlags, progress: Progress | null, stop: StopSignals): number {
  progress?.stop();
  if (flags.json) out(JSON.stringify(state, null, 2));
  else for (const line of runSummary(state)) out(line);
  const code = exitCodeFor(state.status, stop.received ? stop.exitCode : null);
  return code;
}

/** A busy lock: printed per --if-busy, and reported to a scheduler as a skip. */
function busy(b: Parameters<typeof reportBusy>[0], policy: ReturnType<typeof busyPolicy>, stop: StopSignals): number {
  if (b.reason === 'ABORTED') return stop.exitCode;
  const code = reportBusy(b, policy);
  return code;
}

/** The run's result as the terminal shows it (coloured where colour is on). */
export function runSummary(state: RunState): string[] {
  const color = useColor();
  return summaryLines(state, (text, colour) => paint(text, colour, color));
}

export async function resumeCommand(runId: string | undefined, flags: RunFlags, g: GlobalOptions): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const ctx = context(g);
  using stop = new StopSignals();
  const progress = flags.json ? null : new Progress(shownStateDir(ctx));
  try {
    const r = await execResume(ctx, runId, {
      ...runOptions(flags, policy, stop, progress),
    });
    if (r.kind === 'conflict') {
      if (r.busy.reason === 'ABORTED') return stop.exitCode;
      if (policy.ifBusy === 'skip' && r.busy.reason === 'LOCK_HELD') {
        if (flags.json)
          out(
            JSON.stringify(
              {
                status: 'CONFLICT',
                why_code: 'LOCK_CONFLICT',
                why: `exec busy: held by ${r.busy.why}`,
                next: `skipped; try again later: routinely exec resume${r.runId ? ` ${r.runId}` : ''}`,
                ...(r.runId ? { run_id: r.runId } : {}),
              },
              null,
              2,
            ),
          );
        else out('skipped: exec busy');
        return ExitCode.OK;
      }
      const conflict = {
        status: 'CONFLICT',
        why_code: 'LOCK_CONFLICT',
        why: `exec busy: ${r.busy.reason === 'WAIT_TIMEOUT' ? 'still ' : ''}held by ${r.busy.why}`,
        // the run this was about, named: a bare `exec resume` later may pick another (newer) one
        next: `wait for it to finish, or: routinely exec resume${r.runId ? ` ${r.runId}` : ''} --if-busy wait`,
        ...(r.runId ? { run_id: r.runId } : {}),
      };
      if (flags.json) out(JSON.stringify(conflict, null, 2));
      else
        err(
          `${conflict.why}\n  status: CONFLICT (LOCK_CONFLICT); ${r.runId ? `run ${r.runId} was not touched` : 'the run was not touched'}\n  next: ${conflict.next}`,
        );
      return ExitCode.BUSY;
    }
    if (r.kind === 'nothing')
      return nothingToDo({ status: 'NOTHING_TO_RESUME', why: r.why, ...(r.next ? { next: r.next } : {}) }, flags);
    return finish(r.state, flags, progress, stop);
  } finally {
    progress?.stop();
  }
}

export async function statusCommand(flags: { json?: boolean }, g: GlobalOptions): Promise<number> {
  const ctx = viewContext(g);
  const tasks = await execStatus(ctx);
  if (flags.json) {
    out(JSON.stringify(tasks, null, 2));
    return ExitCode.OK;
  }
  if (tasks.length === 0) {
    const { tasks: inline, taskDirs } = ctx.project.config.exec;
    // defined but never registered: say where they are and what registers them
    const defined = [
      ...(inline.length > 0 ? [`${inline.length} task${inline.length === 1 ? '' : 's'} in exec.tasks`] : []),
      ...(taskDirs.length > 0 ? [`exec.taskDirs ${taskDirs.map((d) => JSON.stringify(d)).join(', ')}`] : []),
    ];
    out(
      defined.length > 0
        ? `no tasks registered yet (the config defines ${defined.join(' and ')}): \`routinely register\` registers them, \`routinely exec run\` registers and runs them`
        : 'no tasks registered (run `routinely register`)',
    );
    return ExitCode.OK;
  }
  const color = useColor();
  const width = Math.max(4, ...tasks.map((t) => t.id.length));
  out(`${'TASK'.padEnd(width)}  ${'STATUS'.padEnd(18)}  ${'PROVIDER'.padEnd(10)}  LAST RUN`);
  for (const t of tasks) {
    out(
      `${t.id.padEnd(width)}  ${paint(t.status.padEnd(18), statusColor(t.status), color)}  ${t.provider.padEnd(10)}  ${t.last_run_id ?? '-'}`,
    );
  }
  return ExitCode.OK;
}

export function statusColor(status: string) {
  switch (status) {
    case 'succeeded':
      return 'green' as const;
    case 'failed':
      return 'red' as const;
    case 'running':
      return 'cyan' as const;
    case 'retired':
      return 'gray' as const;
    default:
      return 'yellow' as const;
  }
}

export async function runsCommand(flags: { json?: boolean; limit: number }, g: GlobalOptions): Promise<number> {
  const ctx = viewContext(g);
  const runs = await listRuns(ctx, flags.limit);
  if (flags.json) {
    out(
      JSON.stringify(
        runs.map((run) => {
          if (run.status === 'UNREADABLE') return run;
          const { tasks: _t, ...r } = run as RunState;
          return { ...r, summary: summarize({ ...r, tasks: _t }) };
        }),
        null,
        2,
      ),
    );
    return ExitCode.OK;
  }
  if (runs.length === 0) {
    out('no runs yet');
    return ExitCode.OK;
  }
  for (const run of runs) {
    if (run.status === 'UNREADABLE') {
      out(`${run.run_id}  UNREADABLE   ${printable(run.why)}`);
      continue;
    }
    const r = run as RunState;
    const c = summarize(r);
    out(
      `${r.run_id}  ${r.status.padEnd(11)}  ${c.succeeded}/${c.total} succeeded${r.attempt > 1 ? `  (attempt ${r.attempt})` : ''}${r.why_code ? `  ${r.why_code}` : ''}`,
    );
  }
  return ExitCode.OK;
}

export async function showCommand(runId: string, flags: { json?: boolean }, g: GlobalOptions): Promise<number> {
  const ctx = viewContext(g);
  const run = await showRun(ctx, runId);
  if (flags.json) {
    out(JSON.stringify(run, null, 2));
    return ExitCode.OK;
  }
  const color = useColor();
  out(
    `run ${run.run_id}: ${run.status} (attempt ${run.attempt}, generation ${run.generation}, ${run.command}${run.routine ? `, routine ${run.routine}` : ''})`,
  );
  const resumed = run.resumed_at ? `, resumed ${run.resumed_at}` : '';
  const took = run.finished_at
    ? ` (${humanDuration(Date.parse(run.finished_at) - Date.parse(attemptStart(run)))})`
    : '';
  out(`  started ${run.created_at}${resumed}${run.finished_at ? `, finished ${run.finished_at}${took}` : ''}`);
  if (run.why) out(`  why:  ${run.why_code}: ${printable(run.why)}`);
  if (run.next) out(`  next: ${nextBesideShow(run.run_id, run.next)}`);
  const width = Math.max(4, ...Object.keys(run.tasks).map((k) => k.length));
  for (const [id, t] of Object.entries(run.tasks)) {
    const took = t.duration_ms !== null ? ` ${humanDuration(t.duration_ms)}` : '';
    const code = t.exit_code !== null ? ` exit ${t.exit_code}` : '';
    const cut =
      (t.output_cut_bytes
        ? `  (output cut: ${humanBytes(t.output_cut_bytes)} left out of the middle, retention.runLogBytes)`
        : '') +
      (t.output_lost_bytes
        ? `  (output lost: ${humanBytes(t.output_lost_bytes)} could not be written to its log)`
        : '');
    out(
      `  ${id.padEnd(width)}  ${paint(t.status.padEnd(19), statusColor(t.status), color)}${code}${took}${t.why ? `  — ${printable(t.why)}` : ''}${cut}`,
    );
  }
  out(`  logs: ${shownStateDir(ctx)}/exec/runs/${run.run_id}/<task>.log`);
  return ExitCode.OK;
}

export async function resetCommand(ids: string[], flags: BusyFlags, g: GlobalOptions): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const ctx = context(g);
  const r = await resetTasks(ctx, ids, { ...policy, onWait: waitNotice(policy) });
  if (r.kind === 'busy') return reportBusy(r.busy, policy);
  out(`reset to pending: ${r.value.join(', ')}`);
  return ExitCode.OK;
}
