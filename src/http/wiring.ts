// The HTTP server's data, wired from an open backend (SPEC §11): the same rows as `routine list
// --json` (the CLI hands its row builder in), `lock status --json` and `exec runs --json`, read
// through the backend the scheduler (or `serve`) already holds open. This module, the server and
// prom-client load only with --http.
// (Over 300 lines: every route's source and the actions, over one open backend.)

import { basename } from 'node:path';
import type { Backend } from '../backend.js';
import { systemClock } from '../clock.js';
import type { Project } from '../config/load.js';
import { listRuns } from '../exec-api.js';
import { summarize, type RunState } from '../exec/run-state.js';
import { EXEC_LOCK_KEY } from '../lock/lock-backend.js';
import { busyReason, lockStatusAll, slotsOf } from '../lock/named.js';
import { PREVIOUS_RUN } from '../fire/previous-run.js';
import { readSchedulerState } from '../control/status.js';

/** The lock a routine takes, as views name it: "exec", a named lock, or "none" (not exclusive). */
const routineLock = (r: { exclusive: boolean; lock: string } | undefined): string =>
  !r ? 'exec' : r.exclusive ? r.lock : 'none';
import { LoopWatch, type Health } from './health.js';
import { Metrics } from './metrics.js';
import { startStatusServer } from './server.js';
import { recentResults, type RoutineView, type RunView, type ServerInfo, type StatusSources } from './sources.js';
import type { Logger } from '../fire/log.js';
import type { SchedulerObserver } from '../fire/observer.js';
import type { ListenAddress } from '../config/listen.js';
import type { RoutineDef } from '../config/types.js';
import { NotFoundError } from '../errors.js';
import { commandEnv } from '../exec/process.js';
import { describeBusy } from '../lock/stale.js';
import { processGone } from '../process/identity.js';
import { isSpooled } from '../state/spool.js';
import type { RoutineActions, RunAnswer, RunOutput } from './sources.js';
import { runManually } from '../fire/manual-run.js';
import { HttpProblem } from './actions.js';
import { Recorder } from '../fire/recorder.js';
import { notifyFire } from '../notify/notify.js';

/** The stop action's grace between SIGTERM and SIGKILL (`routine stop`'s default). */
const STOP_GRACE_MS = 10_000;

export interface HttpSetup {
  listen: ListenAddress;
  token: string | null;
  /** `http.actions`: POST /api/routines/ID/run|pause|resume (always with the token). */
  actions: boolean;
}

/** The rows of `routine list --json` (the CLI's builder, handed in: nothing below cli/ imports
 * it). */
export type RoutineRows = (
  project: Project,
  now: Date,
  backend: Backend,
  warn: (message: string) => void,
) => Promise<RoutineView[]>;

interface Wiring {
  setup: HttpSetup;
  routineRows: RoutineRows;
  backend: Backend;
  /** The config in force (a scheduler's follows its reloads). */
  project: () => Project;
  host: string;
  log: Logger;
  /** How long runs started by the run action may go on once shutdown begins (the scheduler's
   * --shutdown-timeout, as its own routines get); then they are stopped and recorded. */
  shutdownTimeoutMs?: number;
}

/** What the run action records through: the scheduler's recorder (its metrics count the run),
 * or for `serve` one of the server's own; and, for a scheduler, why it holds its fires now (the
 * state folder cannot take records: a run is refused as the scheduler's own fires are held). */
interface WithRecorder {
  recorder: Recorder;
  held?: () => string | null;
}

/** What `routine logs ID --run RUN --lines N` prints, as the page shows it: null when the log
 * holds no such run. */
async function runOutput(stateDir: string, id: string, runId: string, lines: number): Promise<RunOutput | null> {
  const { showRoutineLog } = await import('../fire/routine-log.js');
  const chunks: Buffer[] = [];
  const notices: string[] = [];
  // one line more than shown tells whether earlier lines were left out
  const r = await showRoutineLog({
    stateDir,
    id,
    runId,
    lines: lines + 1,
    write: (c) => chunks.push(c),
    notice: (m) => notices.push(m),
  });
  if (r.kind !== 'shown') return null;
  const cut = chunks.length > lines;
  let text = Buffer.concat(cut ? chunks.slice(1) : chunks);
  // a handful of very long lines are cut too: the page shows at most this much of the end
  const MAX_BYTES = 256 * 1024;
  if (text.length > MAX_BYTES) text = text.subarray(text.length - MAX_BYTES);
  return { run_id: runId, text: text.toString('utf8'), lines, cut_lines: cut || text.length === MAX_BYTES, notices };
}

/** The actions of SPEC §11, exactly as `routine run|pause|resume` act: the routine's own busy
 * rule (else `fail`), the same records, the notifications. A run goes on after the answer (it
 * started, or waits for the lock); the server's close() stops the runs still going and waits for
 * their records. */
