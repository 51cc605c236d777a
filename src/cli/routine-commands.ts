// `routinely routine list | run | history | pause | resume` (SPEC §6).

import { cronProblem } from '../config/cron.js';
import { displayPath, loadProject, type Project } from '../config/load.js';
import type { RoutineDef } from '../config/schema.js';
import { ConfigError, ExitCode, NotFoundError } from '../errors.js';
import { fireRoutine } from '../scheduler/fire.js';
import { withBackend, type Backend } from '../backend.js';
import { routineZone } from '../scheduler/schedule.js';
import { emptyRecord, type RoutineRecord } from '../state/routine-state.js';
import { systemClock } from '../clock.js';
import { busyPolicy, type BusyFlags } from './busy.js';
import { err, formatInZone, humanDuration, out, paint, useColor, type Colour } from './io.js';
import type { GlobalOptions } from './main.js';
import { selfCli } from './scheduler-command.js';

const warnTo = (m: string): void => err(`routinely: warning: ${m}`);

function findRoutine(project: Project, id: string): RoutineDef {
  const def = project.config.routines.find((r) => r.id === id);
  if (!def) {
    const known = project.config.routines.map((r) => r.id).join(', ') || '(none)';
    throw new NotFoundError(`unknown routine ${JSON.stringify(id)} (known: ${known})`);
  }
  return def;
}

export interface RoutineRow extends RoutineRecord {
  id: string;
  schedule: string;
  timezone: string | null;
  action: string;
  enabled: boolean;
  next_run_at: string | null;
}

/** The next run of a routine, checking its schedule on the way: one croner parse per routine,
 * dropped at once (croner keeps an 80 KB year table per pattern; parsing all 100 routines for
 * validation first and again here cost a third of `routine list`'s start-up in GC). */
function nextRunOf(project: Project, r: RoutineDef, now: Date): string | null {
  let next: string | null = null;
  const problem = cronProblem(r.schedule, routineZone(r, project), (cron) => {
    next = r.enabled ? (cron.nextRun(now)?.toISOString() ?? null) : null;
  });
  if (problem) {
    const i = project.config.routines.indexOf(r);
    throw new ConfigError(displayPath(project.configPath), [{ path: `routines[${i}].schedule`, message: `${JSON.stringify(r.schedule)} is not a valid cron expression (${problem})` }]);
  }
  return next;
}

/** The `routine list --json` rows; with `backend`, read through that open backend (the HTTP
 * server's, SPEC §11) instead of opening one for the call. */
export async function routineRows(project: Project, now: Date, backend?: Backend): Promise<RoutineRow[]> {
  const state = backend ? await backend.routines.read(warnTo) : await withBackend(project, (b) => b.routines.read(warnTo));
  return project.config.routines.map((r) => ({
    id: r.id,
    schedule: r.schedule,
    timezone: routineZone(r, project) ?? null,
    action: r.action,
    enabled: r.enabled,
    next_run_at: nextRunOf(project, r, now),
    ...(state.routines[r.id] ?? emptyRecord()),
  }));
}

const RESULT_WORD: Record<string, [string, Colour]> = {
  success: ['ok', 'green'],
  failure: ['failed', 'red'],
  skipped: ['skipped', 'yellow'],
};

export async function routineList(flags: { json?: boolean; check?: boolean }, g: GlobalOptions): Promise<number> {
  // Schedules are checked while their next run is computed, one parse each (see nextRunOf).
  const project = loadProject({ configPath: g.config, schedules: false });
  const now = new Date();
  const rows = await routineRows(project, now);
  const failing = rows.filter((r) => r.enabled && r.last_result === 'failure');
  if (flags.json) out(JSON.stringify(rows, null, 2));
  else printTable(rows, now);
  if (flags.check && failing.length > 0) {
    err(`routinely: failing routine${failing.length > 1 ? 's' : ''}: ${failing.map((r) => `${r.id} (${r.last_reason ?? 'failed'})`).join(', ')}`);
    return ExitCode.FAILED;
  }
  return ExitCode.OK;
}

