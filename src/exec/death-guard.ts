// The work of a holder that dies ends with it on its own host (SPEC §4.14): another host that takes
// a database lease over can end nothing here (with lock files, the reclaimer on this host does).
// So a holder of such a lease keeps a small guard: `sh` in a session of its own, reading the
// process groups started under it (`+ pid`, `- pid` once ended) from a pipe only this process
// holds. When this process dies (SIGKILL, the OOM killer) the kernel closes the pipe and the guard
// SIGKILLs every group still listed, then the other groups of their sessions (job control, from
// Linux's /proc), long before the lease can expire for others. It ignores the signals meant for
// its holder's terminal or group; one killed is replaced, one that cannot start is retried. Not
// covered: a kill of guard and holder together (a cgroup's, which ends the commands too), a death
// between a spawn and its line when no lock or notify id was told first (docs/postgres.md).

import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { spawnDetached } from './process.js';

const SCRIPT = `trap '' HUP INT QUIT TERM PIPE USR1 USR2 ALRM
g=
k=
while read -r o p; do
  case $o in
  +) g="$g $p" ;;
  -) n=; for q in $g; do [ "$q" = "$p" ] || n="$n $q"; done; g=$n ;;
  L) k="$k $p" ;;
  U) n=; for q in $k; do [ "$q" = "$p" ] || n="$n $q"; done; k=$n ;;
  esac
done
[ -n "$g" ] || [ -n "$k" ] || exit 0
for q in $g; do kill -s KILL -- "-$q" 2>/dev/null; done
e=
for d in /proc/[0-9]*; do
  { read -r l < "$d/stat"; } 2>/dev/null || continue
  set -f
  set -- \${l##*") "}
  set +f
  for q in $g; do [ "$4" = "$q" ] && [ "$3" != "$q" ] && e="$e $3"; done
  [ -n "$k" ] && [ "$3" = "\${d#/proc/}" ] || continue
  v=$(tr '\\0' ' ' < "$d/environ" 2>/dev/null) || continue
  for q in $k; do case " $v" in *" ROUTINELY_LOCK_ID=$q "* | *" ROUTINELY_NOTIFY_ID=$q "*) e="$e $3" ;; esac; done
done
for q in $e; do kill -s KILL -- "-$q" 2>/dev/null; done
exit 0`;

let guard: ChildProcess | null = null;
const guarded = new Set<number>();
const guardedLocks = new Set<string>();

/** Tells the guard `line`; with none running, starts one, which is told everything still guarded
 * (the line's change among it). `start`: false for a line that only takes something away. */
function send(line: string, start = true): void {
  if (!guard) {
    if (start) startGuard();
    return;
  }
  const stdin = guard.stdin;
  if (stdin && !stdin.destroyed) stdin.write(line);
}

/** A guard that could not start (out of processes or descriptors) is tried again this often,
 * while anything is guarded. */
const RETRY_MS = 250;
let retry: NodeJS.Timeout | null = null;

function startGuard(): void {
  let child: ChildProcess | null = null;
  try {
    child = spawnDetached('/bin/sh', ['-c', SCRIPT, 'routinely-guard'], {
      cwd: '/',
      // (its one program, tr, where the holder finds it too)
      env: { PATH: ['/usr/bin', '/bin', process.env.PATH].filter(Boolean).join(':') },
      stdio: ['pipe', 'ignore', 'ignore'],
    });
  } catch {
    // (below)
  }
  if (!child || child.pid === undefined || !child.stdin) {
    // out of descriptors or processes: tried again soon, and at the next line
    child?.on('error', () => {});
    retryLater();
    return;
  }
  child.on('error', () => {});
  child.stdin.on('error', () => {});
  // the guard must never keep this process alive, nor its pipe
  child.unref();
  (child.stdin as Socket).unref();
  child.once('exit', () => {
    // killed by someone: a new one gets what is still guarded
    if (guard !== child) return;
    guard = null;
    if (guarded.size > 0 || guardedLocks.size > 0) startGuard();
  });
  guard = child;
  for (const id of guardedLocks) child.stdin.write(`L ${id}\n`);
  for (const pid of guarded) child.stdin.write(`+ ${pid}\n`);
}

function retryLater(): void {
  if (retry) return;
  retry = setTimeout(() => {
    retry = null;
    if (!guard && (guarded.size > 0 || guardedLocks.size > 0)) startGuard();
  }, RETRY_MS);
  // (never what keeps this process alive)
  retry.unref();
}

/** `pid`'s group (a command started in a session of its own) is ended if this process dies. */
export function guardGroup(pid: number): void {
  if (guarded.has(pid)) return;
  guarded.add(pid);
  send(`+ ${pid}\n`);
}

/** Once `pid`'s group was ended (with what was left of it): the guard forgets it. */
export function unguardGroup(pid: number): void {
  if (!guarded.delete(pid)) return;
  send(`- ${pid}\n`, false);
}

/** A lease's lock id, before a command starts under it: at its death the guard also ends every
 * group led by a process whose environment carries it (ROUTINELY_LOCK_ID: routinely sets it for
 * each command it starts under a lock), so one started in the instant before its `+` line (the
 * spawn returned, the line not yet written) is ended too. */
export function guardLock(lockId: string): void {
  if (!/^[0-9a-f]{1,64}$/.test(lockId) || guardedLocks.has(lockId)) return;
  guardedLocks.add(lockId);
  send(`L ${lockId}\n`);
}

/** The lease was released: no command starts under it any more. */
export function unguardLock(lockId: string): void {
  if (!guardedLocks.delete(lockId)) return;
  send(`U ${lockId}\n`, false);
}

/** The variable that marks a notify command (with a fresh hex id an attempt), as the lock id marks
 * a lease's commands: told the guard before the command starts (guardNotify), a SIGKILL in the
 * instant between its spawn and its `+` line ends it all the same. */
export const NOTIFY_ID = 'ROUTINELY_NOTIFY_ID';
export const guardNotify = guardLock;
export const unguardNotify = unguardLock;

/** The guard's pid, while one runs (tests). */
export function guardPid(): number | null {
  return guard?.pid ?? null;
}
