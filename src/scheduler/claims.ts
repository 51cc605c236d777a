// Claims nobody works on (SPEC §9: a claimed tick is always fired, recorded or given back). With
// a shared database each scheduler looks, every quarter of the lease TTL (1 to 15 s), for
// unsettled claims — no fire opened, no record — whose claimer's scheduler lease is not held any
// more (it died, or paused past its TTL), and for its own that it no longer works on (a claim
// whose answer was lost and that it gave up on at the routine's next tick). It takes each over
// (one conditional UPDATE: of several sweepers one wins; a claimer that comes back finds its
// claim gone and neither fires nor records it) and fires it late, before the routine's next
// tick, or records it as skipped with the reason. The fires such a scheduler left open (on any
// host: a lockless routine's has no lock to take over) are recorded interrupted.

import type { Clock } from '../clock.js';
import type { Entry } from '../fire/fire-request.js';
import type { Recorder } from '../fire/recorder.js';
import type { Runner } from './runner.js';
import type { OrphanClaim } from '../state/store.js';
import type { Project } from '../config/load.js';

/** Claims looked at per sweep, at most (the oldest first; the rest in the next). */
const SWEEP_BATCH = 200;

/** How often a scheduler sweeps: a quarter of the lease TTL, from 1 to 15 s. */
export const sweepEveryMs = (ttlMs: number): number => Math.min(15_000, Math.max(1_000, ttlMs / 4));

export interface SweepOptions {
  recorder: Recorder;
  runner: Runner;
  clock: Clock;
  /** The routine of that id in the config in force (a claim of a routine removed is left). */
  entry: (id: string) => Entry | undefined;
  /** The config in force (the fires of gone schedulers are announced per its notify). */
  project: () => Project;
  log: (event: {
    event: 'routine.taken_over';
    routine: string;
    scheduled_at: string;
    from: string;
    fires: boolean;
  }) => void;
  warn: (message: string) => void;
}

/** The reason a taken-over claim is recorded with when its time to fire has passed. */
export function takenOverReason(c: OrphanClaim, own: boolean): string {
  return own
    ? "claim unanswered: the database did not answer this scheduler's claim until the routine's next tick"
    : `claimer died: the scheduler on ${c.host} claimed it and stopped before firing it`;
}

/** One sweep; returns how many claims it took over. */
export async function sweepClaims(o: SweepOptions): Promise<number> {
  const me = o.recorder.claimant.claimer;
  let taken = 0;
  for (const c of await o.recorder.orphanClaims(SWEEP_BATCH)) {
    const own = c.claimer === me;
    // a tick this scheduler works on is its own business, also a claim of another's it took
    if (o.runner.holdsClaim(c.routine, c.scheduledAt)) continue;
    const entry = o.entry(c.routine);
    if (!entry) continue;
    const from = own ? 'this scheduler' : c.host;
    // said before the tick's own lines (a fire's start, a skip's record)
    const adopted = o.runner.adopt(entry, c, takenOverReason(c, own), (fires) =>
      o.log({
        event: 'routine.taken_over',
        routine: c.routine,
        scheduled_at: c.scheduledAt.toISOString(),
        from,
        fires,
      }),
    );
    if (await adopted) taken++;
  }
  // the fires a gone scheduler left open (a claim settles when its fire opens, so the claims
  // above never show them): recorded interrupted, or `routine list` said running for ever
  const closed = await o.recorder.closeOpenOfGoneClaimers(o.project());
  if (closed > 0)
    o.warn(
      `recorded ${closed} fire${closed === 1 ? '' : 's'} left open by a scheduler whose lease ran out (it stopped or died) as failed (interrupted)`,
    );
  return taken;
}

/** Sweeps every `everyMs` until `stop`; a sweep that fails is said once until one works. */
export async function sweepLoop(o: SweepOptions, everyMs: number, stop: AbortSignal): Promise<void> {
  let failing = false;
  while (!stop.aborted) {
    await o.clock.sleep(everyMs, stop);
    if (stop.aborted) return;
    try {
      await sweepClaims(o);
      failing = false;
      // between ticks too: a scheduler whose claims failed catches up as soon as it can
      o.runner.databaseAnswered();
    } catch (err) {
      if (!failing) o.warn(`could not look for claims nobody fires: ${(err as Error).message}`);
      failing = true;
    }
  }
}