function actions(
  w: Wiring & WithRecorder,
  mode: ServerInfo['mode'],
): RoutineActions & { stop(): void; close(): Promise<void> } {
  const going = new Set<Promise<unknown>>();
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  /** Shutdown began: no run starts from here (the scheduler's own ticks are skipped then too). */
  let closing = false;
  const find = (id: string): { project: Project; def: RoutineDef } => {
    const project = w.project();
    const def = project.config.routines.find((r) => r.id === id);
    if (!def) throw new NotFoundError(`unknown routine ${JSON.stringify(id)}`);
    return { project, def };
  };
  const stops = new Map<string, ReturnType<RoutineActions['stopFire']>>();
  const stopOnce = async (id: string, address: string): ReturnType<RoutineActions['stopFire']> => {
    const def = w.project().config.routines.find((r) => r.id === id);
    // a fire of a routine a reload removed runs on (holding its lock): stoppable while open
    if (!def && !(await w.backend.routines.readOne(id, () => {}))?.open_fires?.length) return { state: 'unknown' };
    if (def && def.action !== 'command')
      return {
        state: 'refused',
        error: `routine ${id} runs ${def.action} in the scheduler's own process, with no process group of its own to stop`,
      };
    const { stopRoutine } = await import('../fire/stop-request.js');
    const r = await stopRoutine({
      backend: w.backend,
      stateDir: w.project().stateDir,
      routine: id,
      who: { via: 'http', address: address.replace(/^::ffff:/, '') },
      graceMs: STOP_GRACE_MS,
      clock: w.backend.clock,
    });
    w.log({
      event: 'http.action',
      action: 'stop',
      routine: id,
      outcome: r.kind === 'stopped' ? `stopped run ${r.runId}${r.killed ? ' (SIGKILL)' : ''}` : r.kind,
    });
    switch (r.kind) {
      case 'stopped':
        return { state: 'stopped', run_id: r.runId, killed: r.killed, recorded: r.recorded, waited_ms: r.waitedMs };
      case 'not-found':
        return { state: 'not-found', run_id: r.runId };
      case 'elsewhere':
        return { state: 'elsewhere', host: r.host, pid: r.pid };
      default:
        return { state: 'idle' };
    }
  };
  return {
    run: (id, address) => {
      const { project, def } = find(id);
      if (closing)
        return Promise.reject(new HttpProblem(503, `not started: routinely ${mode} is stopping (nothing recorded)`));
      const held = w.held?.() ?? null;
      if (held !== null)
        return Promise.reject(
          new HttpProblem(
            503,
            `not started: ${held}; the scheduler holds its fires until it is writable (nothing recorded)`,
          ),
        );
      // the routine's own busy rule (a run from the page has no flags)
      const policy = {
        ifBusy: def.manualIfBusy,
        waitTimeoutMs:
          def.manualIfBusy === 'wait' && def.waitTimeoutSeconds !== undefined
            ? def.waitTimeoutSeconds * 1000
            : undefined,
      };
      return new Promise<RunAnswer>((answer, fail) => {
        const warn = (message: string): void => w.log({ event: 'http.warning', message: `run ${id}: ${message}` });
        const run = runManually({
          project,
          backend: w.backend,
          def,
          ifBusy: policy.ifBusy,
          waitTimeoutMs: policy.waitTimeoutMs,
          signal: stop.signal,
          warn,
          recorder: w.recorder,
          baseEnv: commandEnv(process.env, project.config.passEnv),
          by: `http, ${address.replace(/^::ffff:/, '')}`,
          // a scheduler's page on a shared database: its marker names the scheduler (its lease);
          // `serve` holds no such lease, and its fires are judged on its host as `routine run`'s
          ...(mode === 'scheduler' && w.backend.routines.sharedTicks ? { scheduler: w.recorder.claimant.claimer } : {}),
          onStarted: (runId) => answer({ state: 'started', run_id: runId }),
          onWait: (why) => answer({ state: 'waiting', why }),
        }).then(
          async (o) => {
            if (o.kind === 'ran') await o.announced;
            // its own fire still going (a routine never runs beside itself), or its lock busy
            const itself = o.kind === 'busy' && o.reason === PREVIOUS_RUN;
            const busy = itself ? `${id}: ${PREVIOUS_RUN}` : busyReason(def.exclusive ? def.lock : 'exec');
            if (o.kind === 'busy') {
              if (policy.ifBusy === 'skip') answer({ state: 'skipped', reason: busy });
              else
                answer({
                  state: 'busy',
                  error: itself
                    ? busy
                    : `${busy}: ${policy.ifBusy === 'wait' ? 'still ' : ''}held by ${describeBusy(o, w.backend.clock.now())}`,
                });
            } else {
              // a fire that failed before it started (its tasks unreadable, the lock's store down)
              // never called onStarted: it is answered with its record (a no-op when answered)
              answer({ state: 'finished', result: o.fire.result, reason: o.fire.reason, run_id: o.fire.run_id });
            }
            w.log({
              event: 'http.action',
              action: 'run',
              routine: id,
              outcome:
                o.kind === 'busy'
                  ? `not run, ${busy}`
                  : `${o.fire.result}${o.fire.reason ? ` (${o.fire.reason})` : ''}`,
            });
          },
          (err: Error) => {
            warn(err.message);
            fail(err);
          },
        );
        going.add(run);
        void run.finally(() => going.delete(run));
      });
    },
    pause: async (id, note) => {
      find(id);
      const change = await w.backend.routines.setPaused(id, true, note);
      w.log({
        event: 'http.action',
        action: 'pause',
        routine: id,
        outcome: change.wasPaused ? 'was already paused' : `paused${note ? ` (${note})` : ''}`,
      });
      return { was_paused: change.wasPaused, note: change.note };
    },
    // stops of one routine asked at once (a double click, a retrying client) share the first
    // one's answer: the others found the fire's group already ending and said "not found" or
    // "idle" of a fire being stopped
    stopFire: (id, address) => {
      const going = stops.get(id);
      if (going) return going;
      const p = stopOnce(id, address).finally(() => stops.delete(id));
      stops.set(id, p);
      return p;
    },
    resume: async (id) => {
      find(id);
      const change = await w.backend.routines.setPaused(id, false, null);
      w.log({
        event: 'http.action',
        action: 'resume',
        routine: id,
        outcome: change.wasPaused ? 'resumed' : 'was not paused',
      });
      return { was_paused: change.wasPaused };
    },
    // Shutdown began: the runs going on get the shutdown timeout, as the scheduler's own do,
    // then they are stopped (and recorded as stopped).
    stop: () => {
      closing = true;
      if (timer || stop.signal.aborted) return;
      timer = setTimeout(() => stop.abort(`stopped: routinely ${mode} is stopping`), w.shutdownTimeoutMs ?? 30_000);
      timer.unref();
    },
    close: async () => {
      closing = true;
      if (!timer) stop.abort(`stopped: routinely ${mode} is stopping`);
      // (and the stops under way: their answers go out before the server closes)
      await Promise.allSettled([...going, ...stops.values()]);
      clearTimeout(timer);
    },
  };
}