function printTable(rows: RoutineRow[], now: Date): void {
  if (rows.length === 0) {
    out('no routines in the config');
    return;
  }
  const color = useColor();
  const table = rows.map((r) => {
    const next = r.next_run_at ? `${formatInZone(new Date(r.next_run_at), r.timezone ?? undefined).slice(0, 19)} (in ${humanDuration(Date.parse(r.next_run_at) - now.getTime())})` : r.enabled ? '-' : 'disabled';
    const last = r.last_finished_at ? `${humanDuration(now.getTime() - Date.parse(r.last_finished_at))} ago` : 'never';
    const [word, colour] = r.last_result ? RESULT_WORD[r.last_result]! : ['-', 'gray' as Colour];
    const result = r.last_result === 'failure' && r.consecutive_failures > 1 ? `${word} x${r.consecutive_failures}` : word;
    return {
      cells: [
        r.id,
        `${r.schedule}${r.timezone ? ` (${r.timezone})` : ''}`,
        next,
        last,
        result,
        `${r.counts.success} / ${r.counts.failure} / ${r.counts.skipped}`,
        r.paused ? `paused${r.paused_note ? `: ${r.paused_note}` : ''}` : '',
      ],
      colour,
    };
  });
  const header = ['ROUTINE', 'SCHEDULE', 'NEXT', 'LAST', 'RESULT', 'OK / FAILED / SKIPPED', 'PAUSED'];
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t.cells[i]!.length)));
  const line = (cells: string[], resultColour?: Colour): string =>
    cells
      .map((c, i) => {
        const padded = c.padEnd(widths[i]!);
        return i === 4 && resultColour ? paint(padded, resultColour, color) : padded;
      })
      .join('  ')
      .trimEnd();
  out(line(header));
  for (const t of table) out(line(t.cells, t.colour));
}

export async function routineRun(id: string, flags: BusyFlags, g: GlobalOptions): Promise<number> {
  const policy = busyPolicy(flags, 'fail');
  const project = loadProject({ configPath: g.config });
  const def = findRoutine(project, id);
  const stop = new AbortController();
  let received: 'SIGINT' | 'SIGTERM' | null = null;
  const onSignal = (sig: 'SIGINT' | 'SIGTERM'): void => {
    received ??= sig;
    stop.abort(`stopped by ${sig}`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const result = await fireRoutine({
      project, routine: def, cli: selfCli(), clock: systemClock, scheduledAt: new Date(), ifBusy: policy.ifBusy,
      waitTimeoutMs: policy.waitTimeoutMs, signal: stop.signal, killGraceMs: 5000,
      onStarted: () => out(`started ${id}`),
    });
    await withBackend(project, (b) => b.routines.recordFire(id, { ...result, trigger: 'manual' }, warnTo));
    const took = `in ${(result.duration_ms / 1000).toFixed(1)}s`;
    if (result.result === 'success') out(`succeeded ${id} ${took}${result.run_id ? ` (run ${result.run_id})` : ''}`);
    else if (result.result === 'skipped') out(`skipped ${id}: ${result.reason ?? 'exec busy'}`);
    else out(`failed ${id}: ${result.reason ?? 'failed'} ${took}  (output: ${project.stateDir}/logs/${id}.log)`);
    if (received) return received === 'SIGINT' ? ExitCode.SIGINT : ExitCode.SIGTERM;
    if (result.result === 'skipped') return result.child_exit === ExitCode.BUSY ? ExitCode.BUSY : ExitCode.OK;
    return result.result === 'success' ? ExitCode.OK : ExitCode.FAILED;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

export async function routineHistory(id: string, flags: { limit: number; json?: boolean }, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  findRoutine(project, id);
  const entries = (await withBackend(project, (b) => b.routines.history(id, warnTo))).slice(-flags.limit).reverse();
  if (flags.json) {
    out(JSON.stringify(entries, null, 2));
    return ExitCode.OK;
  }
  if (entries.length === 0) {
    out(`no history for ${id} yet`);
    return ExitCode.OK;
  }
  const color = useColor();
  for (const e of entries) {
    const [word, colour] = RESULT_WORD[e.result] ?? [e.result, 'gray' as Colour];
    const late = Date.parse(e.started_at) - Date.parse(e.scheduled_at);
    const took = humanDuration(Date.parse(e.finished_at) - Date.parse(e.started_at));
    out(`${e.scheduled_at}  ${paint(word.padEnd(7), colour, color)}  ${took.padStart(6)}${late > 1000 ? `  (started ${humanDuration(late)} late)` : ''}${e.reason ? `  ${e.reason}` : ''}${e.run_id ? `  ${e.run_id}` : ''}`);
  }
  return ExitCode.OK;
}

export async function routinePause(id: string, flags: { note?: string }, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  findRoutine(project, id);
  const change = await withBackend(project, (b) => b.routines.setPaused(id, true, flags.note ?? null));
  const note = change.note ? ` (${change.note})` : '';
  out(change.wasPaused ? `${id} was already paused${note}` : `paused ${id}${note}; a running scheduler stops firing it`);
  return ExitCode.OK;
}

export async function routineResume(id: string, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  findRoutine(project, id);
  const change = await withBackend(project, (b) => b.routines.setPaused(id, false, null));
  out(change.wasPaused ? `resumed ${id}` : `${id} was not paused; nothing to resume`);
  return ExitCode.OK;
}
