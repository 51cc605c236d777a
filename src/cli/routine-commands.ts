// `routinely routine list | run | history | pause | resume` (SPEC §6).
// (Over 300 lines: one short function per subcommand, sharing how the project and backend are
// opened and how a routine's rows are built.)

import { printable } from '../printable.js';
import { systemClock } from '../clock.js';
import { cronProblem } from '../config/cron.js';
import { displayPath, loadProject, type Project } from '../config/load.js';
import { EXEC_LOCK_NAME, ID_PATTERN, type RoutineDef } from '../config/types.js';
import { busyReason } from '../lock/named.js';
import { ConfigError, ExitCode, NotFoundError, UsageError } from '../errors.js';
import { parseTimeArg } from './time-arg.js';
import { runManually } from '../fire/manual-run.js';
import { PREVIOUS_RUN } from '../fire/previous-run.js';
import { Recorder } from '../fire/recorder.js';
import { notifyFire } from '../notify/notify.js';
import { hostId, processGone } from '../process/identity.js';
import { createLogger } from '../fire/log.js';
import { disposable, openBackend, withBackend, type Backend } from '../backend.js';
import { routineZone } from '../config/schedule.js';
import { emptyRecord, isInterrupted, PAUSE_NOTE_MAX, type RoutineResult } from '../state/routine-state.js';
import { isSpooled, spoolCount, spoolDir } from '../state/spool.js';
import { busyPolicy, waitNotice, type BusyFlags } from './busy.js';
import { err, formatInZone, humanDuration, out, paint, useColor, zoneTime, type Colour, type ZoneTime } from './io.js';
import {
  listRows,
  phasesOf,
  withWaits,
  withRemovedRunning,
  stateOnlyRoutine,
  schedulerLineOf,
  type ListRow,
  type ListedRoutine,
  type SchedulerLine,
} from './routine-list.js';
import { readSchedulerState } from '../control/status.js';
import { manualWaits, waitingNow } from './manual-waits.js';
import { ensureListCache } from '../scheduler/upcoming.js';
import { describeBusy } from '../lock/stale.js';
import type { GlobalOptions } from './globals.js';
import type { ListFlags, ListInputs } from './routine-list-command.js';
import { loadForView, stateOnly } from './view-project.js';
import { tenthsOfSeconds } from '../duration.js';

const warnTo = (m: string): void => err(`routinely: warning: ${m}`);

/** The recorder of a command (`routine run`): its fires recorded, announced ([notify] lines on
 * stderr), a full disk tried a few times. */
function commandRecorder(project: Project, backend: Backend): Recorder {
  const log = createLogger('text', err);
  const host = hostId();
  return new Recorder({
    store: backend.routines,
    clock: backend.clock,
    log,
    warn: warnTo,
    stateDir: () => project.stateDir,
    host,
    notify: (n) => notifyFire({ ...n, log, host }),
  });
}

/** Sends what this host spooled while the database was away (SPEC §6), before anything reads or
 * records; returns how many records are still spooled. Only the database backend spools. */
async function flushSpooled(project: Project, b: Backend): Promise<number> {
  if (!b.routines.flushSpool) return 0;
  try {
    const r = await b.routines.flushSpool(warnTo);
    if (r.recorded > 0)
      warnTo(
        `recorded ${r.recorded} fire${r.recorded === 1 ? '' : 's'} spooled on this host while the database was away`,
      );
    return r.left;
  } catch (e) {
    warnTo(`could not read the spool: ${(e as Error).message}`);
    return spoolCount(project.stateDir);
  }
}

function findRoutine(project: Project, id: string): RoutineDef {
  const def = project.config.routines.find((r) => r.id === id);
  if (!def) {
    const known = project.config.routines.map((r) => r.id).join(', ') || '(none)';
    throw new NotFoundError(`unknown routine ${JSON.stringify(id)} (known: ${known})`);
  }
  return def;
}

/** The next run of a routine in its zone, checking its schedule on the way: one croner parse
 * per routine, dropped at once (croner keeps an 80 KB year table per pattern; parsing all 100
 * routines for validation first and again here cost a third of `routine list`'s start-up in GC). */