async function start(
  w: Wiring & WithRecorder,
  mode: ServerInfo['mode'],
  health: () => Promise<Health>,
  schedulerUp: () => Promise<boolean>,
  metrics: Metrics,
) {
  const warn = (message: string): void => w.log({ event: 'http.warning', message });
  const acts = w.setup.actions ? actions(w, mode) : null;
  const first = w.project();
  const sources: StatusSources = {
    info: {
      project: first.config.project ?? basename(first.root),
      host: w.host,
      backend: w.backend.kind,
      mode,
      pid: process.pid,
    },
    ...(w.backend.dbClock ? { clockOffsetMs: () => w.backend.dbClock!.offsetMs ?? null } : {}),
    // what the state says of itself (a damaged history line) goes to this process's log
    routines: () => w.routineRows(w.project(), new Date(w.backend.clock.now()), w.backend, warn),
    routineConfig: () =>
      Object.fromEntries(
        w
          .project()
          .config.routines.map((r) => [r.id, { exclusive: r.exclusive, if_busy: r.ifBusy, lock: routineLock(r) }]),
      ),
    recent: async (ids) =>
      Object.fromEntries(
        await Promise.all(
          ids.map(async (id) => [id, recentResults(await w.backend.routines.history(id, warn))] as const),
        ),
      ),
    // as `lock status --json`: the exec lock, and every named lock in use beside it
    lock: () => lockStatusAll(w.backend.lock, (name) => slotsOf(w.project().config.locks, name)),
    // as `exec runs --json` prints them
    runs: async (): Promise<RunView[]> =>
      (await listRuns({ project: w.project(), backend: w.backend, warn }, 20)).map((run) => {
        if (run.status === 'UNREADABLE') return run;
        const { tasks, ...rest } = run as RunState;
        return { ...rest, summary: summarize({ ...rest, tasks }) };
      }),
    health,
    schedulerUp,
    // newest first by scheduled time, as `routine history ID -r` (the same store query), not in
    // the order the records were written (a queued or retried fire is recorded late)
    fires: async (id, n) =>
      (await w.backend.routines.recentFires([id], { limit: n, since: -Infinity, until: Infinity }, warn))
        .reverse()
        .map(({ id: _i, closes: _c, key: _k, recorded_at: _r, newest: _n, routine: _routine, ...e }) => e),
    output: (id, runId, lines) => runOutput(w.project().stateDir, id, runId, lines),
    running: async (id) => {
      const open = ((await w.backend.routines.readOne(id, warn))?.open_fires ?? []).filter(
        (f) => !processGone(f.owner),
      );
      const first = open.sort((a, b) => a.started_at.localeCompare(b.started_at))[0];
      return first ? { run_id: first.run_id, started_at: first.started_at } : null;
    },
    lost: async (id) =>
      ((await w.backend.routines.readOne(id, warn))?.open_fires ?? [])
        .filter((f) => processGone(f.owner) && !isSpooled(w.project().stateDir, f.id))
        .map((f) => ({ started_at: f.started_at, pid: f.owner.pid, host: f.owner.host })),
    ...(acts ? { actions: acts, actionsOn: () => w.project().config.http?.actions === true } : {}),
  };
  const server = await startStatusServer({ listen: w.setup.listen, token: w.setup.token, sources, metrics, warn });
  w.log({ event: 'http.listening', url: server.url, token: w.setup.token !== null });
  return {
    /** Runs started by the run action are stopped (and recorded as stopped). */
    stopping: () => acts?.stop(),
    /** Waits for the runs started by the run action (stopped once the shutdown timeout passed). */
    drain: async () => acts?.close(),
    // the runs first: the server answers (/healthz 503 while stopping) until they are done
    close: async () => {
      await acts?.close();
      await server.close();
    },
  };
}

