// Durable JSON state files (SPEC §3): written atomically with write-file-atomic (temp file,
// fsync, rename), mode 0600, never through a symlink; a corrupt file is moved aside as
// `<name>.corrupt.<ts>` and reported, never crashes the caller and never silently vanishes.

import { lstatSync, renameSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { createRequire } from 'node:module';
import type writeFileAtomicType from 'write-file-atomic';
import { StateIOError, UnsafePathError, errnoCode } from '../errors.js';
import { ensureDir, readNoFollow } from '../lock/files.js';

// Loaded on first write: read-only commands (`routine list`, `exec status`) never pay for it.
let wfa: typeof writeFileAtomicType | undefined;
const writeFileAtomic = (): typeof writeFileAtomicType => (wfa ??= createRequire(import.meta.url)('write-file-atomic') as typeof writeFileAtomicType);

export function ensureStateDir(dir: string): void {
  try {
    ensureDir(dir);
  } catch (err) {
    if (err instanceof UnsafePathError) throw err;
    throw new StateIOError(`cannot create the state folder ${dir}: ${errnoCode(err) ?? String(err)}`);
  }
}

/** write-file-atomic resolves symlinks and writes to their target; we refuse them instead. */
function refuseSymlink(path: string): void {
  try {
    if (lstatSync(path).isSymbolicLink()) {
      throw new UnsafePathError(`${path} is a symbolic link; refusing to write state through it`);
    }
  } catch (err) {
    if (err instanceof UnsafePathError) throw err;
    if (errnoCode(err) !== 'ENOENT') throw err;
  }
}

export async function writeJsonAtomic(path: string, value: unknown): Promise<number> {
  refuseSymlink(path);
  ensureStateDir(dirname(path));
  const text = `${JSON.stringify(value, null, 2)}\n`;
  try {
    await writeFileAtomic()(path, text, { mode: 0o600, fsync: true });
  } catch (err) {
    throw new StateIOError(`cannot write ${path}: ${errnoCode(err) ?? String(err)}`);
  }
  return Buffer.byteLength(text);
}

export function writeJsonAtomicSync(path: string, value: unknown): number {
  refuseSymlink(path);
  ensureStateDir(dirname(path));
  const text = `${JSON.stringify(value, null, 2)}\n`;
  try {
    writeFileAtomic().sync(path, text, { mode: 0o600, fsync: true });
  } catch (err) {
    throw new StateIOError(`cannot write ${path}: ${errnoCode(err) ?? String(err)}`);
  }
  return Buffer.byteLength(text);
}

export type ReadResult<T> =
  | { kind: 'ok'; value: T }
  | { kind: 'missing' }
  | { kind: 'corrupt'; movedTo: string | null; problem: string };

/** Reads and checks a JSON state file. `check` returns the typed value or a problem string. A
 * corrupt file is renamed to `<name>.corrupt.<ts>` so the next write starts clean and the
 * evidence is kept. */
export function readJsonState<T>(path: string, check: (v: unknown) => T | string, now = Date.now()): ReadResult<T> {
  const text = readNoFollow(path);
  if (text === null) return { kind: 'missing' };
  let problem: string;
  try {
    const checked = check(JSON.parse(text));
    if (typeof checked !== 'string') return { kind: 'ok', value: checked };
    problem = checked;
  } catch (err) {
    problem = `not valid JSON (${(err as Error).message})`;
  }
  const movedTo = `${path}.corrupt.${now}`;
  try {
    renameSync(path, movedTo);
    return { kind: 'corrupt', movedTo, problem };
  } catch {
    return { kind: 'corrupt', movedTo: null, problem };
  }
}

export function corruptMessage(path: string, r: { movedTo: string | null; problem: string }): string {
  const where = r.movedTo ? `moved aside to ${basename(r.movedTo)}` : 'could not be moved aside';
  return `${path} is corrupt (${r.problem}); ${where}, starting from empty state`;
}

/** Replaces a JSON-lines file atomically (used to trim history). */
export function writeJsonLinesAtomicSync(path: string, values: unknown[]): void {
  refuseSymlink(path);
  const text = values.map((v) => `${JSON.stringify(v)}\n`).join('');
  try {
    writeFileAtomic().sync(path, text, { mode: 0o600, fsync: true });
  } catch (err) {
    throw new StateIOError(`cannot write ${path}: ${errnoCode(err) ?? String(err)}`);
  }
}