function nextRunOf(project: Project, r: RoutineDef, now: Date): ZoneTime | null {
  let next: Date | null = null;
  const zone = routineZone(r, project);
  const problem = cronProblem(r.schedule, zone, (cron) => {
    next = r.enabled ? cron.nextRun(now) : null;
  });
  if (problem) {
    const i = project.config.routines.indexOf(r);
    throw new ConfigError(displayPath(project.configPath), [
      {
        path: `routines[${i}].schedule`,
        message: `${JSON.stringify(r.schedule)} is not a valid cron expression (${problem})`,
      },
    ]);
  }
  return next ? zoneTime(next, zone) : null;
}

/** The routines of a validated config as the list shows them. */
export function listedRoutines(project: Project, now: Date): ListedRoutine[] {
  return project.config.routines.map((r) => ({
    id: r.id,
    schedule: r.schedule,
    timezone: routineZone(r, project) ?? null,
    action: r.action,
    enabled: r.enabled,
    lock: r.exclusive ? r.lock : 'none',
    starvedAfterSkips: r.starvedAfterSkips,
    next: nextRunOf(project, r, now),
  }));
}

/** The `routine list --json` rows (the config's routines, then any it no longer has while a fire
 * of it runs on); with `backend`, read through that open backend (the HTTP server's, SPEC §11)
 * instead of opening one for the call. */
export async function routineRows(
  project: Project,
  now: Date,
  backend?: Backend,
  warn: (message: string) => void = warnTo,
): Promise<ListRow[]> {
  const routines = listedRoutines(project, now);
  const read = async (b: Backend) => ({
    state: await b.routines.read(warn),
    // (a scheduler's waits with their locks' holders at the look)
    boards: await waitingNow(b.lock, phasesOf(await b.routines.readPhases(warn)), project.config.locks),
    // manual fires waiting in their lock's line (manual-waits.ts)
    waits: await manualWaits(b.lock, routines, project.config.locks),
  });
  const { state, boards, waits } = backend ? await read(backend) : await withBackend(project, read);
  return listRows(
    withRemovedRunning(routines, state.routines),
    state.routines,
    emptyRecord,
    withWaits(waits, boards),
    (id) => isSpooled(project.stateDir, id),
  );
}

const RESULT_WORD: Record<string, [string, Colour]> = {
  success: ['ok', 'green'],
  failure: ['failed', 'red'],
  skipped: ['skipped', 'yellow'],
};

/** Whether a scheduler runs for the project (on any host, with a database). */
async function schedulerLine(backend: Backend): Promise<SchedulerLine> {
  return schedulerLineOf(await readSchedulerState(backend));
}

/** `routine list`'s inputs by validating the config and reading through its backend (the
 * command is routine-list-command.ts; this is its source when the cache cannot answer). Its
 * warnings are said as they come. */
