// Writes to the process's own output (stdout, stderr) and the question whether it is a terminal,
// answered without loading node:tty (start-up: the fast commands never need it).

import { createRequire } from 'node:module';
import { fstatSync, statSync, writeSync } from 'node:fs';
import { errnoWords } from '../errors.js';

/** What an output the command cannot write does: a reader gone (EPIPE, `| head -1`) is not our
 * error; anything else on standard output (a full disk, an I/O error: `> /dev/full`) is said once
 * on stderr and makes a command that succeeded exit 74 (`process.exitCode`, which the entry's
 * exit honours), as a lost output is not a success. Standard error failing changes nothing. */
export function outputFailed(err: unknown, fd: number): void {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'EPIPE' || fd !== 1 || process.exitCode === IO_EXIT) return;
  process.exitCode = IO_EXIT;
  try {
    writeSync(2, `routinely: cannot write its output: ${code ? errnoWords(code) : String(err)}\n`);
  } catch {
    // standard error cannot be written either
  }
}
const IO_EXIT = 74;

/** Writes all of `text` to an output descriptor (stdout) at once: a full non-blocking pipe
 * (EAGAIN: Node makes a pipe non-blocking once process.stdout exists) is waited out a millisecond
 * at a time, not spun on (`| less` reading slowly would cost a core); a reader gone (EPIPE,
 * `| head -1`) is not our error. */
const pause = new Int32Array(new SharedArrayBuffer(4));

export function writeOut(fd: number, text: string): void {
  const buf = Buffer.from(text);
  for (let off = 0; off < buf.length;) {
    try {
      off += writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') {
        Atomics.wait(pause, 0, 0, 1);
        continue;
      }
      if (code !== 'EPIPE') outputFailed(e, fd);
      return;
    }
  }
}

/** Whether descriptor `fd` may be a terminal: a character device other than /dev/null (a pipe,
 * a file and /dev/null are answered without loading node:tty). */
export function mayBeTerminal(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return st.isCharacterDevice() && st.rdev !== statSync('/dev/null').rdev;
  } catch {
    return false;
  }
}

const lazyRequire = createRequire(import.meta.url);

/** Whether stdout is a terminal, without loading node:tty (and with it node:net and the stream
 * machinery: 7 ms) for the common answers: a pipe, a file, /dev/null. */
export function stdoutIsTTY(): boolean {
  return mayBeTerminal(1) && (lazyRequire('node:tty') as typeof import('node:tty')).isatty(1);
}
