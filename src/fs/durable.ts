// Durable writes of state files (SPEC §3): a temp file (O_EXCL, never through a symlink), every
// byte written (the short-write loop), its size checked, fsync, rename, fsync of the folder; a
// full disk or an I/O error leaves the previous file intact (exit 74). Appends start on a fresh
// line, so a torn last line never swallows the next entry (docs/design.md "Durable writes").
// (Over 300 lines: the replace, append and rewrite-in-place paths with their fault handling,
// which share the short-write loop and the checks of what was opened.)

import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  linkSync,
  lstatSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { BigIntStats, Stats } from 'node:fs';
import { UnsafePathError, errnoCode, stateWriteError } from '../errors.js';
import { frameChecksummed } from '../checksum.js';
import { ensureDir, fileProblem, unlinkQuiet } from './files.js';
import { randomHex } from './random-ids.js';
import { ioNotice } from './io-notice.js';
import { lstatQuiet } from './look.js';

/** The system calls a durable write makes, replaceable in tests (short writes, ENOSPC, EIO). */
export interface DurableIo {
  write(fd: number, buf: Buffer, offset: number, length: number, position: number | null): number;
  fsync(fd: number): void;
}

const realIo: DurableIo = {
  write: (fd, buf, offset, length, position) => writeSync(fd, buf, offset, length, position),
  fsync: (fd) => fsyncSync(fd),
};
let io: DurableIo = realIo;

/** Tests only: replaces (part of) the I/O layer; returns a function that restores it. */
export function setDurableIoForTests(partial: Partial<DurableIo>): () => void {
  io = { ...realIo, ...partial };
  return () => {
    io = realIo;
  };
}

/** Writes all of `buf` at `position` (null: the file offset), looping over short writes. An
 * error carries `written`: the bytes that reached the file before it. */
export function writeAll(fd: number, buf: Buffer, position: number | null = null): void {
  let done = 0;
  try {
    while (done < buf.length) {
      const n = io.write(fd, buf, done, buf.length - done, position === null ? null : position + done);
      if (!(n > 0)) throw Object.assign(new Error(`write returned ${n}`), { code: 'EIO' });
      done += n;
    }
  } catch (err) {
    if (err instanceof Error) Object.assign(err, { written: done });
    throw err;
  }
}

const TEMP_MARK = '.tmp-';

/** Refuses a symlink (or anything but a regular file) where a state file goes. */
function refuseOdd(path: string): void {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    throw err;
  }
  if (st.isSymbolicLink()) throw new UnsafePathError(`${path} is a symbolic link; refusing to write state through it`);
  if (!st.isFile()) throw new UnsafePathError(`${path} is not a regular file; refusing to replace it`);
}

export interface DurableOptions {
  /** Remove temp files that killed writers left beside `path` (only under the lock that
   * serializes this file's writers, where no other writer can be mid-write). */
  cleanTemps?: boolean;
  /** false: written and renamed atomically (never torn, never a short file) but neither the file
   * nor its folder fsynced, for a view that the facts beside it rebuild after a power loss
   * (routine-state.json from the histories, docs/state.md). Default true. */
  sync?: boolean;
  /** false: a missing folder is an error (ENOENT, as StateIOError), not made (a cache written
   * only where the state folder exists already). Default true. */
  createFolder?: boolean;
  /** The new file's mode (umask permitting); default 0600 (state). A file of the user's project
   * keeps its own (import-crontab --merge). */
  mode?: number;
  /** Only where nothing is at `path`: linked under its name (link(2), EEXIST when something is),
   * not renamed over it (`init`'s new files). */
  exclusive?: boolean;
  /** Called once the new file is whole, right before it takes the name: may throw (the new file
   * is then removed and the error thrown as it is). */
  beforeReplace?: () => void;
}

/** Replaces `path` with `data` durably (the atomic write): returns what the new file is (its
 * inode, size and modification time, as a later lstat of `path` shows them while nobody replaced
 * it). Throws StateIOError (74) naming the file on I/O faults, UnsafePathError (2) for a path we
 * may not use. */
