// `routinely routine logs ID [--run RUN_ID] [--lines N] [--follow]` (SPEC §10): a routine's
// output. A read-only view: with an invalid config it warns and shows what the state folder holds.

import { displayPath } from '../config/load.js';
import { ID_PATTERN } from '../config/types.js';
import { ExitCode, NotFoundError, UsageError } from '../errors.js';
import { isRunId } from '../run-id.js';
import { showRoutineLog } from '../fire/routine-log.js';
import { TerminalStream } from '../printable.js';
import { err, out } from './io.js';
import type { GlobalOptions } from './globals.js';
import { loadForView } from './view-project.js';

export interface LogsFlags {
  run?: string;
  lines?: number;
  follow?: boolean;
}

export async function routineLogs(id: string, flags: LogsFlags, g: GlobalOptions): Promise<number> {
  const { project, invalid } = loadForView(g);
  if (!invalid && !project.config.routines.some((r) => r.id === id)) {
    const known = project.config.routines.map((r) => r.id).join(', ') || '(none)';
    throw new NotFoundError(`unknown routine ${JSON.stringify(id)} (known: ${known})`);
  }
  // With an invalid config any id is looked for, but only ever as an id, never as a path.
  if (!ID_PATTERN.test(id)) throw new NotFoundError(`${JSON.stringify(id)} is not a routine id`);
  if (flags.run !== undefined && !isRunId(flags.run)) {
    throw new UsageError(
      `--run: ${JSON.stringify(flags.run)} is not a run id (r-…; routinely routine history ${id} lists them)`,
    );
  }

  // Following stops on SIGINT/SIGTERM (exit 0, as tail -f is meant to be stopped) or when
  // nobody reads our output any more.
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  const onGone = (): void => stop.abort();
  if (flags.follow) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    process.stdout.on('error', onGone);
    process.stdout.on('close', onGone);
  }
  // what a run printed reaches the terminal through the one escaping rule (SPEC §12): colours
  // kept, but no clear-screen, cursor move or window title (OSC) from a command's output
  const text = new TerminalStream();
  const write = (s: string): void => {
    if (s.length > 0 && !process.stdout.destroyed) process.stdout.write(s);
  };
  try {
    const r = await showRoutineLog({
      stateDir: project.stateDir,
      id,
      runId: flags.run,
      lines: flags.lines,
      follow: flags.follow,
      signal: stop.signal,
      write: (chunk) => write(text.push(chunk)),
      notice: (m) => err(`routinely: ${m}`),
    });
    write(text.end());
    switch (r.kind) {
      case 'no-log':
        out(`no output logged for ${id} yet (${displayPath(r.path)} does not exist)`);
        return ExitCode.OK;
      case 'run-not-found':
        throw new NotFoundError(
          `no run ${flags.run} in the log of ${id} (${displayPath(r.path)} and its rotated .1)${r.inProgress ? '; a run of an exec action in progress is named only when it ends: add --follow to wait for it' : ''}; routinely routine history ${id} lists its runs`,
        );
      default:
        return ExitCode.OK;
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.stdout.off('error', onGone);
    process.stdout.off('close', onGone);
  }
}
