// Terminal output helpers for the CLI layer.

import { terminalText } from '../printable.js';
import { outputFailed } from '../fs/terminal.js';

/** A reader that goes away (`… | head -1`) is no error of ours: output to a closed pipe is
 * dropped, never an unhandled 'error' event with a stack trace. Attached on first use, so a
 * command that prints nothing never creates Node's stdout or stderr stream. */
const guarded = new WeakSet<NodeJS.WriteStream>();
function guard(stream: NodeJS.WriteStream): NodeJS.WriteStream {
  if (!guarded.has(stream)) {
    guarded.add(stream);
    stream.on('error', (e) => outputFailed(e, stream === process.stdout ? 1 : 2));
  }
  return stream;
}

// Every line printed goes through terminalText (SPEC §12): strings from records and rows (a
// pause note, a reason, a holder's command) cannot send control sequences to the terminal.
export const out = (line: string): void => {
  guard(process.stdout).write(`${terminalText(line)}\n`);
};

export const err = (line: string): void => {
  guard(process.stderr).write(`${terminalText(line)}\n`);
};

let exitFlushMs: number | null = null;

/** At exit a command waits until its output is written, as any command that prints does; the
 * scheduler limits that wait (a stalled reader must not keep it alive, SPEC §6 "Stop"). */
export function limitExitFlush(ms: number): void {
  exitFlushMs = ms;
}

export const exitFlushLimit = (): number | null => exitFlushMs;

/** Colour only on a TTY and only when NO_COLOR is unset (https://no-color.org). */
export function useColor(stream: { isTTY?: boolean } = process.stdout): boolean {
  return Boolean(stream.isTTY) && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
}

const codes = { red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36, gray: 90, bold: 1 } as const;
export type Colour = keyof typeof codes;

/** The views' one duration formatter (http/view.ts). */
export { humanDuration } from '../duration.js';

export function paint(text: string, colour: Colour, enabled: boolean): string {
  return enabled ? `\x1b[${codes[colour]}m${text}\x1b[0m` : text;
}

/** "512 B", "3.2 KiB", "18.1 MiB", "2.0 GiB". */
export function humanBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

export { formatInZone, machineZone, zoneTime, type ZoneTime } from '../zone-time.js';

/** EPIPE (or any error) on stdout/stderr is ignored from now on: the scheduler's work does not
 * depend on anyone reading its log. */
export function keepGoingOnBrokenPipes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') return;
      // nothing to do: further writes to a closed pipe are dropped
    });
  }
}
