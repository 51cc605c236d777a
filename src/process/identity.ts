// Who is this process, and is that one still alive? A pid alone is not an identity: pids are
// reused (containers hand out the same low pids every boot), so a process is host + boot id +
// pid + start time (SPEC §4). Linux reads /proc; macOS asks ps; anything else
// only learns "dead" from kill(pid, 0) and otherwise falls back to lease expiry.
// (Over 300 lines: identity and the liveness probe for Linux (/proc), macOS (ps) and the rest,
// one verdict over three sources.)

import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { errnoCode } from '../errors.js';
import {
  lastPid,
  procBootId,
  procEnviron,
  procNames,
  procOwnerUid,
  procPidNamespace,
  readProcStat,
} from '../fs/proc.js';

// child_process only where Linux's /proc is missing (macOS: ps, sysctl): loading it costs a few
// milliseconds of every start-up that reads a lock (`routine list` must start fast, SPEC §6).
const lazyRequire = createRequire(import.meta.url);
function execText(file: string, args: string[], options: { timeout?: number; env?: NodeJS.ProcessEnv } = {}): string {
  const cp = lazyRequire('node:child_process') as typeof import('node:child_process');
  return cp.execFileSync(file, args, { ...options, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}

export type ProcessState =
  | { state: 'dead'; why: 'no-process' | 'zombie' }
  | { state: 'alive'; startTime: string | null; pgid: number | null }
  | { state: 'unknown' };

/** The process table and host facts, injected so staleness is testable without processes. */
export interface LivenessProbe {
  readonly host: string;
  /** null when the platform has no boot id we can read. */
  readonly bootId: string | null;
  /** The pid namespace (Linux), e.g. "pid:[4026531836]": a container sharing the host name and
   * boot id still has its own pids. null when unknown. */
  readonly pidNs?: string | null;
  inspect(pid: number): ProcessState;
  /** Live members of process group `pgid` (used when its leader is gone); [] when unknown. */
  groupMembers(pgid: number): number[];
  /** The process groups of session `sid` other than group `sid` itself, with a live member:
   * where a command's job-control children (`set -m; cmd &`) went. [] when unknown. `ranMs`: how
   * long the session's leader ran, when known. */
  sessionGroups?(sid: number, ranMs?: number): number[];
  /** The user a process runs as; null when unknown (then only the start time identifies it). */
  ownerUid?(pid: number): number | null;
  /** Whether the process's environment holds exactly `entry` (`NAME=value`); null when it
   * cannot be read (another user's process, no /proc). */
  environHas?(pid: number, entry: string): boolean | null;
  /** Live process-group leaders of this user whose environment holds `entry` (and no variable
   * named `unless`): how a reclaimer finds the commands a holder started even if it stalled or
   * died before recording them. */
  markedGroupLeaders?(entry: string, unless?: string): { pid: number; startTime: string }[];
}

export interface ProcessIdentity {
  pid: number;
  host: string;
  boot_id: string | null;
  start_time: string | null;
  pid_ns?: string | null;
}

interface ProcStat {
  state: string;
  ppid: number;
  pgid: number;
  /** The session (field 6). */
  session: number;
  startTime: string;
}

/** Parses /proc/<pid>/stat. The command name (field 2) may hold spaces and parentheses, so the
 * fields are read after the last ')'. */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const fields = text.slice(close + 2).split(' ');
  // fields[0] is field 3 (state); ppid is field 4, pgrp field 5; starttime is field 22.
  const state = fields[0];
  const ppid = Number(fields[1]);
  const pgid = Number(fields[2]);
  const session = Number(fields[3]);
  const startTime = fields[19];
  if (!state || !startTime || !Number.isInteger(pgid) || !Number.isInteger(ppid)) return null;
  return { state, ppid, pgid, session, startTime };
}

/** Runs `fn` without capturing stack traces for the errors it throws: probes expect ENOENT and
 * ESRCH by the hundred, and a stack trace costs more than the syscall. */
export function quietly<T>(fn: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return fn();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function linuxInspect(pid: number): ProcessState {
  let text: string;
  try {
    text = quietly(() => readProcStat(pid));
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ESRCH') return { state: 'dead', why: 'no-process' };
    return killProbe(pid);
  }
  const stat = parseProcStat(text);
  if (!stat) return { state: 'unknown' };
  // A zombie still answers kill(pid, 0) until it is reaped, but it runs nothing.
  if (stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') return { state: 'dead', why: 'zombie' };
  return { state: 'alive', startTime: stat.startTime, pgid: stat.pgid };
}

function linuxGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  let entries: string[];
  try {
    entries = procNames();
  } catch {
    return members;
  }
  for (const name of entries) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    try {
      const stat = parseProcStat(quietly(() => readProcStat(pid)));
      if (stat && stat.pgid === pgid && stat.state !== 'Z') members.push(pid);
    } catch {
      // the process ended while we looked: not a member any more
    }
  }
  return members;
}

/** Processes are created with rising pids: those of a session started at pid `sid` are above it,
 * unless the counter wrapped since (then every pid is looked at). After a short run, a few pids
 * handed out since are each looked at directly; otherwise through one listing of /proc: a fire's
 * clean-up stays cheap on a busy host. */
function linuxSessionGroups(sid: number, ranMs?: number): number[] {
  const groups = new Set<number>();
  const mine = leaders.get(sid);
  const last = lastPid();
  const wrapped = last !== null && last < sid;
  let pids: number[];
  // only for a short run: in a long one the counter may have gone all the way round
  if (last !== null && !wrapped && last - sid <= DIRECT_LOOKS && ranMs !== undefined && ranMs < SHORT_RUN_MS) {
    pids = Array.from({ length: last - sid }, (_, i) => sid + 1 + i);
  } else {
    try {
      pids = procNames().map(Number);
    } catch {
      return [];
    }
  }
  for (const pid of pids) {
    if (!Number.isInteger(pid) || pid <= 1 || (pid <= sid && !wrapped) || pid === process.pid) continue;
    // a command this process started after it leads a session of its own (another task of a
    // run, another routine's fire): not a member of this one, and no /proc read for it
    if (mine !== undefined && (leaders.get(pid) ?? 0) > mine) continue;
    try {
      const stat = parseProcStat(quietly(() => readProcStat(pid)));
      if (stat && stat.session === sid && stat.pgid !== sid && stat.state !== 'Z') groups.add(stat.pgid);
    } catch {
      // ended while we looked, or never there
    }
  }
  return [...groups];
}

/** Pids of the commands this process started in sessions of their own (the newest
 * LEADERS_KEPT), each with the order it was started in. A pid started after a session's leader
 * and handed out since (the range linuxSessionGroups looks at) is that new process: pids are not
 * reused before the counter wraps, and a wrap sends the look through /proc whole. */
const leaders = new Map<number, number>();
let leadersStarted = 0;
const LEADERS_KEPT = 1024;

/** Says that `pid` was started by this process as the leader of a new session (`detached`). */
export function startedSessionLeader(pid: number): void {
  leaders.delete(pid);
  leaders.set(pid, ++leadersStarted);
  if (leaders.size > LEADERS_KEPT) leaders.delete(leaders.keys().next().value!);
}

/** Up to this many pids handed out since a session began are looked at one by one (a missing
 * one costs a failed open), rather than listing /proc, after a run shorter than SHORT_RUN_MS. */
const DIRECT_LOOKS = 64;
const SHORT_RUN_MS = 10_000;

function linuxOwnerUid(pid: number): number | null {
  try {
    return quietly(() => procOwnerUid(pid));
  } catch {
    return null;
  }
}

function linuxEnvironHas(pid: number, entry: string, unless?: string): boolean | null {
  let env: Buffer;
  try {
    env = quietly(() => procEnviron(pid));
  } catch {
    return null;
  }
  const has = (text: string): boolean => {
    const needle = Buffer.from(text);
    return env.subarray(0, needle.length).equals(needle) || env.includes(Buffer.concat([Buffer.from([0]), needle]));
  };
  return has(`${entry}\0`) && (unless === undefined || !has(`${unless}=`));
}

function linuxMarkedGroupLeaders(entry: string, unless?: string): { pid: number; startTime: string }[] {
  const found: { pid: number; startTime: string }[] = [];
  let names: string[];
  try {
    names = procNames();
  } catch {
    return found;
  }
  const uid = typeof process.geteuid === 'function' ? process.geteuid() : null;
  for (const name of names) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) continue;
    try {
      const stat = parseProcStat(quietly(() => readProcStat(pid)));
      if (!stat || stat.pgid !== pid || stat.state === 'Z') continue;
      if (uid !== null && uid !== 0 && linuxOwnerUid(pid) !== uid) continue;
      if (linuxEnvironHas(pid, entry, unless) === true) found.push({ pid, startTime: stat.startTime });
    } catch {
      // ended while we looked
    }
  }
  return found;
}

