// Names and descriptors, beside the checked reads (files.ts), the durable writes and appends
// (durable.ts), the looks at a name (look.ts) and /proc (proc.ts): a rename over or aside, a
// folder made, removed or watched, a held file touched through its descriptor. Outside src/fs no
// module calls node:fs itself, so each rule about a path is written here once
// (scripts/check-structure.mjs counts the calls).

import {
  closeSync,
  constants,
  fstatSync,
  type BigIntStats,
  mkdirSync,
  openSync,
  futimesSync,
  renameSync,
  rmSync,
  unlinkSync,
  watch,
  type FSWatcher,
} from 'node:fs';
import { join } from 'node:path';
import { writeAll } from './durable.js';

/** Closes a descriptor opened through src/fs. */
export function closeFd(fd: number): void {
  closeSync(fd);
}

/** Creates `path` (0600, exclusively, never through a symlink) with `text`, and keeps it open:
 * a file whose writer keeps touching it through its descriptor (touchFd), never its name. A file
 * that could not be written whole is removed. */
export function createHeld(path: string, text: string): number {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeAll(fd, Buffer.from(text));
  } catch (err) {
    closeSync(fd);
    unlinkSync(path);
    throw err;
  }
  return fd;
}

/** Sets a held file's times to `seconds` (since the epoch) through its descriptor. */
export function touchFd(fd: number, seconds: number): void {
  futimesSync(fd, seconds, seconds);
}

/** Opens `path` read-only to hold it open (created 0600 if missing, never through a symlink), a
 * regular file or an error: a mark whose holder is known by its open descriptor. */
export function holdOpen(path: string): number {
  const fd = openSync(
    path,
    constants.O_RDONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    0o600,
  );
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new Error(`${path} is not a regular file`);
  }
  return fd;
}

/** Creates an empty file `path` (0600, exclusively, never through a symlink): a mark whose name
 * says what it marks. false when the name exists; other errors are thrown. */
export function createMark(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  closeSync(fd);
  return true;
}

/** Renames `from` to `to` (a mark moved in or out of its parked name, in one step): whether it
 * moved (false: `from` was not there). Other errors are thrown. */
export function moveMark(from: string, to: string): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Removes a mark: whether it was there to remove (false: gone already, or it could not be). */
export function removeMark(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Sets folder `dir`'s times (never through a symlink at `dir`) to `seconds` since the epoch, and
 * returns its status as it then is, to the nanosecond. Errors are thrown. */
export function stampFolder(dir: string, seconds: number): BigIntStats {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    futimesSync(fd, seconds, seconds);
    return fstatSync(fd, { bigint: true });
  } finally {
    closeSync(fd);
  }
}

/** rename(2): `to` replaced by `from` in one step (readers see the old file or the new one,
 * never neither); a symlink at `to` is replaced, never followed. Errors are thrown. */
export function renameOver(from: string, to: string): void {
  renameSync(from, to);
}

/** renameOver that says whether it moved (a file set aside for inspection: `<name>.corrupt.<ts>`). */
export function moveAside(from: string, to: string): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch {
    return false;
  }
}

/** Removes `path` and everything under it; nothing when it is missing (rm -rf). */
export function removeTree(path: string): void {
  rmSync(path, { recursive: true, force: true });
}

/** Creates folder `path` (mode 0700), exclusively: EEXIST is thrown when it exists. */
export function makeFolder(path: string): void {
  mkdirSync(path, { mode: 0o700 });
}

/** Watches folder `dir` (inotify): `onName` with the name that changed, or null when the kernel
 * does not say. undefined when it cannot be watched (no inotify watches left): polling then
 * carries on alone. A watcher never keeps the process alive, and closes itself on an error. */
export function watchFolder(dir: string, onName: (name: string | null) => void): FSWatcher | undefined {
  try {
    const w = watch(dir, { persistent: false }, (_event, name) => onName(name));
    w.on('error', () => w.close());
    return w;
  } catch {
    return undefined;
  }
}

const folders = new Map<string, string>();

/** join(dir, name) for a name that is one plain file name (no `/`, not `.` or `..`), the same
 * string: the folder normalized once, the name appended. path.join walks every character in
 * JavaScript (microseconds a call, a dozen calls a fire); a name of any other kind is joined. */
export function childPath(dir: string, name: string): string {
  if (name === '' || name === '.' || name === '..' || name.includes('/')) return join(dir, name);
  let d = folders.get(dir);
  if (d === undefined) {
    d = join(dir, '.');
    if (folders.size >= 256) folders.clear();
    folders.set(dir, d);
  }
  return d === '.' ? name : d === '/' ? `/${name}` : `${d}/${name}`;
}
