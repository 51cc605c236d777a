// The one entry point for notifications (SPEC §10): after a fire is recorded, its events are
// worked out, filtered by the routine's target, built into payloads and delivered. Both the
// scheduler and `routine run` call it. It never throws and never changes the fire's result: a
// delivery that fails is a `[notify] …` log line.

import { basename } from 'node:path';
import { printable } from '../printable.js';
import { parseFrame } from '../fire/log-frames.js';
import { routineLogFiles, showRoutineLog } from '../fire/routine-log.js';
import type { Project } from '../config/load.js';
import type { NotifyEvent, RoutineDef } from '../config/types.js';
import { hostId } from '../process/identity.js';
import type { LockRecord } from '../lock/record.js';
import { holderText, type Logger } from '../fire/log.js';
import type { Fire, RoutineRecord } from '../state/routine-state.js';
import { deliver, type Delivery, type DeliveryOptions } from './deliver.js';
import { notifyEvents, notifyTarget, wanted } from './events.js';
import { buildPayload } from './payload.js';

export interface NotifyFireOptions {
  project: Project;
  def: RoutineDef;
  /** The routine's record before this fire was recorded (undefined: it never fired). */
  prior: RoutineRecord | undefined;
  /** The fire as recorded; a skip's `holder` names who held the exec lock. */
  fire: Fire & { holder?: LockRecord | null };
  /** False for a failed attempt that will be retried (it announces nothing). */
  final: boolean;
  /** [notify] log lines: the scheduler's logger, or one to stderr for `routine run`. */
  log: Logger;
  /** Default: this host's identity (ROUTINELY_HOST_ID or the host name). */
  host?: string;
  /** The routine's log file; default `<stateDir>/logs/<id>.log`. */
  logPath?: string;
  /** Aborts deliveries in flight (scheduler shutdown). */
  signal?: AbortSignal;
  /** The commands' environment, already without withheld variables (the scheduler's copy). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Tests: shorter timeouts and back-off, a clock of their own. */
  delivery?: Pick<DeliveryOptions, 'timeoutMs' | 'attempts' | 'backoffMs' | 'clock'>;
}

export interface NotifyOutcome {
  event: NotifyEvent;
  deliveries: Delivery[];
}

/** The project's name in payloads: `project` from the config, else its folder's name. */
export function projectName(project: Project): string {
  return project.config.project ?? basename(project.root);
}

export async function notifyFire(o: NotifyFireOptions): Promise<NotifyOutcome[]> {
  const outcomes: NotifyOutcome[] = [];
  try {
    const target = notifyTarget(o.def, o.project.config);
    const events = wanted(target, notifyEvents(o.prior, o.fire, o.def, o.final));
    if (!target || events.length === 0) return outcomes;
    const outputTail =
      target.outputLines > 0
        ? await runTail(o.project.stateDir, o.def.id, o.fire.run_id, target.outputLines)
        : undefined;
    for (const event of events) {
      const payload = buildPayload({
        event,
        project: projectName(o.project),
        host: o.host ?? hostId(),
        routine: o.def.id,
        prior: o.prior,
        fire: o.fire,
        log: o.logPath ?? routineLogFiles(o.project.stateDir, o.def.id).current,
        outputTail,
        holder: o.fire.holder ? holderText(o.fire.holder) : null,
        ifBusy: o.def.ifBusy,
        ...(o.def.exclusive ? { lock: o.def.lock } : {}),
      });
      const deliveries = await deliver(target, payload, {
        cwd: o.project.root,
        passEnv: o.project.config.passEnv,
        baseEnv: o.baseEnv,
        signal: o.signal,
        ...o.delivery,
      });
      for (const d of deliveries) {
        const base = {
          routine: o.def.id,
          notify_event: event,
          channel: d.channel,
          target: d.target,
          attempts: d.attempts,
        };
        o.log(
          d.delivered
            ? { event: 'notify.sent', ...base }
            : { event: 'notify.failed', ...base, error: d.error ?? 'unknown' },
        );
      }
      outcomes.push({ event, deliveries });
    }
  } catch (err) {
    // A bug or an impossible state here must not reach the fire that was just recorded.
    try {
      o.log({
        event: 'notify.failed',
        routine: o.def.id,
        notify_event: null,
        channel: null,
        target: null,
        attempts: 0,
        error: (err as Error).message,
      });
    } catch {
      // nothing left to tell
    }
  }
  return outcomes;
}

/** The last `n` lines a run printed (its log section without the frames), each escaped as
 * SPEC §12 asks; null for a fire that did not run (a skip) or whose output cannot be read. */
async function runTail(stateDir: string, routine: string, runId: string | null, n: number): Promise<string | null> {
  if (runId === null) return null;
  const chunks: Buffer[] = [];
  try {
    // two lines more: the frames around the run's output
    const r = await showRoutineLog({
      stateDir,
      id: routine,
      runId,
      lines: n + 2,
      write: (c) => chunks.push(c),
      notice: () => {},
    });
    if (r.kind !== 'shown') return null;
  } catch {
    return null;
  }
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  const tail = lines
    .filter((l) => parseFrame(l) === null)
    .slice(-n)
    .map(printable)
    .join('\n');
  // lines, as cron mails them, but not a line of megabytes (a run that printed no newline): the
  // payload keeps the end of it
  return tail.length > TAIL_MAX_CHARS ? `…${tail.slice(-TAIL_MAX_CHARS)}` : tail;
}

/** The most characters of `output_tail` (its end is kept, after a `…`). */
const TAIL_MAX_CHARS = 16 * 1024;
