// `routinely serve --http [HOST:]PORT` (SPEC §11): the scheduler's HTTP server without the
// scheduler, for hosts that only watch a project (typically one shared through PostgreSQL). It
// fires nothing and takes no lock; SIGINT/SIGTERM stop it (exit 0) once the runs started from
// its page have ended (at most the shutdown timeout, 30 s), SIGHUP re-reads the config.

import { loadProject, type Project } from '../config/load.js';
import { ExitCode, UsageError } from '../errors.js';
import { disposable, openBackend } from '../backend.js';
import { hostId } from '../process/identity.js';
import { createLogger, type LogFormat } from '../fire/log.js';
import { flushMessage, SpoolFlusher } from '../state/spooling-store.js';
import { routineChanges } from '../scheduler/reload-changes.js';
import { httpSetup, routineRows } from './http-options.js';
import { out } from './io.js';
import type { GlobalOptions } from './globals.js';

export interface ServeFlags {
  http?: string;
  logFormat: LogFormat;
}

export async function serve(flags: ServeFlags, g: GlobalOptions): Promise<number> {
  let project: Project = loadProject({ configPath: g.config });
  const log = createLogger(flags.logFormat, out);
  const setup = await httpSetup(flags.http, project);
  if (!setup)
    throw new UsageError('serve needs an address: --http [HOST:]PORT, or "http": { "listen": … } in the config');
  await using backend = disposable(await openBackend(project));
  const host = hostId();
  const { serveHttp } = await import('../http/wiring.js');
  const server = await serveHttp({
    setup,
    routineRows,
    backend,
    host,
    log,
    project: () => project,
    schedulerKey: backend.schedulerKey(host),
  });
  // kept until the end: a second signal while runs drain changes nothing (without a listener
  // it would end the process at once, their commands left running and unrecorded)
  let onStop = (): void => {};
  const stopped = new Promise<void>((resolve) => (onStop = resolve));
  process.on('SIGINT', onStop);
  process.on('SIGTERM', onStop);
  const onHup = (): void => {
    try {
      const before = project.config.routines;
      project = loadProject({ configPath: project.configPath });
      log({
        event: 'scheduler.reloaded',
        routines: project.config.routines.length,
        ...routineChanges(before, project.config.routines),
      });
    } catch (err) {
      log({ event: 'scheduler.reload_failed', error: (err as Error).message });
    }
  };
  process.on('SIGHUP', onHup);
  // What this host's commands (a `routine run`, a run from the page) spooled while the database
  // was away is sent again from here too — at start, then every 30 s: a watching host may have
  // no scheduler.
  const halt = new AbortController();
  const store = backend.routines;
  const warn = (message: string): void => log({ event: 'scheduler.warning', message });
  let flusher: SpoolFlusher | null = null;
  if (store.flushSpool) {
    const spool = { flushSpool: store.flushSpool.bind(store) };
    try {
      const f = await spool.flushSpool(warn);
      if (f.recorded + f.released > 0) warn(flushMessage(f));
    } catch (err) {
      warn(`could not read the spool: ${(err as Error).message}`);
    }
    flusher = new SpoolFlusher({ store: spool, clock: backend.clock, warn, log: (f) => warn(flushMessage(f)) });
    flusher.start(halt.signal);
  }
  try {
    await stopped;
  } finally {
    process.off('SIGHUP', onHup);
    // the page's runs get the scheduler's default shutdown timeout (30 s) to end, as the
    // scheduler's own routines do; those still going then are stopped; all are recorded before
    // the server closes; then what they spooled is sent once more
    server.stopping();
    await server.drain();
    await server.close();
    process.off('SIGINT', onStop);
    process.off('SIGTERM', onStop);
    halt.abort();
    await flusher?.stopped();
  }
  return ExitCode.OK;
}
