// The plain file operations the rest of src/ needs beside the checked reads (files.ts), the
// durable writes and appends (durable.ts) and /proc (proc.ts): renames, looks at a name, folder
// watches, writes to a descriptor. Outside src/fs no module calls node:fs itself, so each rule
// about a path (no symlink followed at a state name, every byte of a write, a missing name is an
// answer, not an error) is written here once (scripts/check-structure.mjs counts the calls).

import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  realpathSync,
  futimesSync,
  renameSync,
  rmSync,
  statfsSync,
  statSync,
  unlinkSync,
  watch,
  writeSync,
  type BigIntStats,
  type FSWatcher,
  type Stats,
} from 'node:fs';
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

/** stat, following symlinks (a config file, a folder root that may be a link): null when the
 * name is missing or cannot be looked at. */
export function statFollow(path: string): Stats | null {
  try {
    return statSync(path, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}

/** lstat that never throws: null when the name is missing or cannot be looked at. */
export function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) ?? null;
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

/** realpath(3); throws when a part of the path is missing. */
export function realPath(path: string): string {
  return realpathSync(path);
}

/** Removes `path` and everything under it; nothing when it is missing (rm -rf). */
export function removeTree(path: string): void {
  rmSync(path, { recursive: true, force: true });
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

/** The names in folder `dir`; every error thrown (namesIn in files.ts answers [] for a missing one). */
export function listFolder(dir: string): string[] {
  return readdirSync(dir);
}

/** Creates folder `path` (mode 0700), exclusively: EEXIST is thrown when it exists. */
export function makeFolder(path: string): void {
  mkdirSync(path, { mode: 0o700 });
}

/** The size of the file open as `fd` now. */
export function fdSize(fd: number): number {
  return fstatSync(fd).size;
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

/** Writes all of `text` to an output descriptor (stdout) at once: a full non-blocking pipe
 * (EAGAIN) is waited out, a reader gone (EPIPE, `| head -1`) is not our error. */
export function writeOut(fd: number, text: string): void {
  const buf = Buffer.from(text);
  for (let off = 0; off < buf.length;) {
    try {
      off += writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') continue;
      if (code === 'EPIPE') return;
      throw e;
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

/** The bytes of an input file a user names on the command line (any owner, links followed: it
 * is read, never trusted to decide what runs): errno errors thrown as they are; a file that is not
 * a regular one is refused (code ENOTREG) and one over `cap` bytes too (code EFBIG). */
export function readInputFile(path: string, cap: number): Buffer {
  const fd = openSync(path, 'r');
  try {
    if (!fstatSync(fd).isFile()) throw Object.assign(new Error(`${path} is not a regular file`), { code: 'ENOTREG' });
    const chunks: Buffer[] = [];
    let total = 0;
    const buf = Buffer.alloc(64 * 1024);
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0;) {
      total += n;
      if (total > cap) throw Object.assign(new Error(`${path} is over ${cap} bytes`), { code: 'EFBIG' });
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
    return Buffer.concat(chunks);
  } finally {
    closeSync(fd);
  }
}

/** Writes a file of the user's project (`routinely init`: the config, a .gitignore), mode 0644,
 * never through a symlink at its name: created exclusively (EEXIST thrown), or replaced when
 * `replace`. */
export function writeProjectFile(path: string, text: string, replace = false): void {
  const fd = openSync(
    path,
    constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | (replace ? constants.O_TRUNC : constants.O_EXCL),
    0o644,
  );
  try {
    writeText(fd, text);
  } finally {
    closeSync(fd);
  }
}

/** Appends to a text file of the user's project what `amend` makes of its text (null: nothing),
 * never through a symlink, never blocking on a FIFO swapped in (O_NONBLOCK). false when it is no
 * regular file of at most `cap` bytes (left alone). */
export function amendProjectFile(path: string, cap: number, amend: (text: string) => string | null): boolean {
  const fd = openSync(path, constants.O_RDWR | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > cap) return false;
    const added = amend(readFileSync(fd, 'utf8'));
    if (added) writeText(fd, added);
    return true;
  } finally {
    closeSync(fd);
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

/** A file of routinely's own installed package (its package.json), as text. */
export function readPackageFile(path: string): string {
  return readFileSync(path, 'utf8');
}

/** Writes all of `text` to `fd` (a task's output file, a log), looping over short writes (durable.ts's writeAll). */
export function writeText(fd: number, text: string | Buffer): void {
  writeAll(fd, typeof text === 'string' ? Buffer.from(text, 'utf8') : text, null);
}
