// One manual fire of a routine (SPEC §4, §6 `routine run ID`): take the exec lock under the
// given busy rule, run, record (or spool when the database is away), notify. Shared by the
// `routine run` command and the HTTP server's run action (SPEC §11), so both leave the same
// records and follow the same busy rules: a run refused as busy is not a tick, so nothing is
// recorded, counted or announced.

import type { Backend } from '../backend.js';
import type { Project } from '../config/load.js';
import type { RoutineDef } from '../config/types.js';
import type { LockRecord } from '../lock/record.js';
import { notifyFire } from '../notify/notify.js';
import { fireRoutine, type FireResult } from './firing.js';
import type { Logger } from './log.js';
import { withKey } from './store.js';

export interface ManualRun {
  project: Project;
  backend: Backend;
  def: RoutineDef;
  ifBusy: 'fail' | 'skip' | 'wait';
  waitTimeoutMs?: number;
  signal: AbortSignal;
  warn: (message: string) => void;
  /** [notify] log lines. */
  log: Logger;
  host?: string;
  baseEnv?: NodeJS.ProcessEnv;
  onStarted?: (runId: string | null) => void;
  onWait?: (why: string, holder: LockRecord | null) => void;
  echo?: (chunk: Buffer) => void;
}

export type ManualOutcome =
  /** Refused: the exec lock was held (after waiting, with ifBusy wait). Nothing was recorded. */
  | { kind: 'busy'; holder: LockRecord | null }
  /** It ran and is recorded, or spooled (`spooledTo`) when the database could not take it. */
  | { kind: 'ran'; fire: FireResult; spooled: { to: string; why: string } | null };

export async function runManually(m: ManualRun): Promise<ManualOutcome> {
  const { project, backend, def } = m;
  const fire = await fireRoutine({
    project, backend, clock: backend.clock, trigger: 'manual', ifBusy: m.ifBusy, waitTimeoutMs: m.waitTimeoutMs,
    signal: m.signal, killGraceMs: 5000, warn: m.warn, baseEnv: m.baseEnv, onStarted: m.onStarted, onWait: m.onWait, echo: m.echo,
  }, def, new Date(backend.clock.now()));
  if (fire === null) throw new Error('bug: a manual fire was not started');
  if (fire.result === 'skipped') return { kind: 'busy', holder: fire.holder ?? null };
  // the record before this fire, for its notifications (SPEC §10: a manual run notifies too)
  const notifies = def.notify !== false && (def.notify !== undefined || project.config.notify !== null);
  const prior = notifies ? (await backend.routines.read(m.warn)).routines[def.id] : undefined;
  // The fire ran: a database that went away meanwhile does not lose it (spooled on this host,
  // recorded by the next scheduler or routine command here).
  const deferred = await backend.routines.recordFire(def.id, withKey(fire), m.warn);
  const spooled = deferred ? { to: deferred.spooledTo, why: deferred.why } : null;
  if (spooled) m.warn(`could not record ${def.id} now (${spooled.why}); spooled to ${spooled.to}: the next scheduler or routine command on this host records it`);
  if (notifies) await notifyFire({ project, def, prior, fire, final: true, log: m.log, signal: m.signal, ...(m.host ? { host: m.host } : {}) });
  return { kind: 'ran', fire, spooled };
}
