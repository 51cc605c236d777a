// Ending the process groups a dead (or expired) holder left behind, before its lock is reclaimed
// (SPEC §4.4): their run is already interrupted, and they must never run beside the next holder.
// flock(1) keeps the lock while such orphans live; we end them instead.

import type { Clock } from '../clock.js';
import { errnoCode } from '../errors.js';
import type { LivenessProbe } from './identity.js';
import type { ChildGroup } from './record.js';

export interface OrphanReport {
  /** Group ids that were signalled. */
  ended: number[];
  /** Group ids that needed SIGKILL after the grace period. */
  killed: number[];
}

/** Decides whether process group `child.pid` still belongs to the recorded child. Never signals
 * a reused pid: the leader must have the recorded start time, or be gone while members of its
 * group live on (the kernel does not hand out a pid still used as a process-group id). */
export function orphanGroupAlive(child: ChildGroup, probe: LivenessProbe): boolean {
  const leader = probe.inspect(child.pid);
  if (leader.state === 'alive') {
    return child.start_time !== null && leader.startTime === child.start_time && leader.pgid === child.pid;
  }
  if (leader.state === 'dead') return probe.groupMembers(child.pid).length > 0;
  return false;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if (errnoCode(err) !== 'ESRCH') throw err;
  }
}

export async function endOrphanGroups(
  children: readonly ChildGroup[],
  probe: LivenessProbe,
  clock: Clock,
  graceMs: number,
): Promise<OrphanReport> {
  const live = children.filter((c) => orphanGroupAlive(c, probe));
  const report: OrphanReport = { ended: live.map((c) => c.pid), killed: [] };
  if (live.length === 0) return report;
  for (const c of live) signalGroup(c.pid, 'SIGTERM');
  const deadline = clock.monotonic() + graceMs;
  let remaining = live;
  while (remaining.length > 0 && clock.monotonic() < deadline) {
    await clock.sleep(20);
    remaining = remaining.filter((c) => groupStillRuns(c.pid, probe));
  }
  for (const c of remaining) {
    signalGroup(c.pid, 'SIGKILL');
    report.killed.push(c.pid);
  }
  return report;
}

function groupStillRuns(pgid: number, probe: LivenessProbe): boolean {
  return probe.inspect(pgid).state === 'alive' || probe.groupMembers(pgid).length > 0;
}
