// Ending the process groups a dead (or expired) holder left behind, before its lock is reclaimed
// (SPEC §4.4): their run is already interrupted, and they must never run beside the next holder.
// flock(1) keeps the lock while such orphans live; we end them instead.
//
// A signal goes only to a group whose identity is proven (SPEC §12): never to pid 0 or 1; the
// leader alive with the recorded start time, leading its own group, and running as this user;
// or, the leader gone, a member of the group running as this user whose environment carries the
// dead holder's `ROUTINELY_LOCK_ID` (every command routinely starts under a lock gets it); with
// such a group, the other groups of its session (job control).

import type { Clock } from '../clock.js';
import { errnoCode, OrphanBlockedError } from '../errors.js';
import { myUid } from '../fs/files.js';
import type { LivenessProbe } from '../process/identity.js';
import type { ChildGroup } from '../lock/record.js';
import type { OrphanReport } from '../lock/status.js';

export type { OrphanReport };

/** The environment entry that marks processes started under lock `lockId`. */
export const lockMarker = (lockId: string): string => `ROUTINELY_LOCK_ID=${lockId}`;

export type GroupVerdict =
  | { kind: 'ours' }
  | { kind: 'gone' }
  /** Cannot be proven to be the recorded group: left alone. */
  | { kind: 'unverified' }
  /** Proven to be the recorded group, but running as another user. */
  | { kind: 'foreign'; uid: number };

/** Decides whether process group `child.pid` is still the recorded child of holder `lockId`. */
export function judgeGroup(child: ChildGroup, lockId: string | null, probe: LivenessProbe): GroupVerdict {
  if (!Number.isSafeInteger(child.pid) || child.pid <= 1) return { kind: 'unverified' };
  const me = myUid();
  const leader = probe.inspect(child.pid);
  if (leader.state === 'alive') {
    if (child.start_time === null || leader.startTime !== child.start_time || leader.pgid !== child.pid)
      return { kind: 'unverified' };
    const uid = probe.ownerUid?.(child.pid) ?? null;
    if (uid !== null && me !== null && uid !== me) return { kind: 'foreign', uid };
    return { kind: 'ours' };
  }
  if (leader.state !== 'dead') return { kind: 'unverified' };
  // The leader has exited; Linux hands out no pid that is still a process-group id, so members
  // of group `pid` are the recorded group's, or of a new group a reused pid started. Only a
  // member that carries the holder's marker tells them apart.
  const members = probe.groupMembers(child.pid);
  if (members.length === 0) return { kind: 'gone' };
  if (lockId === null || !probe.environHas) return { kind: 'unverified' };
  for (const m of members) {
    const uid = probe.ownerUid?.(m) ?? null;
    if (uid !== null && me !== null && uid !== me) continue;
    if (probe.environHas(m, lockMarker(lockId)) === true) return { kind: 'ours' };
  }
  return { kind: 'unverified' };
}

function signalGroup(pgid: number, signal: NodeJS.Signals, probe: LivenessProbe, holderPid: number | null): void {
  if (pgid <= 1) return; // never kill(0) or kill(-1): that reaches every process we may signal
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if (errnoCode(err) === 'ESRCH') return;
    if (errnoCode(err) === 'EPERM') throw blocked(pgid, probe.ownerUid?.(pgid) ?? null, holderPid);
    throw err;
  }
}

function blocked(pgid: number, uid: number | null, holderPid: number | null): OrphanBlockedError {
  const owner = uid === null ? 'another user' : `uid ${uid}`;
  const by = holderPid === null ? 'a previous holder' : `the previous holder (pid ${holderPid})`;
  return new OrphanBlockedError(
    `cannot end process group ${pgid}, left running by ${by}: it runs as ${owner}, whom this user may not signal. ` +
      `Stop it (for example \`sudo kill -TERM -- -${pgid}\`) and try again; routinely never starts new work beside a previous holder's processes.`,
  );
}

export interface EndOrphansOptions {
  /** The lock id of the holder that started them (its marker identifies members). */
  lockId: string | null;
  holderPid?: number | null;
  probe: LivenessProbe;
  clock: Clock;
  graceMs: number;
}

/** Ends every verified live group: SIGTERM, then SIGKILL for what is left after `graceMs`.
 * Throws OrphanBlockedError for a verified group running as another user. */
export async function endOrphanGroups(children: readonly ChildGroup[], o: EndOrphansOptions): Promise<OrphanReport> {
  const live: ChildGroup[] = [];
  for (const c of children) {
    const v = judgeGroup(c, o.lockId, o.probe);
    if (v.kind === 'foreign') throw blocked(c.pid, v.uid, o.holderPid ?? null);
    if (v.kind === 'ours') live.push(c);
  }
  // and the other groups of each one's session (job control: `bash -c 'set -m; job &'`), as the
  // command's exit ends them (SPEC §4.11): while group `pid` lives, no process is handed that
  // pid, so a process of session `pid` is of the session the recorded command began
  for (const c of [...live]) {
    for (const pgid of o.probe.sessionGroups?.(c.pid) ?? [])
      if (pgid > 1 && !live.some((l) => l.pid === pgid)) live.push({ pid: pgid, start_time: null });
  }
  const report: OrphanReport = { ended: live.map((c) => c.pid), killed: [] };
  if (live.length === 0) return report;
  for (const c of live) signalGroup(c.pid, 'SIGTERM', o.probe, o.holderPid ?? null);
  const deadline = o.clock.monotonic() + o.graceMs;
  let remaining = live;
  while (remaining.length > 0 && o.clock.monotonic() < deadline) {
    await o.clock.sleep(20);
    remaining = remaining.filter((c) => groupStillRuns(c.pid, o.probe));
  }
  for (const c of remaining) {
    signalGroup(c.pid, 'SIGKILL', o.probe, o.holderPid ?? null);
    report.killed.push(c.pid);
  }
  return report;
}

function groupStillRuns(pgid: number, probe: LivenessProbe): boolean {
  return probe.inspect(pgid).state === 'alive' || probe.groupMembers(pgid).length > 0;
}

/** The environment entry of every command a routine's fire or an exec run starts. */
export const runMarker = (runId: string): string => `ROUTINELY_RUN_ID=${runId}`;

/** Ends what a run left running on this host once the process that ran it died (SIGKILL): the
 * groups whose leader carries the run's marker, with the other groups of their sessions —
 * SIGTERM, then SIGKILL after a second, as a lock's takeover ends its dead holder's — and says
 * so. This is how a routine without a lock (no holder whose takeover would end them) never runs
 * beside what its interrupted fire started. Linux only (elsewhere nothing can find them). */
export async function endRunOrphans(
  runId: string,
  o: { probe: LivenessProbe; clock: Clock; warn: (message: string) => void },
): Promise<void> {
  // (a notification command of the run carries its id too, and ROUTINELY_EVENT: never one of these)
  const leaders = o.probe.markedGroupLeaders?.(runMarker(runId), 'ROUTINELY_EVENT') ?? [];
  if (leaders.length === 0) return;
  const groups = leaders.map((p) => ({ pid: p.pid, start_time: p.startTime }));
  try {
    const n = (await endOrphanGroups(groups, { lockId: null, ...o, graceMs: RUN_ORPHAN_GRACE_MS })).ended.length;
    if (n > 0)
      o.warn(
        `ended ${n} process group${n === 1 ? '' : 's'} left running by interrupted run ${runId} (its process died)`,
      );
  } catch (err) {
    o.warn(`could not end what interrupted run ${runId} left running: ${(err as Error).message}`);
  }
}
const RUN_ORPHAN_GRACE_MS = 1_000;