export async function freshListInputs(flags: ListFlags, g: GlobalOptions): Promise<ListInputs> {
  let now = new Date();
  let project: Project;
  let routines: ListedRoutine[] | null = null;
  let fromState = false;
  try {
    // Schedules are checked while their next run is computed, one parse each (see nextRunOf).
    project = loadProject({ configPath: g.config, schedules: false });
    routines = listedRoutines(project, now);
  } catch (error) {
    // --check is for monitoring: an invalid config is a problem to report (exit 2), not to
    // look past.
    if (flags.check || !(error instanceof ConfigError)) throw error;
    project = stateOnly(g, error);
    fromState = true;
  }
  const { state, boards, waits, scheduler, clockNow, spooled } = await withBackend(project, async (b) => {
    const left = await flushSpooled(project, b);
    return {
      state: await b.routines.read(warnTo),
      // (a scheduler's waits with their locks' holders at the look)
      boards: await waitingNow(b.lock, phasesOf(await b.routines.readPhases(warnTo)), project.config.locks),
      // manual fires waiting in their lock's line (manual-waits.ts)
      waits: routines ? await manualWaits(b.lock, routines, project.config.locks) : {},
      scheduler: await schedulerLine(b),
      clockNow: b.caps.sharedClock ? b.clock.now() : null,
      spooled: left,
    };
  });
  if (spooled > 0)
    warnTo(
      `${spooled} record${spooled === 1 ? '' : 's'} of fires on this host ${spooled === 1 ? 'waits' : 'wait'} in ${spoolDir(project.stateDir)}, not in the counts yet`,
    );
  // With a database, next and last runs are reckoned by its clock, as the scheduler fires by it.
  if (clockNow !== null) {
    now = new Date(clockNow);
    if (!fromState) routines = listedRoutines(project, now);
  }
  // With an invalid config, the routines the state knows (no schedule, action or next run).
  routines ??= Object.keys(state.routines).map((id) => stateOnlyRoutine(id, 3));
  // the next `routine list` starts from the cache, scheduler or not
  if (!fromState) ensureListCache(project, now.getTime());
  const phases = withWaits(waits, boards);
  return {
    routines: fromState ? routines : withRemovedRunning(routines, state.routines),
    records: state.routines,
    phases,
    scheduler,
    warnings: [],
    now: now.getTime(),
    fromState,
    stateDir: project.stateDir,
  };
}

/** `routine run ID [--json]`: with --json the command's output goes to stderr and stdout holds
 * one JSON document: the fire's record (as `routine history --json` shows it, with `routine`),
 * or `{ routine, result: "busy", holder }` when it was refused, exit codes unchanged. */