function darwinInspect(pid: number): ProcessState {
  let out: string;
  try {
    // lstart is formatted in the caller's zone and locale: fix both, or two observers with
    // different TZ would read different start times for one process.
    out = execText('ps', ['-o', 'stat=,pgid=,lstart=', '-p', String(pid)], {
      env: { ...process.env, TZ: 'UTC', LC_ALL: 'C' },
    });
  } catch {
    // ps exits 1 when no such process exists
    return killProbe(pid);
  }
  const m = /^\s*(\S+)\s+(\d+)\s+(.+?)\s*$/.exec(out);
  if (!m) return killProbe(pid);
  if (m[1]!.startsWith('Z')) return { state: 'dead', why: 'zombie' };
  return { state: 'alive', startTime: m[3]!, pgid: Number(m[2]) };
}

function killProbe(pid: number): ProcessState {
  try {
    quietly(() => process.kill(pid, 0));
    return { state: 'alive', startTime: null, pgid: null };
  } catch (err) {
    if (errnoCode(err) === 'ESRCH') return { state: 'dead', why: 'no-process' };
    if (errnoCode(err) === 'EPERM') return { state: 'alive', startTime: null, pgid: null };
    return { state: 'unknown' };
  }
}

function readBootId(): string | null {
  if (process.platform === 'linux') {
    try {
      return procBootId().trim() || null;
    } catch {
      return null;
    }
  }
  if (process.platform === 'darwin') {
    // the boot session's UUID: one value a boot. kern.boottime is "now minus the uptime", which
    // moves when the clock is set (NTP, a wake from sleep), so it is only the fallback
    try {
      const uuid = execText('sysctl', ['-n', 'kern.bootsessionuuid']).trim();
      if (uuid) return uuid;
    } catch {
      // an older macOS
    }
    try {
      return bootIdOfBoottime(execText('sysctl', ['-n', 'kern.boottime']));
    } catch {
      return null;
    }
  }
  return null;
}