export function writeFileDurable(path: string, data: string | Buffer, opts: DurableOptions = {}): BigIntStats {
  const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const dir = dirname(path);
  try {
    refuseOdd(path);
    if (opts.createFolder !== false) ensureDir(dir);
  } catch (err) {
    throw stateWriteError(err, path);
  }
  if (opts.cleanTemps) removeLeftoverTemps(path);
  const tmp = `${path}${TEMP_MARK}${randomHex(8)}`;
  let fd: number;
  try {
    fd = openSync(
      tmp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      opts.mode ?? 0o600,
    );
  } catch (err) {
    throw stateWriteError(err, path);
  }
  let st: BigIntStats;
  try {
    writeAll(fd, buf, 0);
    if (opts.sync !== false) io.fsync(fd);
    st = fstatSync(fd, { bigint: true });
    if (st.size !== BigInt(buf.length))
      throw Object.assign(new Error(`only ${st.size} of ${buf.length} bytes reached the disk`), { code: 'EIO' });
  } catch (err) {
    closeSync(fd);
    unlinkQuiet(tmp);
    throw stateWriteError(err, path);
  }
  closeSync(fd);
  try {
    opts.beforeReplace?.();
  } catch (err) {
    unlinkQuiet(tmp);
    throw err;
  }
  try {
    if (opts.exclusive) linkOrRename(tmp, path);
    else renameSync(tmp, path);
  } catch (err) {
    unlinkQuiet(tmp);
    throw stateWriteError(err, path);
  }
  if (opts.exclusive) unlinkQuiet(tmp);
  if (opts.sync !== false) syncDir(dir);
  return st;
}

/** link(2) `tmp` as `path` (EEXIST when something is there); where the file system has no hard
 * links (vfat, exFAT, some network mounts: EPERM, EOPNOTSUPP, ENOSYS), renamed once `path` is
 * found absent — a check, then the rename: exclusive but for that instant. */
function linkOrRename(tmp: string, path: string): void {
  try {
    linkSync(tmp, path);
  } catch (err) {
    const code = errnoCode(err);
    if (code !== 'EPERM' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    if (lstatQuiet(path)) throw Object.assign(new Error('file already exists'), { code: 'EEXIST' });
    renameSync(tmp, path);
  }
}

/** fsync of a folder makes a rename in it durable; some file systems refuse it (EINVAL). */
export function syncDir(dir: string): void {
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch {
    return;
  }
  try {
    io.fsync(fd);
  } catch (err) {
    // the rename itself is atomic; a file system that cannot sync folders says nothing
    if (!['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EBADF'].includes(errnoCode(err) ?? ''))
      ioNotice(err, 'syncing the folder', dir, 'the file renamed in it is in place, but may not survive a power loss');
  } finally {
    closeSync(fd);
  }
}

/** Temp files of killed writers: ours (`<name>.tmp-<hex>`) and write-file-atomic's
 * (`<name>.<number>`), left beside `path`. `olderThanMs`: only ours not changed for that long
 * (where writers of the name may be under way: theirs live for microseconds), and never a
 * `<name>.<number>` (beside a history file, `<id>.jsonl.1` is its rotated part). */
export function removeLeftoverTemps(path: string, olderThanMs = 0): number {
  const name = basename(path);
  const dir = dirname(path);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const n of names) {
    if (!n.startsWith(`${name}.`)) continue;
    const rest = n.slice(name.length + 1);
    if (/^tmp-[0-9a-f]{16}$/.test(rest) || (olderThanMs === 0 && /^\d{1,12}$/.test(rest))) {
      if (olderThanMs > 0) {
        const st = lstatQuiet(join(dir, n));
        if (!st || Date.now() - st.mtimeMs < olderThanMs) continue;
      }
      unlinkQuiet(join(dir, n));
      removed++;
    }
  }
  return removed;
}

/** Opens `path` for appending (O_APPEND | O_NOFOLLOW | O_NONBLOCK, created 0600), in a folder
 * of ours, and checks what it opened before anything is written (SPEC §12): a regular file, ours,
 * writable by us alone. A log or journal another user planted or can read along is refused. */
export function openAppend(path: string): number {
  return openAppendTo(path).fd;
}

/** Linux reads through an O_APPEND descriptor (pread ignores the flag): one descriptor serves
 * the append and the look at the last byte. Elsewhere a second one is opened for that. */
const READS_ON_APPEND = process.platform === 'linux';

export interface AppendFile {
  fd: number;
  ino: number;
  /** The descriptor also reads (endsMidLine needs no second one). */
  readable: boolean;
  /** The file's size as opened, until the first line appended through this descriptor (after
   * that, others may have written too: looked up again). Saves a second fstat(2). */
  size: number | null;
}

/** The folder `path` is in, made (0700) if missing and checked (ensureDir); an error as
 * openAppendTo says it. */
export function ensureFolderOf(path: string): void {
  try {
    ensureDir(dirname(path));
  } catch (err) {
    if (err instanceof UnsafePathError) throw err;
    throw stateWriteError(err, path, 'appending to');
  }
}

