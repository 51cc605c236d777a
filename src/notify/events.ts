// Which notifications a recorded fire raises (SPEC §10), and where they go. Pure: the routine's
// record before the fire, the fire and the routine's settings in, events out.

import type { Config, NotifyDef, NotifyEvent, RoutineDef } from '../config/types.js';
import { starvingSkip, type Fire, type RoutineRecord } from '../state/routine-state.js';

/** The events `fire` raises, given the routine's record before it was recorded.
 *
 * - `failure`: the fire failed and no retry follows (`final`); a failed attempt that will be
 *   retried raises nothing.
 * - `recovery`: the first success after a failure. A success on a retry recovers only from the
 *   failures before this tick's first attempt: attempt n (n ≥ 2, `trigger: "retry"`) follows
 *   n − 1 failed attempts of the same tick, which were never announced.
 * - `starved`: once, when consecutive busy skips (the exec lock held by something else; not the
 *   routine's own previous run still going) reach `starvedAfterSkips`; a success or a failure
 *   resets the count, and only then can it be raised again.
 *
 * An ordinary skip raises nothing. */
export function notifyEvents(
  prior: RoutineRecord | undefined,
  fire: Fire,
  def: { starvedAfterSkips: number },
  final: boolean,
): NotifyEvent[] {
  switch (fire.result) {
    case 'failure':
      return final ? ['failure'] : [];
    case 'success': {
      const failedBefore = prior?.consecutive_failures ?? 0;
      const sameTick =
        fire.trigger === 'retry' && fire.attempt !== undefined && fire.attempt > 1 ? fire.attempt - 1 : 0;
      return failedBefore > sameTick ? ['recovery'] : [];
    }
    case 'skipped':
      return starvingSkip(fire) && (prior?.consecutive_skips ?? 0) + 1 === def.starvedAfterSkips ? ['starved'] : [];
  }
}

/** Where a routine's notifications go: its own `notify` (which replaces the top-level one),
 * none when it is `false`, else the top-level one; null when nothing is configured. */
export function notifyTarget(def: Pick<RoutineDef, 'notify'>, config: Pick<Config, 'notify'>): NotifyDef | null {
  if (def.notify === false) return null;
  const target = def.notify ?? config.notify;
  if (!target || (target.webhook === undefined && target.command === undefined)) return null;
  return target;
}

/** The events of `events` that `target` asks for. */
export function wanted(target: NotifyDef | null, events: readonly NotifyEvent[]): NotifyEvent[] {
  return target ? events.filter((e) => target.on.includes(e)) : [];
}