export async function routineRun(id: string, flags: BusyFlags & { json?: boolean }, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  const def = findRoutine(project, id);
  // The routine's own ifBusy unless --if-busy is given, else the manual default (SPEC §4).
  const policy = busyPolicy(flags, def.manualIfBusy);
  if (policy.ifBusy === 'wait' && flags.ifBusy === undefined && def.waitTimeoutSeconds !== undefined)
    policy.waitTimeoutMs = def.waitTimeoutSeconds * 1000;
  const stop = new AbortController();
  // (SIGHUP and SIGQUIT too: the command is in a group of its own, so a terminal's hang-up or
  // Ctrl-\ reaches only this process, whose default end would leave the fire running unrecorded)
  let received: StopSignal | null = null;
  // the failure a stop records is still announced (SPEC §6: every process that records a fire
  // notifies), within its deliveries' own time limits; a second signal cuts them short
  const notifyStop = new AbortController();
  const onSignal = (sig: StopSignal): void => {
    if (received !== null) notifyStop.abort(`stopped by ${sig}`);
    received ??= sig;
    stop.abort(`stopped by ${sig}`);
  };
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);
  await using backend = disposable(await openBackend(project));
  // the notifications of fires this command recorded go out before it exits, whatever it answers
  let reconciled: Promise<void> = Promise.resolve();
  try {
    // What this host spooled goes first (its real results), then fires left open by a process
    // that died are recorded, once each (SPEC §6).
    await flushSpooled(project, backend);
    const recorder = commandRecorder(project, backend);
    reconciled = (await recorder.reconcile(project, stop.signal)).announced;
    const outcome = await runManually({
      project,
      backend,
      def,
      ifBusy: policy.ifBusy,
      waitTimeoutMs: policy.waitTimeoutMs,
      signal: stop.signal,
      notifySignal: notifyStop.signal,
      warn: warnTo,
      recorder,
      by: `cli, pid ${process.pid}`,
      onStarted: () => (flags.json ? undefined : out(`started ${id}`)),
      onWait: waitNotice(policy, def.exclusive ? def.lock : EXEC_LOCK_NAME),
      // the command's output also goes to this terminal (SPEC §10), and always to its log
      echo: (chunk) => (flags.json ? process.stderr : process.stdout).write(chunk),
    });
    if (outcome.kind === 'busy') {
      // Refused as busy, a manual run is not a tick: nothing recorded, not counted towards
      // starvation, nobody notified (SPEC §4); the holder is named as every command names it.
      if (received) return SIGNAL_EXIT[received];
      const holder = describeBusy(outcome, backend.clock.now());
      // its own fire still going elsewhere (a routine never runs beside itself), or its lock busy
      const itself = outcome.reason === PREVIOUS_RUN;
      const busy = itself ? `${id}: ${PREVIOUS_RUN}` : busyReason(def.exclusive ? def.lock : EXEC_LOCK_NAME);
      if (flags.json)
        out(
          JSON.stringify(
            {
              routine: id,
              result: policy.ifBusy === 'skip' ? 'skipped' : 'busy',
              reason: busy,
              holder,
              recorded: false,
            },
            null,
            2,
          ),
        );
      if (policy.ifBusy === 'skip') {
        if (flags.json) return ExitCode.OK;
        out(`skipped: ${busy}`);
        return ExitCode.OK;
      }
      if (flags.json) return ExitCode.BUSY;
      if (policy.ifBusy === 'wait')
        err(`${busy}: still held by ${holder} after waiting ${(policy.waitTimeoutMs ?? 0) / 1000}s`);
      else if (itself) err(`${busy} in another process`);
      else {
        err(`${busy}: held by ${holder}`);
        err(`  to wait for it instead, add --if-busy wait (--wait-timeout S gives up after S seconds)`);
      }
      return ExitCode.BUSY;
    }
    await outcome.announced;
    const result = outcome.fire;
    const took = `in ${tenthsOfSeconds(result.duration_ms)}`;
    if (flags.json) {
      // the fields `routine history --json` shows of it (the duration is finished - started)
      const { closes: _c, key: _k, unstarted: _u, duration_ms: _d, ...shown } = result;
      out(JSON.stringify({ routine: id, ...shown, log: `${project.stateDir}/logs/${id}.log` }, null, 2));
    } else if (result.result === 'success')
      out(`succeeded ${id} ${took}${result.run_id ? ` (run ${result.run_id})` : ''}`);
    else out(`failed ${id}: ${result.reason ?? 'failed'} ${took}  (output: ${project.stateDir}/logs/${id}.log)`);
    if (received) return SIGNAL_EXIT[received];
    return result.result === 'success' ? ExitCode.OK : ExitCode.FAILED;
  } finally {
    await reconciled;
    for (const sig of STOP_SIGNALS) process.off(sig, onSignal);
  }
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;
type StopSignal = (typeof STOP_SIGNALS)[number];
/** 128 + the signal's number (SPEC §7). */
const SIGNAL_EXIT: Record<StopSignal, number> = { SIGHUP: 129, SIGINT: 130, SIGQUIT: 131, SIGTERM: 143 };

export interface HistoryFlags {
  limit?: number;
  json?: boolean;
  since?: string;
  until?: string;
  result?: string;
  reverse?: boolean;
}

/** --result takes the words the stored records use and the words the view prints. */
const RESULTS: Record<string, RoutineResult> = {
  success: 'success',
  ok: 'success',
  failure: 'failure',
  failed: 'failure',
  skipped: 'skipped',
};
export const RESULT_CHOICES = Object.keys(RESULTS);

/** `routine history [ID]` (SPEC §10), as journalctl shows a journal: in time order, the newest
 * at the bottom (`--reverse`: newest first), one routine's or every routine's merged, filtered
 * by --since/--until (scheduled time) and --result; --limit keeps the newest N (20 by default,
 * unless a time range is given). Times in each routine's zone, labelled, as `routine list`
 * shows them (the routine's timezone, else this machine's); JSON keeps UTC ISO-8601. A routine
 * no longer in the config keeps its history: `routine history ID` shows it with a note. */
