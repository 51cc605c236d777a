// The HTTP server's data, wired from an open backend (SPEC §11): the same rows as `routine list
// --json`, `lock status --json` and `exec runs --json`, read through the backend the scheduler (or
// `serve`) already holds open. This module, the server and prom-client load only with --http.

import { basename } from 'node:path';
import type { Backend } from '../backend.js';
import { systemClock } from '../clock.js';
import type { Project } from '../config/load.js';
import { listRuns } from '../exec/operations.js';
import { summarize, type RunState } from '../exec/run-state.js';
import { EXEC_LOCK_KEY } from '../lock/backend.js';
import { LoopWatch, type Health } from '../http/health.js';
import { Metrics } from '../http/metrics.js';
import { startStatusServer } from '../http/server.js';
import { recentResults, type RunView, type ServerInfo, type StatusSources } from '../http/sources.js';
import type { Logger } from '../scheduler/log.js';
import type { SchedulerObserver } from '../scheduler/observer.js';
import type { HttpSetup } from './http-options.js';

interface Wiring {
  setup: HttpSetup;
  backend: Backend;
  /** The config in force (a scheduler's follows its reloads). */
  project: () => Project;
  host: string;
  log: Logger;
}

async function start(w: Wiring, mode: ServerInfo['mode'], health: () => Promise<Health>, schedulerUp: () => Promise<boolean>, metrics: Metrics) {
  const warn = (message: string): void => w.log({ event: 'http.warning', message });
  const first = w.project();
  const sources: StatusSources = {
    info: { project: first.config.project ?? basename(first.root), host: w.host, backend: w.backend.kind, mode, pid: process.pid },
    ...(w.backend.dbClock ? { clockOffsetMs: () => w.backend.dbClock!.offsetMs ?? null } : {}),
    // imported on use: a static import would make esbuild split routine-commands into a shared
    // chunk, one more file for every `routine list` to load
    routines: async () => (await import('./routine-commands.js')).routineRows(w.project(), new Date(w.backend.clock.now()), w.backend),
    recent: async (ids) => Object.fromEntries(await Promise.all(ids.map(async (id) => [id, recentResults(await w.backend.routines.history(id, warn))] as const))),
    lock: () => w.backend.lock.status(EXEC_LOCK_KEY),
    // as `exec runs --json` prints them
    runs: async (): Promise<RunView[]> =>
      (await listRuns({ project: w.project(), backend: w.backend, warn }, 20)).map((run) => {
        if (run.status === 'UNREADABLE') return run;
        const { tasks, ...rest } = run as RunState;
        return { ...rest, summary: summarize({ ...rest, tasks }) };
      }),
    health,
    schedulerUp,
  };
  const server = await startStatusServer({ listen: w.setup.listen, token: w.setup.token, sources, metrics, warn });
  w.log({ event: 'http.listening', url: server.url, token: w.setup.token !== null });
  return server;
}

export interface SchedulerHttp {
  /** For the scheduler: fires go to the metrics, loop sleeps to the health check. */
  observer: SchedulerObserver;
  /** Shutdown began: /healthz answers 503 from now on. */
  stopping(): void;
  close(): Promise<void>;
}

/** The server of `scheduler start --http`: healthy while the loop runs and the lock is held. */
export async function schedulerHttp(w: Wiring & { lockProblem: () => string | null }): Promise<SchedulerHttp> {
  const watch = new LoopWatch(systemClock, w.lockProblem);
  const metrics = new Metrics(true, w.backend.dbClock !== undefined);
  const server = await start(w, 'scheduler', async () => watch.health(), async () => watch.health().ok, metrics);
  return {
    observer: { sleeping: (ms) => watch.sleeping(ms), fired: (id, fire) => metrics.fired(id, fire) },
    stopping: () => watch.stopping(),
    close: () => server.close(),
  };
}

/** The server of `serve`: fires nothing; healthy while it can read the project's state. */
export async function serveHttp(w: Wiring & { schedulerKey: string }): Promise<{ close(): Promise<void> }> {
  const health = async (): Promise<Health> => {
    try {
      await w.backend.lock.status(EXEC_LOCK_KEY);
      return { ok: true };
    } catch (err) {
      w.log({ event: 'http.warning', message: `cannot read the state: ${(err as Error).message}` });
      return { ok: false, reason: 'cannot read the project state (see the log of routinely serve)' };
    }
  };
  const schedulerUp = async (): Promise<boolean> => (await w.backend.lock.status(w.schedulerKey)).state === 'held';
  return start(w, 'serve', health, schedulerUp, new Metrics(false, w.backend.dbClock !== undefined));
}