/** openAppend, with what the checks saw: the inode, and whether the descriptor reads too. */
export function openAppendTo(path: string): AppendFile {
  ensureFolderOf(path);
  let fd: number;
  try {
    fd = openSync(
      path,
      (READS_ON_APPEND ? constants.O_RDWR : constants.O_WRONLY) |
        constants.O_APPEND |
        constants.O_CREAT |
        constants.O_NOFOLLOW |
        constants.O_NONBLOCK,
      0o600,
    );
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw new UnsafePathError(`${path} is a symbolic link; refusing to append to it`);
    // a folder where a file goes is something in the way (exit 2), not a failing disk
    if (errnoCode(err) === 'EISDIR')
      throw new UnsafePathError(`${path} is not a regular file; refusing to write to it (remove it)`);
    if (err instanceof UnsafePathError) throw err;
    throw stateWriteError(err, path, 'appending to');
  }
  const st = fstatSync(fd);
  const p = fileProblem(st, { othersMayNot: 0o077 });
  if (p) {
    closeSync(fd);
    throw new UnsafePathError(
      p.kind === 'type'
        ? `${path} is not a regular file; refusing to write to it (remove it)`
        : p.kind === 'owner'
          ? `${path} is owned by uid ${p.uid}, not by this user; refusing to write to it (remove it)`
          : `${path} can be read or written by other users (mode ${p.kind === 'mode' ? p.mode : '?'}); refusing to write to it; fix it with: chmod 600 ${path}`,
    );
  }
  return { fd, ino: st.ino, readable: READS_ON_APPEND, size: st.size };
}

/** Whether the file behind `fd` ends in the middle of a line (a torn last line). */
export function endsMidLine(fd: number, size = fstatSync(fd).size): boolean {
  if (size === 0) return false;
  const last = Buffer.alloc(1);
  return readSync(fd, last, 0, 1, size - 1) === 1 && last[0] !== 0x0a;
}

/** Appends one line (which must not contain a newline) to an fd opened by openAppend, starting
 * on a fresh line if the file ends mid-line. Every byte or an error (with `path` named). An
 * append cut short (a full disk: part of the line reached the file) is repaired at once: the
 * bytes that reached it are overwritten with spaces where they are — no new block needed — so
 * the file holds a blank line instead of a torn one, which no reader ever reports again (SPEC §3:
 * a torn line is repaired once, not warned about at every read). */
export function appendLine(fd: number, path: string, line: string, readFd?: number, size?: number): number {
  let buf: Buffer | null = null;
  try {
    const torn = endsMidLine(readFd ?? fd, size);
    buf = Buffer.from(`${torn ? '\n' : ''}${line}\n`, 'utf8');
    writeAll(fd, buf, null);
    return buf.length;
  } catch (err) {
    const written = (err as { written?: unknown }).written;
    if (buf && typeof written === 'number' && written > 0) blankOwnBytes(path, buf.subarray(0, written));
    throw stateWriteError(err, path, 'appending to');
  }
}

/** The `part` of a line this process just appended, if it is still the end of `path`: written
 * over with spaces (newlines kept), through a descriptor without O_APPEND (where Linux would
 * append a pwrite). Compared first, so that only our own bytes are ever touched: bytes of
 * another writer that came after ours leave the file as it is. Best effort. */
export function blankOwnBytes(path: string, part: Buffer): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return;
  }
  try {
    const st = fstatSync(fd);
    const at = st.size - part.length;
    if (!st.isFile() || at < 0) return;
    const seen = Buffer.alloc(part.length);
    if (readSync(fd, seen, 0, part.length, at) !== part.length || !seen.equals(part)) return;
    const blank = Buffer.from(part.map((b) => (b === 0x0a ? 0x0a : 0x20)));
    writeSync(fd, blank, 0, blank.length, at);
  } catch {
    // the line stays torn: readers report it (and skip it)
  } finally {
    closeSync(fd);
  }
}

/** Appends one line to a file opened by openAppendTo (reading its last byte through a second
 * descriptor where the first one cannot). */
export function appendLineToFile(f: AppendFile, path: string, line: string): number {
  const size = f.size ?? undefined;
  f.size = null;
  if (f.readable) return appendLine(f.fd, path, line, undefined, size);
  const rfd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return appendLine(f.fd, path, line, rfd, size);
  } finally {
    closeSync(rfd);
  }
}

/** Whether a file opened by openAppendTo ends mid-line (its last byte read through a second
 * descriptor where the first one cannot read). */
export function appendFileTorn(f: AppendFile, path: string): boolean {
  if (f.readable) return endsMidLine(f.fd);
  const rfd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return endsMidLine(rfd);
  } finally {
    closeSync(rfd);
  }
}

/** Writes `buf` over the start of the existing file `path` (no symlink followed, nothing
 * created, nothing truncated): a record rewritten over the blocks it has, so keeping it up to date
 * never needs new blocks or inodes. Every byte or an error. */
export function rewriteInPlace(path: string, buf: Buffer): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    writeAll(fd, buf, 0);
  } finally {
    closeSync(fd);
  }
}

/** Takes over `from`, a file of exactly `buf.length` bytes left for reuse, as `to` (one rename:
 * no new inode or block) and writes `buf` over it in place. Only a regular file of ours, mode
 * 0600, with no other name (a hard link to anything else is never written through) is taken;
 * anything else there is removed (a folder is left). False when `from` is gone (someone took
 * it first), was not such a file, or could not be written (said); then `to` is not left. */
