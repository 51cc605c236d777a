// A scheduler started through npm (`npx routinely scheduler start`, `npm run …`, `npm exec`):
// npm runs the bin through `sh -c`. On SIGTERM npm passes the signal to that shell only; dash
// (Debian's /bin/sh) does not exec its last command, so it dies and leaves the scheduler running,
// reparented to PID 1 — what `docker stop` or a supervisor signalling `npx …` did. So a scheduler
// whose parent is npm, or a shell whose parent is npm, stops (as if sent SIGTERM) as soon as
// either is gone: the shell killed, or npm killed (SIGKILL leaves the shell waiting for us) or
// exited. A shell that put it in the background (`"start": "routinely scheduler start &"`) has
// exited before the scheduler looks, so that one is left alone. It also says at start that
// signals sent to npm do not reach it, with the command that avoids npm.

import { procCmdline, readProcStat } from '../fs/proc.js';
import { parseProcStat } from '../process/identity.js';
import type { Logger } from '../fire/log.js';

/** How npm started us, from the variables it sets for the programs it runs; null: not by npm. */
export function npmWrapper(env: NodeJS.ProcessEnv): string | null {
  if (!env.npm_execpath && !env.npm_command && !env.npm_lifecycle_event) return null;
  if (env.npm_lifecycle_event && env.npm_lifecycle_event !== 'npx') return `npm run ${env.npm_lifecycle_event}`;
  return env.npm_command === 'exec' || env.npm_lifecycle_event === 'npx' ? 'npx (npm exec)' : 'npm';
}

export const WRAPPER_ADVICE =
  'signals sent to npm do not reach this process: in Docker use CMD ["node_modules/.bin/routinely", "scheduler", "start"], ' +
  'in systemd ExecStart=/path/to/project/node_modules/.bin/routinely scheduler start, in a shell script exec node_modules/.bin/routinely scheduler start';

export interface Proc {
  pid: number;
  ppid: number;
  startTime: string;
  argv: string[];
}

/** A live process from /proc (Linux); null when it is gone, a zombie, or unreadable. */
export function readProc(pid: number): Proc | null {
  try {
    const text = readProcStat(pid);
    const stat = parseProcStat(text);
    if (!stat || stat.state === 'Z' || stat.state === 'X') return null;
    const argv = procCmdline(pid)
      .split('\0')
      .filter((a) => a !== '');
    return { pid, ppid: stat.ppid, startTime: stat.startTime, argv };
  } catch {
    return null;
  }
}

/** npm or npx itself: it sets its title to `npm run sched` / `npm exec …` (one string in its
 * cmdline), or its cmdline names npm-cli.js / npx-cli.js, or a binary named npm / npx. */
export function isNpm(p: Pick<Proc, 'argv'>): boolean {
  return (
    /^(npm|npx)( |$)/.test(p.argv[0] ?? '') || p.argv.slice(0, 3).some((a) => /(^|\/)(npm|npx)(-cli\.js)?$/.test(a))
  );
}

/** A shell running a command string (`sh -c …`, npm's script-shell), whatever /bin/sh is. */
export function isShell(p: Pick<Proc, 'argv'>): boolean {
  return /(^|\/)-?(sh|dash|bash|zsh|ksh|mksh|ash|busybox)$/.test(p.argv[0] ?? '') && p.argv.includes('-c');
}

export interface Starter {
  npm: Proc;
  /** The shell between npm and us; null when npm is our parent (a shell that exec'd us). */
  shell: Proc | null;
}

/** The npm that started us, when our parent is npm or a shell whose parent is npm; else null. */
export function findStarter(ppid = process.ppid, read: (pid: number) => Proc | null = readProc): Starter | null {
  const parent = read(ppid);
  if (!parent) return null;
  if (isNpm(parent)) return { npm: parent, shell: null };
  if (!isShell(parent)) return null;
  const grand = read(parent.ppid);
  return grand && isNpm(grand) ? { npm: grand, shell: parent } : null;
}

/** Why the starter no longer holds us, or null while it does: our parent changed (the shell or
 * npm exited or was killed) or npm is gone (same pid, another start time: not it). */
export function starterGone(s: Starter, ppid: number, read: (pid: number) => Proc | null = readProc): string | null {
  const parent = s.shell ?? s.npm;
  if (ppid !== parent.pid)
    return s.shell ? `its shell (pid ${s.shell.pid}) under npm is gone` : `npm (pid ${s.npm.pid}) is gone`;
  if (!s.shell) return null;
  const npm = read(s.npm.pid);
  return npm && npm.startTime === s.npm.startTime ? null : `npm (pid ${s.npm.pid}) is gone`;
}

/** Calls `gone(why)` once when the npm that started us, or the shell between, is gone. */
export function watchStarter(s: Starter, gone: (why: string) => void, everyMs = 1000): () => void {
  const timer = setInterval(() => {
    const why = starterGone(s, process.ppid);
    if (why === null) return;
    clearInterval(timer);
    gone(why);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Under npm, a signal meant for the scheduler stops only npm (and its shell): says so in the
 * log now, and calls `stop` when npm or the shell between is gone. Returns the unwatch. */
export function stopWithNpm(log: Logger, stop: () => void): () => void {
  const wrapper = npmWrapper(process.env);
  if (!wrapper) return () => {};
  log({ event: 'scheduler.warning', message: `started through ${wrapper}; ${WRAPPER_ADVICE}` });
  const starter = findStarter();
  if (!starter) return () => {};
  return watchStarter(starter, (why) => {
    log({
      event: 'scheduler.warning',
      message: `${why}: the ${wrapper} that started this scheduler was stopped or ended; stopping as if sent SIGTERM`,
    });
    stop();
  });
}