/** macOS's boot time from `sysctl -n kern.boottime` (`{ sec = 1764900000, usec = 12345 } Fri Dec
 * 5 02:00:00 2025`), where no boot session UUID can be read: the braces only, since the date
 * after them is printed in the local zone (two processes with another TZ would read two boots). */
export function bootIdOfBoottime(text: string): string | null {
  return /\{[^}]*\}/.exec(text)?.[0] ?? (text.trim() || null);
}

/** Whether pids recorded by `owner` mean the same processes here: same host, same boot, same
 * pid namespace (unknown parts are given the benefit of the doubt). */
export function samePidSpace(
  owner: { host: string; boot_id?: string | null; pid_ns?: string | null },
  probe: LivenessProbe,
): boolean {
  if (owner.host !== probe.host) return false;
  if (owner.boot_id && probe.bootId && owner.boot_id !== probe.bootId) return false;
  return !owner.pid_ns || !probe.pidNs || owner.pid_ns === probe.pidNs;
}

function readPidNamespace(): string | null {
  if (process.platform !== 'linux') return null;
  try {
    return procPidNamespace();
  } catch {
    return null;
  }
}

/** The host identity; `ROUTINELY_HOST_ID` overrides it (tests, containers; SPEC §9). */
export function hostId(env: NodeJS.ProcessEnv = process.env): string {
  const override = env.ROUTINELY_HOST_ID;
  return override && override.length > 0 ? override : hostname();
}

let cachedProbe: LivenessProbe | undefined;

export function systemProbe(): LivenessProbe {
  if (cachedProbe) return cachedProbe;
  const platform = process.platform;
  const inspect = platform === 'linux' ? linuxInspect : platform === 'darwin' ? darwinInspect : killProbe;
  const probe: LivenessProbe = {
    host: hostId(),
    bootId: readBootId(),
    pidNs: readPidNamespace(),
    inspect,
    groupMembers: platform === 'linux' ? linuxGroupMembers : () => [],
    ...(platform === 'linux' ? { sessionGroups: linuxSessionGroups } : {}),
    ...(platform === 'linux'
      ? { ownerUid: linuxOwnerUid, environHas: linuxEnvironHas, markedGroupLeaders: linuxMarkedGroupLeaders }
      : {}),
  };
  cachedProbe = probe;
  return probe;
}

let cachedSelf: ProcessIdentity | undefined;

export function selfIdentity(probe: LivenessProbe = systemProbe()): ProcessIdentity {
  if (cachedSelf && cachedSelf.host === probe.host) return cachedSelf;
  const me = probe.inspect(process.pid);
  cachedSelf = {
    pid: process.pid,
    host: probe.host,
    boot_id: probe.bootId,
    start_time: me.state === 'alive' ? me.startTime : null,
    ...(probe.pidNs ? { pid_ns: probe.pidNs } : {}),
  };
  return cachedSelf;
}

/** Whether the process `o` names is gone: dead, or its pid now belongs to a process started at
 * another time. Only on this host (and boot, and pid namespace); elsewhere it cannot be told
 * (false). */
export function processGone(
  o: { pid: number; host: string; boot_id?: string | null; start_time?: string | null; pid_ns?: string | null },
  probe: LivenessProbe = systemProbe(),
): boolean {
  if (!samePidSpace(o, probe)) return false;
  const p = probe.inspect(o.pid);
  if (p.state === 'dead') return true;
  return p.state === 'alive' && !!p.startTime && !!o.start_time && p.startTime !== o.start_time;
}
