// One manual fire of a routine (SPEC §4, §6 `routine run ID`): take the exec lock under the
// given busy rule, run, and record it through the process's recorder (recorder.ts: the record,
// or the spool when the database is away; the metrics; the notifications). Shared by the
// `routine run` command and the HTTP server's run action (SPEC §11), so both leave the same
// records and follow the same busy rules: a run refused as busy is not a tick, so nothing is
// recorded, counted or announced.

import type { Backend } from '../backend-types.js';
import type { Project } from '../config/load.js';
import type { RoutineDef } from '../config/types.js';
import type { LockRecord } from '../lock/record.js';
import { fireRoutine, type FireResult } from './firing.js';
import { causeOf } from './unstarted.js';
import type { Recorder } from './recorder.js';

export interface ManualRun {
  project: Project;
  backend: Backend;
  def: RoutineDef;
  ifBusy: 'fail' | 'skip' | 'wait';
  waitTimeoutMs?: number;
  signal: AbortSignal;
  /** Ends the notifications of its record early (default `signal`): `routine run` stopped by a
   * signal still sends the failure it records, until a second signal. */
  notifySignal?: AbortSignal;
  warn: (message: string) => void;
  /** The process's recorder: the scheduler's for its HTTP run action (so its metrics count the
   * run), one of its own for `routine run`. */
  recorder: Recorder;
  baseEnv?: NodeJS.ProcessEnv;
  onStarted?: (runId: string | null) => void;
  onWait?: (why: string, holder: LockRecord | null, holders?: LockRecord[]) => void;
  echo?: (chunk: Buffer) => void;
  /** Who started it (`cli, pid 4711`, `http, 127.0.0.1`): kept with its record. */
  by?: string;
  /** The scheduler whose page started it, with a shared database: its claimer id, which the
   * fire's open marker names (another host records the fire if that scheduler's lease runs out). */
  scheduler?: string;
}

export type ManualOutcome =
  /** Refused: the exec lock was held (after waiting, with ifBusy wait). Nothing was recorded. */
  | {
      kind: 'busy';
      holder: LockRecord | null;
      holders?: LockRecord[];
      /** Busy because waiters of other processes came first (lock/line.ts): who. */
      ahead?: string;
      reason: string;
    }
  /** It ran and is recorded, or spooled (`spooledTo`) when the database could not take it, or
   * could not be recorded at all (`unrecorded`: why; said as a warning). `announced`: its
   * notifications, delivered in the background. */
  | {
      kind: 'ran';
      fire: FireResult;
      spooled: { to: string; why: string } | null;
      unrecorded: string | null;
      announced: Promise<void>;
    };

export async function runManually(m: ManualRun): Promise<ManualOutcome> {
  const { project, backend, def } = m;
  const fire = await fireRoutine(
    {
      project,
      backend,
      clock: backend.clock,
      trigger: 'manual',
      ifBusy: m.ifBusy,
      waitTimeoutMs: m.waitTimeoutMs,
      signal: m.signal,
      killGraceMs: 5000,
      warn: m.warn,
      baseEnv: m.baseEnv,
      onStarted: m.onStarted,
      onWait: m.onWait,
      echo: m.echo,
      ...(m.scheduler ? { scheduler: m.scheduler } : {}),
    },
    def,
    new Date(backend.clock.now()),
  ).catch((err: unknown) => {
    // a manual run's open marker left behind is closed as interrupted once its process is gone;
    // the caller judges what went wrong (its exit code, its HTTP answer)
    throw causeOf(err);
  });
  if (fire === null) throw new Error('bug: a manual fire was not started');
  // a skip that closes a marker (it lost to a fire that opened in the same moment): recorded, or
  // its marker would read as a fire still going
  if (fire.result === 'skipped' && fire.closes)
    await m.recorder.record(def, project, fire, { signal: m.notifySignal ?? m.signal });
  if (fire.result === 'skipped')
    return {
      kind: 'busy',
      holder: fire.holder ?? null,
      ...(fire.holders ? { holders: fire.holders } : {}),
      ...(fire.ahead ? { ahead: fire.ahead.why } : {}),
      reason: fire.reason ?? '',
    };
  if (m.by) fire.by = m.by;
  // The fire ran: a database that went away meanwhile does not lose it (spooled on this host,
  // recorded by the next scheduler or routine command here).
  const r = await m.recorder.record(def, project, fire, { signal: m.notifySignal ?? m.signal });
  const spooled = r.deferred ? { to: r.deferred.spooledTo, why: r.deferred.why } : null;
  return { kind: 'ran', fire, spooled, unrecorded: r.failed ? r.failed.message : null, announced: r.announced };
}
