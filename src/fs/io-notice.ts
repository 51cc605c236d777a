// Storage errors a step survives on purpose (a lock's view or release mark, a heartbeat that the
// next beat writes again, the children journal whose groups also reach the heartbeat, a folder's
// fsync, a frame in a routine's log): never swallowed without a word (SPEC §3, §7). Each is said
// once per file and cause in a process — a scheduler says it in its log, a command on stderr —
// and the work goes on with its own exit code.

import { errnoCode, ioMessage } from '../errors.js';

type Sink = (message: string) => void;

let sink: Sink = (message) => process.stderr.write(`routinely: warning: ${message}\n`);
const said = new Set<string>();

/** Where the notices go from now on (the scheduler's log). */
export function setIoNoticeSink(to: Sink): void {
  sink = to;
}

/** Says once per (file, cause) that `doing` `path` failed with `err`, and what that means. */
export function ioNotice(err: unknown, doing: string, path: string, meaning: string): void {
  const key = `${errnoCode(err) ?? String(err)} ${path}`;
  if (said.has(key)) return;
  said.add(key);
  if (said.size > 1000) said.clear(); // a process that meets thousands of failing files
  // an errno names the cause; an error of ours already names the file
  const code = errnoCode(err);
  const text =
    code !== undefined && /^E[A-Z0-9]+$/.test(code)
      ? ioMessage(err, doing, path)
      : err instanceof Error
        ? err.message
        : String(err);
  try {
    sink(`${text}; ${meaning}`);
  } catch {
    // nothing left to tell
  }
}