export interface SchedulerHttp {
  /** For the scheduler: fires go to the metrics, loop sleeps to the health check. */
  observer: SchedulerObserver;
  /** Shutdown began: /healthz answers 503 from now on. */
  stopping(): void;
  /** Waits for the runs started over HTTP (the shutdown timeout, then stopped). */
  drain(): Promise<void>;
  close(): Promise<void>;
}

/** The server of `scheduler start --http`: healthy while the loop runs and the lock is held. */
export async function schedulerHttp(
  w: Wiring & WithRecorder & { lockProblem: () => string | null },
): Promise<SchedulerHttp> {
  const watch = new LoopWatch(systemClock, w.lockProblem);
  const metrics = new Metrics(true, w.backend.dbClock !== undefined, (id) =>
    routineLock(w.project().config.routines.find((r) => r.id === id)),
  );
  const server = await start(
    w,
    'scheduler',
    async () => watch.health(),
    async () => watch.health().ok,
    metrics,
  );
  return {
    observer: { sleeping: (ms) => watch.sleeping(ms), fired: (id, fire) => metrics.fired(id, fire) },
    stopping: () => {
      watch.stopping();
      server.stopping();
    },
    drain: () => server.drain(),
    close: () => server.close(),
  };
}

/** The server of `serve`: fires nothing; healthy while it can read the project's state. */
export async function serveHttp(
  w: Wiring & { schedulerKey: string },
): Promise<{ stopping(): void; drain(): Promise<void>; close(): Promise<void> }> {
  // from SIGTERM on: 503, so a load balancer stops sending it anything while its runs drain
  let stopping = false;
  const health = async (): Promise<Health> => {
    if (stopping) return { ok: false, reason: 'routinely serve is stopping' };
    try {
      await w.backend.lock.status(EXEC_LOCK_KEY);
      return { ok: true };
    } catch (err) {
      w.log({ event: 'http.warning', message: `cannot read the state: ${(err as Error).message}` });
      return { ok: false, reason: 'cannot read the project state (see the log of routinely serve)' };
    }
  };
  // one rule with `routine list`'s first line: a scheduler of the project holds its lock, on any
  // host (not only this one's)
  const schedulerUp = async (): Promise<boolean> => (await readSchedulerState(w.backend)).running;
  const metrics = new Metrics(false, w.backend.dbClock !== undefined, (id) =>
    routineLock(w.project().config.routines.find((r) => r.id === id)),
  );
  // the page's runs are recorded as the scheduler records its fires: counted, announced
  const recorder = new Recorder({
    store: w.backend.routines,
    clock: w.backend.clock,
    log: w.log,
    host: w.host,
    stateDir: () => w.project().stateDir,
    warn: (message) => w.log({ event: 'http.warning', message }),
    notify: (n) => notifyFire({ ...n, log: w.log, host: w.host }),
  });
  recorder.observe({ fired: (id, fire) => metrics.fired(id, fire) });
  const server = await start({ ...w, recorder }, 'serve', health, schedulerUp, metrics);
  return {
    ...server,
    stopping: () => {
      stopping = true;
      server.stopping();
    },
  };
}
