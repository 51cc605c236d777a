// JSON state files (SPEC §3): written durably (durable.ts), mode 0600, never through a symlink;
// read through the checked open of fs/files.ts (regular file, ours, size cap). A corrupt file
// is reported, and — by a writer that is about to replace it, never by a read-only view —
// moved aside as `<name>.corrupt.<ts>`, so the evidence is kept.

import { basename, join } from 'node:path';
import { StateIOError, UnsafePathError, errnoCode, errnoWords } from '../errors.js';
import { printable } from '../printable.js';
import { ensureDir, readNoFollow, writeNewFile } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { writeFileDurable, type DurableOptions } from '../fs/durable.js';
import { moveAside } from '../fs/names.js';

export function ensureStateDir(dir: string): void {
  try {
    ensureDir(dir);
  } catch (err) {
    if (err instanceof UnsafePathError) throw err;
    throw new StateIOError(
      `cannot create the state folder ${dir}: ${errnoCode(err) ? errnoWords(errnoCode(err)!) : String(err)}`,
    );
  }
}

/** Creates the project's state folder when it does not exist yet, with a `.gitignore` that
 * keeps it out of `git status` (locks, runs and history are not for version control). */
export function ensureStateRoot(stateDir: string): void {
  if (lstatQuiet(stateDir)) return;
  ensureStateDir(stateDir);
  try {
    writeNewFile(
      join(stateDir, '.gitignore'),
      '# routinely state (locks, runs, history): not for version control\n*\n',
    );
  } catch {
    // someone else created it first, or the disk is full: neither matters here
  }
}

/** Replaces `path` with `value` as JSON, durably (writeFileDurable); returns the bytes written. */
export function writeJsonDurable(path: string, value: unknown, opts: DurableOptions = {}): number {
  return Number(writeFileDurable(path, `${JSON.stringify(value, null, 2)}\n`, opts).size);
}

export type ReadResult<T> =
  { kind: 'ok'; value: T } | { kind: 'missing' } | { kind: 'corrupt'; movedTo: string | null; problem: string };

export interface ReadOptions {
  /** Move a corrupt file aside (writers about to replace it). Read-only views leave it. */
  moveAside?: boolean;
  now?: number;
  /** Largest file read (default: the state file cap). */
  cap?: number;
}

/** Reads and checks a JSON state file. `check` returns the typed value or a problem string. A
 * file we refuse to read (a FIFO, another user's, oversized) counts as corrupt. */
export function readJsonState<T>(
  path: string,
  check: (v: unknown) => T | string,
  opts: ReadOptions = {},
): ReadResult<T> {
  let text: string | null;
  let problem: string;
  try {
    text = opts.cap === undefined ? readNoFollow(path) : readNoFollow(path, opts.cap);
  } catch (err) {
    if (!(err instanceof UnsafePathError))
      throw new StateIOError(`cannot read ${path}: ${errnoCode(err) ? errnoWords(errnoCode(err)!) : String(err)}`);
    // a symlink, a FIFO, a folder, another user's file at the name: the entry itself is set
    // aside (rename moves a link, never its target), as a damaged file is
    return { kind: 'corrupt', movedTo: moveAsideFor(path, opts), problem: err.message };
  }
  if (text === null) return { kind: 'missing' };
  try {
    const checked = check(JSON.parse(text));
    if (typeof checked !== 'string') return { kind: 'ok', value: checked };
    problem = checked;
  } catch (err) {
    // JSON.parse quotes the text it met: a newline or an escape from the file is shown escaped
    problem = text.length === 0 ? 'empty' : `not valid JSON (${printable((err as Error).message)})`;
  }
  return { kind: 'corrupt', movedTo: moveAsideFor(path, opts), problem };
}

/** Where a writer set a corrupt file aside (`<name>.corrupt.<ts>`), or null (a view leaves it). */
function moveAsideFor(path: string, opts: ReadOptions): string | null {
  if (!opts.moveAside) return null;
  const movedTo = `${path}.corrupt.${opts.now ?? Date.now()}`;
  return moveAside(path, movedTo) ? movedTo : null;
}

export function corruptMessage(path: string, r: { movedTo: string | null; problem: string }, rebuilt?: string): string {
  const where = r.movedTo ? `moved aside to ${basename(r.movedTo)}` : 'left in place';
  return `${path} is corrupt (${r.problem}); ${where}${rebuilt ? `, ${rebuilt}` : ', starting from empty state'}`;
}