export function reuseFileAs(from: string, to: string, buf: Buffer): boolean {
  const fits = (st: Stats): boolean =>
    fileProblem(st) === null && (st.mode & 0o777) === 0o600 && st.nlink === 1 && st.size === buf.length;
  let before: Stats | undefined;
  try {
    before = lstatSync(from, { throwIfNoEntry: false });
  } catch {
    return false;
  }
  if (!before) return false;
  if (!fits(before)) {
    if (!before.isDirectory()) unlinkQuiet(from);
    return false;
  }
  try {
    renameSync(from, to);
  } catch (err) {
    // taken by another holder first: quietly
    if (errnoCode(err) !== 'ENOENT') ioNotice(err, 'renaming the spare heartbeat file', from, 'a new one is made');
    return false;
  }
  // what was renamed is checked again through the descriptor: the name may have changed since
  const giveBack = (): void => {
    try {
      renameSync(to, from);
    } catch {
      unlinkQuiet(to);
    }
  };
  let fd: number;
  try {
    fd = openSync(to, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    ioNotice(err, 'opening the spare heartbeat file', to, 'a new one is made');
    giveBack();
    return false;
  }
  try {
    const st = fstatSync(fd);
    if (!fits(st) || st.ino !== before.ino) {
      closeSync(fd);
      giveBack();
      return false;
    }
    writeAll(fd, buf, 0);
  } catch (err) {
    closeSync(fd);
    unlinkQuiet(to);
    if (errnoCode(err) === undefined) throw err;
    ioNotice(err, 'writing the spare heartbeat file', to, 'a new one is tried');
    return false;
  }
  closeSync(fd);
  return true;
}

/** Rewrites a cache file in place: `text` and its checksum on a second line, written over the
 * old content (pwrite, then ftruncate), without a temp file or a rename — a rename over an
 * existing file costs ext4 an implicit flush (auto_da_alloc), more than the rest of a fire's
 * bookkeeping. A reader that meets the file mid-write (or a crash that tore it, or two writers
 * at once) finds a checksum that does not match, and treats the cache as missing
 * (readChecksummed); so only for files whose content can be rebuilt. Opened O_NOFOLLOW and
 * checked like every state file. */
export function writeChecksummed(path: string, text: string): void {
  const buf = frameChecksummed(text);
  ensureFolderOf(path);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (err) {
    throw stateWriteError(err, path);
  }
  try {
    const st = fstatSync(fd);
    const p = fileProblem(st);
    if (p?.kind === 'type')
      throw new UnsafePathError(`${path} is not a regular file; refusing to write state through it`);
    if (p?.kind === 'owner')
      throw new UnsafePathError(
        `${path} is owned by uid ${p.uid}, not by this user (uid ${p.me}); refusing to write it`,
      );
    writeAll(fd, buf, 0);
    if (st.size > buf.length) ftruncateSync(fd, buf.length);
  } catch (err) {
    if (err instanceof UnsafePathError) throw err;
    throw stateWriteError(err, path);
  } finally {
    closeSync(fd);
  }
}

/** Writes all of `text` to `fd` (a task's output file, a log), looping over short writes (durable.ts's writeAll). */
export function writeText(fd: number, text: string | Buffer): void {
  writeAll(fd, typeof text === 'string' ? Buffer.from(text, 'utf8') : text, null);
}

/** Keeps only the last `keep` bytes of an append file `path` (openAppendTo), after a line
 * `head(cut)` saying how many were left out; returns its size after. A file within `keep` is
 * left as it is. A trim that fails part-way (the file is a log: what is lost of it is its older
 * part) does nothing more. */
export function keepTail(
  f: AppendFile,
  path: string,
  keep: number,
  head: (cut: number, read: (position: number, into: Buffer) => number) => string,
): number {
  const size = f.size ?? fstatSync(f.fd).size;
  if (size <= keep) return size;
  let reader: number | null = null;
  try {
    // where an O_APPEND descriptor does not read (not Linux), a second one for the tail
    reader = f.readable ? f.fd : openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    const tail = Buffer.alloc(keep);
    const got = readSync(reader, tail, 0, keep, size - keep);
    // what is cut away, read only if the head asks, a part at a time (before the file is emptied)
    const text = head(size - got, (position, into) => readSync(reader!, into, 0, into.length, position));
    ftruncateSync(f.fd, 0);
    const kept = Buffer.concat([Buffer.from(text, 'utf8'), tail.subarray(0, got)]);
    writeAll(f.fd, kept, null);
    return kept.length;
  } catch {
    return fstatSync(f.fd).size;
  } finally {
    if (reader !== null && reader !== f.fd) closeSync(reader);
  }
}