export async function routineHistory(id: string | undefined, flags: HistoryFlags, g: GlobalOptions): Promise<number> {
  const now = Date.now();
  const since = flags.since !== undefined ? parseTimeArg('--since', flags.since, now) : -Infinity;
  const until = flags.until !== undefined ? parseTimeArg('--until', flags.until, now) : Infinity;
  if (since > until) throw new UsageError(`--since ${flags.since} is after --until ${flags.until}`);
  const result = flags.result === undefined ? undefined : RESULTS[flags.result];
  if (flags.result !== undefined && result === undefined)
    throw new UsageError(`--result ${JSON.stringify(flags.result)}: one of ${RESULT_CHOICES.join(', ')}`);
  const limit = flags.limit ?? (flags.since !== undefined || flags.until !== undefined ? Infinity : 20);
  const { project, invalid } = loadForView(g);
  if (id !== undefined && !ID_PATTERN.test(id)) throw new NotFoundError(`${JSON.stringify(id)} is not a routine id`);
  const configured = invalid ? null : new Set(project.config.routines.map((r) => r.id));
  const { newest, removed, lost } = await withBackend(project, async (b) => {
    await flushSpooled(project, b);
    // with an invalid config, the routines the state knows
    const ids =
      id !== undefined ? [id] : configured ? [...configured] : Object.keys((await b.routines.read(warnTo)).routines);
    // the newest that match, at a cost that follows --limit, not the histories' length
    const fires = await b.routines.recentFires(
      ids,
      { limit, since, until, ...(result !== undefined ? { result } : {}) },
      warnTo,
    );
    // one routine no longer in the config: its kept history, if it has one (the state is read
    // only then: the usual history command pays nothing for it)
    const gone = id !== undefined && configured !== null && !configured.has(id);
    if (gone && fires.length === 0 && !Object.hasOwn((await b.routines.read(warnTo)).routines, id)) {
      findRoutine(project, id); // neither configured nor ever recorded: unknown
    }
    // fires of this host whose process is gone: not in the history until someone records them
    // (the next scheduler or routine run), said below the records rather than left unseen
    const open = id !== undefined && !flags.json ? ((await b.routines.readOne(id, warnTo))?.open_fires ?? []) : [];
    return {
      newest: fires,
      removed: gone,
      // (a fire whose record waits in the spool is recorded, not lost: views show it so)
      lost: open.filter((o) => processGone(o.owner) && !isSpooled(project.stateDir, o.id)),
    };
  });
  if (removed) warnTo(`routine ${id} is no longer in ${displayPath(project.configPath)}; this is its kept history`);
  // recentFires answers in time order; --reverse: newest first
  const entries = flags.reverse ? [...newest].reverse() : newest;
  if (flags.json) {
    // the fields of SPEC §3, in one order on both backends; the bookkeeping (id, closes, key,
    // recorded_at) stays in the files
    const shown = entries.map(({ id: _i, closes: _c, key: _k, recorded_at: _r, newest: _n, routine, ...e }) =>
      id !== undefined ? e : { routine, ...e },
    );
    out(JSON.stringify(shown, null, 2));
    return ExitCode.OK;
  }
  const sayLost = (): void => {
    for (const o of lost)
      out(
        `(a fire of ${o.started_at} is not recorded yet: pid ${o.owner.pid} on ${o.owner.host}, which ran it, is gone; the next scheduler or routine run records it as interrupted)`,
      );
  };
  if (entries.length === 0) {
    const filtered = flags.since !== undefined || flags.until !== undefined || flags.result !== undefined;
    out(`no ${id !== undefined ? `history for ${id}` : 'fires'}${filtered ? ' in that range' : ' yet'}`);
    sayLost();
    return ExitCode.OK;
  }
  const zones = new Map(invalid ? [] : project.config.routines.map((r) => [r.id, routineZone(r, project)] as const));
  const color = useColor();
  const width = Math.max(...entries.map((e) => e.routine.length));
  for (const e of entries) {
    const [word, colour] = RESULT_WORD[e.result] ?? [e.result, 'gray' as Colour];
    // a skip never ran (no lateness, no duration); a fire lost with its process ran for a time
    // nobody knows
    const skip = e.result === 'skipped';
    const late = skip ? 0 : Date.parse(e.started_at) - Date.parse(e.scheduled_at);
    const took = skip || isInterrupted(e) ? '–' : humanDuration(Date.parse(e.finished_at) - Date.parse(e.started_at));
    const who = id !== undefined ? '' : `${e.routine.padEnd(width)}  `;
    const at = Number.isFinite(Date.parse(e.scheduled_at))
      ? formatInZone(new Date(e.scheduled_at), zones.get(e.routine))
      : printable(e.scheduled_at);
    out(
      `${at}  ${who}${paint(word.padEnd(7), colour, color)}  ${took.padStart(6)}${late > 1000 ? `  (started ${humanDuration(late)} late)` : ''}${e.reason ? `  ${printable(e.reason)}` : ''}${e.run_id ? `  ${printable(e.run_id)}` : ''}`,
    );
  }
  sayLost();
  return ExitCode.OK;
}

