// A command in its own process group under a held lease (SPEC §4.3, §4.10, §4.11, §4.14): the one
// runner behind `exec run`'s tasks, a routine's fire and `lock run`. The lease's lock is named to
// the command (ROUTINELY_LOCK_*), a lost lease stops it, a stall right before the spawn is checked,
// and whatever is left of its group is ended before the caller releases the lock, with one kill
// grace (never past the lease's own once it is lost). Callers differ only in what they pass.

import type { Lease } from '../lock/lease.js';
import { anySignal, monotonicMs } from '../clock.js';
import { runProcess, stopGroup, type ProcessResult, type ProcessSpec } from './process.js';

/** SIGTERM → SIGKILL, for the command and for what is left of its group. */
export const KILL_GRACE_MS = 5_000;

export interface GroupSpec extends Omit<ProcessSpec, 'cwd' | 'signal' | 'killGraceMs' | 'onSpawn'> {
  /** The folder to run in, or why there is none (a missing cwd: the command does not start). */
  cwd?: string | { error: string };
  /** The lock's name for ROUTINELY_LOCK_NAME (`exec run`'s tasks are told only its generation). */
  lockName?: string;
  /** Stops the command besides a lost lease (a timeout of the whole run, a shutdown, Ctrl-C). */
  signal?: AbortSignal;
  /** `signal` is aborted whenever the lease's is (exec run's stop of the whole run): it alone is
   * listened to, with no signal made for each command to follow both. */
  signalFollowsLease?: boolean;
  killGraceMs?: number;
  /** After the lease has tracked the group, before anything else can happen. */
  onSpawn?: (pid: number) => void;
}

export interface GroupRun {
  process: ProcessResult;
  /** Who stopped it: its timeout, the lost lease, or the caller's signal; null when it ended. */
  stoppedBy: 'timeout' | 'lock' | 'stop' | null;
  /** Processes of its group that were still there when it ended (now ended). */
  leftovers: number;
  /** Output left out of the log (`output.capBytes`). */
  cutBytes: number;
  /** Output that could not be written to the log (a full disk), and why; absent when none. */
  lost?: { bytes: number; code: string };
}

/** The lock's variables for a command (SPEC §4.3): `env` as it is when it has them already (exec
 * run puts them in the environment all its tasks start from), else a copy with them. */
export function withLockEnv(env: NodeJS.ProcessEnv | undefined, lease: Lease, lockName?: string): NodeJS.ProcessEnv {
  const generation = String(lease.generation);
  if (
    env &&
    env.ROUTINELY_LOCK_GENERATION === generation &&
    env.ROUTINELY_LOCK_ID === lease.lockId &&
    (lockName === undefined || env.ROUTINELY_LOCK_NAME === lockName)
  )
    return env;
  return {
    ...env,
    ...(lockName !== undefined ? { ROUTINELY_LOCK_NAME: lockName } : {}),
    ROUTINELY_LOCK_GENERATION: generation,
    ROUTINELY_LOCK_ID: lease.lockId,
  };
}

/** Runs `spec` under `lease` (none: a routine that is not exclusive) and ends its group. */
export async function runGroupUnderLease(lease: Lease | null, spec: GroupSpec): Promise<GroupRun> {
  const { cwd, lockName, signal, signalFollowsLease, killGraceMs, onSpawn, env, ...rest } = spec;
  if (typeof cwd === 'object') {
    const process: ProcessResult = {
      exitCode: 127,
      signal: null,
      timedOut: false,
      canceled: false,
      reason: 'spawn-error',
      durationMs: 0,
      error: cwd.error,
      pid: null,
    };
    return { process, stoppedBy: null, leftovers: 0, cutBytes: 0 };
  }
  const grace = killGraceMs ?? KILL_GRACE_MS;
  // a lost lease leaves its work `lost.graceMs` from the moment it was lost, all of it (the
  // command, then what is left of its group and session): what is left of that, never more
  let lostAt: number | null = null;
  const onLost = (): void => {
    lostAt ??= monotonicMs();
  };
  if (lease?.signal.aborted) onLost();
  else lease?.signal.addEventListener('abort', onLost, { once: true });
  const graceNow = (): number => {
    if (!lease?.lost) return grace;
    const spent = monotonicMs() - (lostAt ?? monotonicMs());
    return Math.max(0, Math.min(grace, lease.lost.graceMs - spent));
  };
  const link =
    signal && signalFollowsLease
      ? { signal, unlink: () => {} }
      : anySignal(...[lease?.signal, signal].filter((s): s is AbortSignal => s !== undefined));
  let childPid: number | null = null;
  lease?.beforeSpawn?.();
  const result = await runProcess({
    ...rest,
    ...(cwd !== undefined ? { cwd } : {}),
    env: lease ? withLockEnv(env, lease, lockName) : env,
    signal: link.signal,
    killGraceMs: graceNow,
    onSpawn: (pid) => {
      childPid = pid;
      lease?.trackChild(pid);
      // a stall between the last check and the spawn may have cost the lock: then the command
      // must not live on (SPEC §4.10); a lost lease aborts the signal above
      lease?.confirm();
      onSpawn?.(pid);
    },
  });
  link.unlink();
  // What is left of the group (background jobs, or what ignored a signal) must not run on outside
  // the lock (SPEC §4.11); then the rest of its output (the pipe closes with the group) is kept.
  // Processes that left the group on purpose (setsid) are beyond reach, as they are for flock(1).
  const leftovers = childPid !== null ? await stopGroup(childPid, graceNow(), result.durationMs) : 0;
  lease?.signal.removeEventListener('abort', onLost);
  // the group is gone: its number may be handed out again, so nothing names it any more
  if (childPid !== null) lease?.untrackChild(childPid);
  const cutBytes = (await result.endOutput?.()) ?? 0;
  const lost = result.outputLost?.() ?? null;
  let stoppedBy: GroupRun['stoppedBy'] = null;
  if (result.timedOut) stoppedBy = 'timeout';
  else if (result.canceled) stoppedBy = lease?.lost ? 'lock' : 'stop';
  return { process: result, stoppedBy, leftovers, cutBytes, ...(lost ? { lost } : {}) };
}
