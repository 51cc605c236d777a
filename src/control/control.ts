// `scheduler stop` (SPEC §10): SIGTERM to the scheduler that runs on this host, then wait for it
// to exit (it stops firing, lets running routines finish up to its --shutdown-timeout, releases
// its locks). A signal goes only to a process proven to be this project's scheduler (SPEC §12):
// its pid is above 1 and means a process here (same host, boot and pid namespace), that process
// started when the lock record says, belongs to this user, runs `scheduler start`, and — on
// Linux — holds open this project's `<stateDir>/scheduler.running`, which every scheduler opens at
// start and keeps open (not inherited by its commands). A lock record or a database row can name
// any process; only the process itself can hold that file open.

import { runningMark } from './running-mark.js';
import type { Backend } from '../backend-types.js';
import { systemClock, type Clock } from '../clock.js';
import { errnoCode } from '../errors.js';
import { myUid } from '../fs/files.js';
import { lstatQuiet, statFollow } from '../fs/look.js';
import { procCmdline, procFds, procFdTarget } from '../fs/proc.js';
import { quietly, systemProbe, type LivenessProbe } from '../process/identity.js';
import { readSchedulerState, type SchedulerInstance, type SchedulerState } from './status.js';

export type StopResult =
  | { kind: 'stopped'; scheduler: SchedulerInstance; waitedMs: number }
  | { kind: 'timeout'; scheduler: SchedulerInstance; waitedMs: number }
  /** No scheduler runs (with a database: none on this host; `state` names the others). */
  | { kind: 'not-running'; state: SchedulerState }
  /** The project's scheduler runs on another host (or in another pid namespace): not signalled. */
  | { kind: 'elsewhere'; scheduler: SchedulerInstance }
  /** Its lock names a process here that could not be proven to be it: not signalled. */
  | { kind: 'unverified'; scheduler: SchedulerInstance; why: string };

export interface StopOptions {
  timeoutMs: number;
  clock?: Clock;
  probe?: LivenessProbe;
  /** How often to look whether it has exited; default 100 ms. */
  pollMs?: number;
  /** Told once the signal is sent (the CLI says so, then waits). */
  onSignalled?: (s: SchedulerInstance) => void;
}

/** Whether process `pid` holds this project's mark open (Linux: its /proc/PID/fd); null where
 * that cannot be told (another system). */
function holdsRunningMark(pid: number, stateDir: string): boolean | null {
  if (process.platform !== 'linux') return null;
  const mark = statFollow(runningMark(stateDir));
  if (!mark) return false; // no scheduler of this project ever ran here
  let fds: string[];
  try {
    fds = quietly(() => procFds(pid));
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      const st = procFdTarget(pid, fd);
      if (st.ino === mark.ino && st.dev === mark.dev) return true;
    } catch {
      // closed meanwhile, or not a file
    }
  }
  return false;
}

/** The arguments a process was started with (Linux); null where they cannot be read. */
function commandLine(pid: number): string[] | null {
  if (process.platform !== 'linux') return null;
  try {
    const raw = quietly(() => procCmdline(pid));
    return raw.split('\0').filter((a) => a !== '');
  } catch {
    return null;
  }
}

/** Why the process behind `s` may not be signalled as that scheduler; null when it is proven. */
export function unproven(s: SchedulerInstance, probe: LivenessProbe, stateDir?: string): string | null {
  const o = s.record.owner;
  if (o.pid <= 1) return `its lock names pid ${o.pid}`;
  if (o.command !== 'scheduler') return `its lock was taken by "${o.command}", not by a scheduler`;
  const p = probe.inspect(o.pid);
  if (p.state === 'dead') return `pid ${o.pid} has exited`;
  if (p.state !== 'alive' || !p.startTime || !o.start_time) return `the start time of pid ${o.pid} cannot be checked`;
  if (p.startTime !== o.start_time)
    return `pid ${o.pid} is another process now (started at ${p.startTime}, the lock says ${o.start_time})`;
  const uid = myUid();
  const owner = probe.ownerUid?.(o.pid) ?? null;
  if (uid !== null && owner !== null && owner !== uid)
    return `pid ${o.pid} belongs to uid ${owner}, not to this user (uid ${uid})`;
  const args = commandLine(o.pid);
  if (args !== null && !args.some((a, i) => a === 'scheduler' && args[i + 1] === 'start')) {
    return `pid ${o.pid} does not run "scheduler start"`;
  }
  if (stateDir !== undefined && holdsRunningMark(o.pid, stateDir) === false) {
    const mark = runningMark(stateDir);
    // a link there is never opened: the scheduler warned at its start, and holds no mark
    if (lstatQuiet(mark)?.isSymbolicLink())
      return `pid ${o.pid} runs a scheduler, but it cannot be proven this project's: ${mark} is a symbolic link, which no scheduler opens (remove it and restart the scheduler, or stop it with SIGTERM)`;
    return `pid ${o.pid} runs a scheduler, but not this project's: it does not hold ${mark} open (a lock record or a database row can name any process)`;
  }
  return null;
}

/** Whether the process of `s` has exited (or its pid now names another process). */
function exited(s: SchedulerInstance, probe: LivenessProbe): boolean {
  const p = probe.inspect(s.pid);
  return p.state === 'dead' || (p.state === 'alive' && !!p.startTime && p.startTime !== s.record.owner.start_time);
}

export async function stopScheduler(backend: Backend, o: StopOptions & { stateDir: string }): Promise<StopResult> {
  const clock = o.clock ?? systemClock;
  const probe = o.probe ?? systemProbe();
  const state = await readSchedulerState(backend, probe);
  const target = state.schedulers.find((s) => s.here);
  if (!target) {
    // With files the project has one scheduler: elsewhere it is still this project's. With a
    // database each host runs its own: this host's is not running.
    const only = state.schedulers[0];
    return backend.caps.schedulerPerProject && only
      ? { kind: 'elsewhere', scheduler: only }
      : { kind: 'not-running', state };
  }
  const why = unproven(target, probe, o.stateDir);
  if (why) return { kind: 'unverified', scheduler: target, why };
  const started = clock.monotonic();
  try {
    quietly(() => process.kill(target.pid, 'SIGTERM'));
  } catch (err) {
    if (errnoCode(err) === 'ESRCH') return { kind: 'stopped', scheduler: target, waitedMs: 0 };
    return { kind: 'unverified', scheduler: target, why: `cannot signal pid ${target.pid}: ${(err as Error).message}` };
  }
  o.onSignalled?.(target);
  for (;;) {
    if (exited(target, probe)) return { kind: 'stopped', scheduler: target, waitedMs: clock.monotonic() - started };
    const left = o.timeoutMs - (clock.monotonic() - started);
    if (left <= 0) return { kind: 'timeout', scheduler: target, waitedMs: clock.monotonic() - started };
    await clock.sleep(Math.min(o.pollMs ?? 100, left));
  }
}
