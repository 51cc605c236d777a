// Looking at a name without opening it, each verb named by what it answers for a missing name:
// lstatQuiet (null; other errors thrown), statFollow (null for anything it cannot look at),
// statOrWhy (the errno), statExact (to the nanosecond, a cache key), and the few other looks the
// rest needs (a descriptor's size, a real path, a full file system, an executable).

import {
  accessSync,
  constants,
  fstatSync,
  lstatSync,
  realpathSync,
  statfsSync,
  statSync,
  type BigIntStats,
  type Stats,
} from 'node:fs';
import { errnoCode } from '../errors.js';

/** lstat that answers null for a missing name. */
export function lstatQuiet(path: string): Stats | null {
  try {
    // a missing name is the common answer (the next slot, a leftover temp): returned, not
    // thrown (a thrown ENOENT costs ≈ 4 µs, the call itself ≈ 0.5)
    return lstatSync(path, { throwIfNoEntry: false }) ?? null;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return null;
    throw err;
  }
}

/** stat, following symlinks (a config file, a folder root that may be a link): null when the
 * name is missing or cannot be looked at. */
export function statFollow(path: string): Stats | null {
  try {
    return statSync(path, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}

/** stat (following symlinks), or the errno code saying why `path` cannot be looked at. */
export function statOrWhy(path: string): Stats | { code: string } {
  try {
    return statSync(path);
  } catch (err) {
    return { code: (err as NodeJS.ErrnoException).code ?? String(err) };
  }
}

/** stat to the nanosecond (a cache key, a file's identity); `follow` false: the name itself
 * (lstat), never what a symlink at it points to. null when missing or unreadable. */
export function statExact(path: string, follow = true): BigIntStats | null {
  try {
    return (follow ? statSync : lstatSync)(path, { bigint: true, throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}

/** realpath(3); throws when a part of the path is missing. The C library's, not Node's walk in
 * JavaScript (an lstat a component: 11.7 µs against 2.8 µs for a task's cwd, twice a task of
 * `exec run`, issue 52). */
export function realPath(path: string): string {
  return realpathSync.native(path);
}

/** The size of the file open as `fd` now. */
export function fdSize(fd: number): number {
  return fstatSync(fd).size;
}

/** Whether the file system holding folder `dir` has no room left for an unprivileged writer
 * (no free block or no free inode); false when it cannot be told. */
export function fileSystemFull(dir: string): boolean {
  try {
    const s = statfsSync(dir);
    return s.bavail === 0 || s.ffree === 0;
  } catch {
    return false;
  }
}

/** Whether `path` is a file this user may execute (a command on PATH). */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
