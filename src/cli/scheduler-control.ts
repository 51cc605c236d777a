// `routinely scheduler status [--json]` and `scheduler stop [--timeout S]` (SPEC §10). Both work
// while the config is invalid (a view, and a stop that a broken config must not prevent).

import { withBackend } from '../backend.js';
import { ExitCode } from '../errors.js';
import { hostId } from '../process/identity.js';
import { printable } from '../printable.js';
import { stopScheduler } from '../control/control.js';
import { readSchedulerState } from '../control/status.js';
import { err, humanDuration, out } from './io.js';
import type { GlobalOptions } from './globals.js';
import { schedulerLine, stateJson, statusLines } from './scheduler-line.js';
import { loadForView } from './view-project.js';

export async function schedulerStatus(flags: { json?: boolean }, g: GlobalOptions): Promise<number> {
  const { project } = loadForView(g);
  const state = await withBackend(project, (b) => readSchedulerState(b));
  if (flags.json) out(JSON.stringify(stateJson(state), null, 2));
  else for (const line of statusLines(state)) out(line);
  // as `systemctl status` of an inactive unit
  return state.running ? ExitCode.OK : ExitCode.NOT_RUNNING;
}

export async function schedulerStop(flags: { timeout: number }, g: GlobalOptions): Promise<number> {
  const { project } = loadForView(g);
  const here = hostId();
  const r = await withBackend(project, (b) =>
    stopScheduler(b, {
      timeoutMs: flags.timeout * 1000,
      stateDir: project.stateDir,
      onSignalled: (s) =>
        out(
          `stopping the scheduler (pid ${s.pid} on ${printable(s.host)}): sent SIGTERM, waiting up to ${flags.timeout}s for it to exit`,
        ),
    }),
  );
  switch (r.kind) {
    case 'stopped':
      out(`scheduler stopped (pid ${r.scheduler.pid}, after ${humanDuration(r.waitedMs)})`);
      return ExitCode.OK;
    case 'timeout':
      err(
        `routinely: the scheduler (pid ${r.scheduler.pid}) is still running after ${flags.timeout}s: it lets running routines finish for up to its --shutdown-timeout. ` +
          `Wait longer with: routinely scheduler stop --timeout S; or end it now with: kill -KILL ${r.scheduler.pid} (its running fires are then recorded as interrupted)`,
      );
      return ExitCode.FAILED;
    case 'elsewhere': {
      const s = r.scheduler;
      const where =
        s.host === here
          ? `in another pid namespace on this host (a container?) as pid ${s.pid}`
          : `on ${s.host} (pid ${s.pid}), not on this host (${here})`;
      err(
        printable(
          `routinely: the scheduler runs ${where}: not signalling it; stop it there with: routinely scheduler stop`,
        ),
      );
      return ExitCode.FAILED;
    }
    case 'unverified':
      err(printable(`routinely: not signalling pid ${r.scheduler.pid}: ${r.why}`));
      return ExitCode.FAILED;
    case 'not-running': {
      const others = r.state.schedulers;
      if (others.length > 0) {
        out(
          printable(
            `scheduler: not running on this host (${here}); nothing to stop here. Running on: ${others.map((s) => `${s.host} (pid ${s.pid})`).join(', ')}`,
          ),
        );
      } else {
        out(`${schedulerLine(r.state)}; nothing to stop`);
      }
      // nothing to do (SPEC §7: 0), as `systemctl stop` of a unit that is not running; 3 is
      // `scheduler status`'s answer
      return ExitCode.OK;
    }
  }
}