export async function routinePause(id: string, flags: { note?: string }, g: GlobalOptions): Promise<number> {
  const length = flags.note === undefined ? 0 : [...flags.note].length;
  if (length > PAUSE_NOTE_MAX)
    throw new UsageError(`--note: at most ${PAUSE_NOTE_MAX} characters (it has ${length}), as the HTTP pause takes`);
  const project = loadProject({ configPath: g.config });
  findRoutine(project, id);
  const change = await withBackend(project, (b) => b.routines.setPaused(id, true, flags.note ?? null));
  const note = change.note ? ` (${printable(change.note)})` : '';
  out(
    change.wasPaused ? `${id} was already paused${note}` : `paused ${id}${note}; a running scheduler stops firing it`,
  );
  return ExitCode.OK;
}

/** `routine stop ID` (SPEC §10): see fire/stop-request.ts. Nothing running: exit 0, said. */
export async function routineStop(id: string, flags: { timeout: number }, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  // a fire of a routine a reload removed from the config runs on to its end: it can still be
  // stopped by its id while its open marker is there (it holds its lock until then)
  const removed =
    !project.config.routines.some((r) => r.id === id) &&
    ID_PATTERN.test(id) &&
    ((await withBackend(project, (b) => b.routines.readOne(id, () => {})))?.open_fires?.length ?? 0) > 0;
  const def = removed ? null : findRoutine(project, id);
  if (def && def.action !== 'command')
    throw new UsageError(
      `routine ${id} runs ${def.action} in the scheduler's own process, with no process group of its own to stop; routine stop stops command routines`,
    );
  const { stopRoutine } = await import('../fire/stop-request.js');
  const r = await withBackend(project, (backend) =>
    stopRoutine({
      backend,
      stateDir: project.stateDir,
      routine: id,
      who: { via: 'cli', pid: process.pid },
      graceMs: flags.timeout * 1000,
      clock: systemClock,
    }),
  );
  switch (r.kind) {
    case 'idle':
      out(`${id} is not running; nothing to stop`);
      return ExitCode.OK;
    case 'elsewhere':
      err(`${id} runs on ${r.host} (pid ${r.pid}): stop it there (routine stop only signals processes of this host)`);
      return ExitCode.FAILED;
    case 'not-found':
      err(
        `${id}: a fire is open${r.runId ? ` (run ${r.runId})` : ''} but no process of it was found on this host; it may be ending on its own (see routine list)`,
      );
      return ExitCode.FAILED;
    case 'stopped':
      out(
        `stopped ${id} (run ${r.runId}) after ${tenthsOfSeconds(r.waitedMs)}${r.killed ? ` (SIGKILL: it outlived the ${flags.timeout}s grace)` : ''}; ${r.recorded ? 'recorded as failure: stopped by hand' : 'its record is not written yet: the process that ran it records it as it ends'}`,
      );
      return ExitCode.OK;
  }
}

export async function routineResume(id: string, g: GlobalOptions): Promise<number> {
  const project = loadProject({ configPath: g.config });
  findRoutine(project, id);
  const change = await withBackend(project, (b) => b.routines.setPaused(id, false, null));
  out(change.wasPaused ? `resumed ${id}` : `${id} was not paused; nothing to resume`);
  return ExitCode.OK;
}
