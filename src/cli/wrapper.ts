// A scheduler started through npm (`npx routinely scheduler start`, `npm run …`, `npm exec`):
// npm does not pass signals on to its child, so `kill -TERM <npm's pid>` — what Docker sends to
// `CMD npx …`, or a supervisor to the process it started — leaves the scheduler running,
// reparented to PID 1. It says so at start, with the command that avoids it, and when its parent
// process is npm itself it stops (as if sent SIGTERM) once that npm is gone.

import { readFileSync } from 'node:fs';

/** How npm started us, from the variables it sets for the programs it runs; null: not by npm. */
export function npmWrapper(env: NodeJS.ProcessEnv): string | null {
  if (!env.npm_execpath && !env.npm_command && !env.npm_lifecycle_event) return null;
  if (env.npm_lifecycle_event && env.npm_lifecycle_event !== 'npx') return `npm run ${env.npm_lifecycle_event}`;
  return env.npm_command === 'exec' || env.npm_lifecycle_event === 'npx' ? 'npx (npm exec)' : 'npm';
}

export const WRAPPER_ADVICE =
  'signals sent to npm do not reach this process: in Docker use CMD ["node_modules/.bin/routinely", "scheduler", "start"], ' +
  'in systemd ExecStart=/path/to/project/node_modules/.bin/routinely scheduler start, in a shell script exec node_modules/.bin/routinely scheduler start';

/** Whether our parent process is npm itself (npm-cli.js, npx-cli.js, or a binary named npm/npx),
 * read from /proc (Linux; elsewhere: unknown, so no watch). A parent that is a shell run by npm
 * (`"bg": "routinely scheduler start &"` in package.json) is not: it exits by design. */
export function parentIsNpm(ppid = process.ppid): boolean {
  try {
    const argv = readFileSync(`/proc/${ppid}/cmdline`, 'utf8').split('\0').slice(0, 3);
    return argv.some((a) => /(^|\/)(npm|npx)(-cli\.js)?$/.test(a));
  } catch {
    return false;
  }
}

/** Calls `gone` once when our parent process changes (the npm that started us exited). */
export function watchParent(gone: () => void, everyMs = 1000): () => void {
  const first = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === first) return;
    clearInterval(timer);
    gone();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
