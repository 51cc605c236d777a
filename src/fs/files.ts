// The project's safe-file layer (SPEC §12), used by the lock, the state, the logs and the config
// checks alike: small synchronous primitives. Synchronous on purpose: a lock cycle is a handful
// of syscalls (≈ 20 µs each), while each fs.promises call is a thread-pool round trip of
// ≈ 50 µs on these machines. Every read refuses what is not a plain file of ours: a symlink
// (O_NOFOLLOW), a FIFO or device (O_NONBLOCK, then fstat), a file over a size cap, a file owned
// by another user. Every new file is created with O_EXCL under a name nobody else chooses.
// (Over 300 lines: the primitives every other module builds on, kept in one place so each rule
// of SPEC §12 is written once.)

import {
  closeSync,
  constants,
  fstatSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  readdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { dirname, resolve } from 'node:path';
import { FolderReplacedError, UnsafePathError, errnoCode } from '../errors.js';
import { lstatQuiet } from './look.js';

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** A lock record, heartbeat or journal is a few hundred bytes; nothing legitimate comes close. */
export const LOCK_FILE_CAP = 256 * 1024;
/** State files (registry, routine state, history, run snapshots). */
export const STATE_FILE_CAP = 64 * 1024 * 1024;

// The effective uid never changes for routinely (it does not call setuid): read it once.
const EUID = typeof process.geteuid === 'function' ? process.geteuid() : null;
export const myUid = (): number | null => EUID;

export interface FileContent {
  text: string;
  /** The bytes read (text is their UTF-8 decoding). */
  bytes: Buffer;
  ino: number;
  mtimeMs: number;
}

/** What a file of ours may be (SPEC §12): at most `cap` bytes (unchecked when absent), and none
 * of the mode bits `othersMayNot` set (0o077: private, as a log or journal; 0o022: no one else
 * writes it, as a config; unchecked when absent). */
export interface FileRule {
  cap?: number;
  othersMayNot?: number;
}

/** Why a file is not one of ours that a rule allows; each caller says it in its own words. */
export type FileProblem =
  | { kind: 'type'; what: string }
  | { kind: 'owner'; uid: number; me: number }
  | { kind: 'mode'; mode: string }
  | { kind: 'size'; size: number; cap: number };

/** The one check of "a regular file of ours" (SPEC §12): a regular file, owned by this user,
 * within the rule's mode and size; null when it is. */
export function fileProblem(st: Stats, rule: FileRule = {}): FileProblem | null {
  if (!st.isFile())
    return {
      kind: 'type',
      what: st.isFIFO()
        ? 'a FIFO'
        : st.isSocket()
          ? 'a socket'
          : st.isDirectory()
            ? 'a folder'
            : 'a device or special file',
    };
  const me = myUid();
  if (me !== null && st.uid !== me) return { kind: 'owner', uid: st.uid, me };
  if (rule.othersMayNot !== undefined && (st.mode & rule.othersMayNot) !== 0)
    return { kind: 'mode', mode: (st.mode & 0o777).toString(8).padStart(4, '0') };
  if (rule.cap !== undefined && st.size > rule.cap) return { kind: 'size', size: st.size, cap: rule.cap };
  return null;
}

/** Why `st` is not a file we may read, or null. */
export function refusal(path: string, st: Stats, cap: number): string | null {
  const p = fileProblem(st, { cap });
  if (!p) return null;
  if (p.kind === 'type') return `${path} is ${p.what}, not a regular file`;
  if (p.kind === 'owner') return `${path} is owned by uid ${p.uid}, not by this user (uid ${p.me})`;
  return `${path} is ${st.size} bytes, larger than any file routinely writes there (${cap} bytes)`;
}

/** Reads a file without following a symlink at its name, with the checks above. null when it
 * does not exist; UnsafePathError when it is something we refuse to read. */
export function readFileChecked(path: string, cap = STATE_FILE_CAP): FileContent | null {
  const opened = openChecked(path, cap);
  if (!opened) return null;
  const { fd, st } = opened;
  try {
    const bytes = readAll(fd, st.size);
    return { text: bytes.toString('utf8'), bytes, ino: st.ino, mtimeMs: st.mtimeMs };
  } catch (err) {
    throw namingPath(err, path);
  } finally {
    closeSync(fd);
  }
}

/** The bytes of `path` from byte `offset` to its end (as it was when opened), with the checks
 * above, size first: a file past `cap` is refused before a byte of it is read. null when it does
 * not exist. */
export function readFileFrom(
  path: string,
  offset: number,
  cap = STATE_FILE_CAP,
): { bytes: Buffer; ino: number; size: number; mtimeMs: number } | null {
  const opened = openChecked(path, cap);
  if (!opened) return null;
  const { fd, st } = opened;
  try {
    const len = Math.max(0, Math.min(st.size, cap) - offset);
    const buf = Buffer.alloc(len);
    let got = 0;
    while (got < len) {
      const n = readSync(fd, buf, got, len - got, offset + got);
      if (n <= 0) break;
      got += n;
    }
    return { bytes: buf.subarray(0, got), ino: st.ino, size: offset + got, mtimeMs: st.mtimeMs };
  } finally {
    closeSync(fd);
  }
}

/** Reads a file whose name may be a link (a config or task file, SPEC §12: the link and the
 * folders of its target are judged by config/trust.ts): opened O_NONBLOCK (a FIFO never blocks
 * the reader), `refuse` asked of the open file (a link to /dev/zero is refused, never read), then
 * read to its size, at most `cap` bytes. A file that grows while it is read is refused: nothing
 * half-read is ever used. Throws an Error saying why. */
export function readFollowing(path: string, cap: number, refuse: (st: Stats) => string | null): Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    const why = refuse(st);
    if (why) throw new Error(`refusing to read it: ${why}`);
    const buf = Buffer.allocUnsafe(Math.min(cap + 1, st.size + 1));
    let n = 0;
    for (let r; n < buf.length && (r = readSync(fd, buf, n, buf.length - n, n)) > 0;) n += r;
    if (n === buf.length) throw new Error('refusing to read it: it changed while being read');
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** Opens `path` for reading with the checks above (no symlink at its name, a regular file of
 * ours within `cap`): its descriptor and what fstat says, or null when it does not exist;
 * UnsafePathError for what we refuse to read (the descriptor is closed then). */
export function openChecked(path: string, cap = STATE_FILE_CAP): { fd: number; st: Stats } | null {
  let fd: number;
  try {
    fd = openSync(path, READ_FLAGS);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    if (code === 'ELOOP') throw new UnsafePathError(`${path} is a symbolic link; refusing to read it (remove it)`);
    throw err;
  }
  try {
    const st = fstatSync(fd);
    const why = refusal(path, st, cap);
    if (why) throw new UnsafePathError(`${why}; refusing to read it (remove or move it)`);
    return { fd, st };
  } catch (err) {
    closeSync(fd);
    throw namingPath(err, path);
  }
}

/** An error of a call on a descriptor (fstat, read) names no path: it is given the file's, so the
 * message says which file failed (`input/output error looking at …/exec-run.lock`). */
function namingPath(err: unknown, path: string): unknown {
  const e = err as NodeJS.ErrnoException;
  if (errnoCode(err) !== undefined && e.path === undefined) e.path = path;
  return err;
}

/** The text of `path`, or null when it does not exist (see readFileChecked). */
export function readNoFollow(path: string, cap = STATE_FILE_CAP): string | null {
  return readFileChecked(path, cap)?.text ?? null;
}

const chunk = Buffer.allocUnsafe(8192);

/** Reads a file with as few read(2) calls as possible: a small one (most state files) through
 * one shared chunk, a larger one straight into a buffer of its size and a chunk more (one call,
 * not one per 8 KiB: the list cache of 1 000 routines is 360 KB); never past `size` + one chunk
 * (a file that grows while we read is cut there, and its reader sees a torn record). */
function readAll(fd: number, size: number): Buffer {
  if (size < chunk.length) {
    const n = readSync(fd, chunk, 0, chunk.length, 0);
    if (n < chunk.length) return Buffer.from(chunk.subarray(0, n));
  }
  const buf = Buffer.allocUnsafe(size + chunk.length);
  let pos = 0;
  let n: number;
  while (pos < buf.length && (n = readSync(fd, buf, pos, buf.length - pos, pos)) > 0) pos += n;
  return buf.subarray(0, pos);
}

/** The names in a folder; none when the folder (or a folder on its path) does not exist, other
 * errors thrown: a folder that cannot be listed never reads as an empty one. */
export function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return [];
    throw err;
  }
}

/** Creates `path` exclusively (never through a symlink) with all of `data`, mode 0600. A short
 * write (a filling disk) is retried by writeFileSync until every byte is written or it fails;
 * the size is then checked, so a file created here is complete or gone. */
export function writeNewFile(path: string, data: string | Buffer): number {
  const fd = openSync(path, CREATE_FLAGS, 0o600);
  let ino: number;
  try {
    writeFileSync(fd, data);
    const want = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    const st = fstatSync(fd);
    if (st.size !== want) throw Object.assign(new Error(`short write: ${st.size} of ${want} bytes`), { code: 'EIO' });
    ino = st.ino;
  } catch (err) {
    closeSync(fd);
    unlinkQuiet(path);
    throw err;
  }
  closeSync(fd);
  return ino;
}

/** Publishes `existing` under `name` with link(2), which fails if `name` exists: there is never
 * a moment when `name` holds a half-written file (SPEC §4.1). */
export function linkNew(existing: string, name: string): boolean {
  try {
    linkSync(existing, name);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return false;
    throw err;
  }
}

export function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone, or never created
  }
}

/** Folders routinely must never create anything in: a recursive mkdir under /proc loops for
 * minutes and ignores SIGTERM. */
const PSEUDO_FS = ['/proc', '/sys', '/dev'];
const MAX_NEW_LEVELS = 32;

// The folders routinely keeps state and locks in (a project's stateDir and lockDir). Every
// folder at or below one of them that routinely uses must be ours and writable by us alone
// (SPEC §12, as OpenSSH's StrictModes): otherwise another user could rename, replace or plant
// files in it. Checked fully once per folder per process; after that each use checks that the
// folder is still the one checked (device and inode, SPEC §12): a folder swapped under a running
// scheduler is refused, never written through.
const roots = new Set<string>();
const checked = new Map<string, string>();
const identity = (st: Stats): string => `${st.dev}:${st.ino}`;

/** Declares `dir` a state or lock root: it and every folder below it that routinely uses are
 * checked before use. */
export function trustRoot(dir: string): void {
  roots.add(resolve(dir));
}

/** Declares a project's state and lock folders roots: the lock folder is a root of its own
 * (which may be a symlink) only when it is outside the state folder; the default
 * `<stateDir>/locks` is a folder below the state root, never a symlink (docs/security.md). */
export function trustStateAndLocks(stateDir: string, lockDir: string): void {
  const state = resolve(stateDir);
  const locks = resolve(lockDir);
  trustRoot(state);
  if (locks !== state && !locks.startsWith(`${state}/`)) trustRoot(locks);
}

function rootOf(abs: string): string | null {
  let best: string | null = null;
  for (const r of roots)
    if ((abs === r || abs.startsWith(`${r}/`)) && (best === null || r.length > best.length)) best = r;
  return best;
}

/** Why folder `dir` (already stat'ed) may not be used, or null. */
function folderRefusal(dir: string, st: Stats): string | null {
  if (!st.isDirectory()) return `${dir} is not a folder`;
  const uid = myUid();
  if (uid !== null && st.uid !== uid) {
    return `${dir} is owned by uid ${st.uid}, not by this user (uid ${uid}); routinely keeps state only in folders of its own user (use another stateDir, or run as the folder's owner)`;
  }
  if ((st.mode & 0o022) !== 0) {
    return `${dir} is writable by ${st.mode & 0o020 ? 'its group' : ''}${(st.mode & 0o022) === 0o022 ? ' and ' : ''}${st.mode & 0o002 ? 'other users' : ''} (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); fix it with: chmod 700 ${dir}`;
  }
  return null;
}

const goneRoot = (d: string): FolderReplacedError =>
  new FolderReplacedError(
    `${d} is gone while routinely ran (it was there when checked); nothing is written through its path until it is back — or restart routinely`,
  );

/** An absolute path that resolve() would return as it is (no `.`, `..`, `//` or trailing `/`). */
const NORMAL_ABSOLUTE = /^(?:\/(?!\.\.?(?:\/|$))[^/]+)+$/;

/** Checks `dir` and, when it is under a declared root, every folder from that root down to it:
 * each must be a folder of ours, writable by us alone; below the root none may be a symlink.
 * Missing folders are fine (they are created 0700): false, where true says `dir` is there.
 * Throws UnsafePathError (exit 2) naming the folder and the fix. */
export function checkFolder(dir: string): boolean {
  const abs = NORMAL_ABSOLUTE.test(dir) ? dir : resolve(dir);
  const root = rootOf(abs);
  // The everyday case, one system call: a folder checked before whose path still leads to that
  // very folder (device and inode). Whatever happened above it, what is written through the
  // path lands in the folder that was checked — a folder is one inode, never two. Anything else
  // (gone, replaced, never checked) takes the walk below, which says what changed and where.
  const known = checked.get(abs);
  if (known !== undefined) {
    let now: string | null = null;
    try {
      // the same look as the walk's at this folder: a root may be a symlink, below it nothing
      now = identity(abs === root || root === null ? statSync(abs) : lstatSync(abs));
    } catch {
      now = null;
    }
    if (now === known) return true;
  }
  const chain: string[] = [];
  for (let d = abs; ; d = dirname(d)) {
    chain.unshift(d);
    if (d === root || root === null || dirname(d) === d) break;
  }
  // first every folder above the chain that was checked before (another root: the state folder
  // above the lock folder): one swapped there shows below as "missing", not as replaced
  for (let d = dirname(chain[0]!); ; d = dirname(d)) {
    const known = checked.get(d);
    if (known !== undefined) {
      let now: string | null = null;
      try {
        now = identity(roots.has(d) ? statSync(d) : lstatSync(d));
      } catch {
        now = null;
      }
      if (now !== null && now !== known) {
        throw new FolderReplacedError(
          `${d} was replaced while routinely ran (it is not the folder checked before); nothing is written through it until it is back — or restart routinely`,
        );
      }
      if (now === null && roots.has(d)) throw goneRoot(d);
    }
    if (dirname(d) === d) break;
  }
  for (const d of chain) {
    const known = checked.get(d);
    if (known !== undefined) {
      let now: string | null = null;
      try {
        now = identity(d === chain[0] ? statSync(d) : lstatSync(d));
      } catch {
        now = null; // gone: it is created again (0700) and checked then
      }
      if (now === known) continue;
      if (now !== null) {
        // kept as it was: the folder stays refused until it is the one checked before again
        throw new FolderReplacedError(
          `${d} was replaced while routinely ran (it is not the folder checked before); nothing is written through it until it is back — or restart routinely`,
        );
      }
      // A state or lock root that vanished keeps its pin: moved away, it may come back as a link
      // to another folder a moment later (a swap is a rename, then a symlink), and one adopted
      // in between would be written through. A folder below a root is created again.
      if (roots.has(d)) throw goneRoot(d);
      checked.delete(d);
      return false;
    }
    let st: Stats;
    try {
      // the root may be a symlink to a folder elsewhere; below it, nothing may be
      st = d === chain[0] ? statSync(d) : lstatSync(d);
    } catch (err) {
      // missing (created 0700 when needed), or a file in the way (reported by whoever creates)
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return false;
      throw err;
    }
    if (st.isSymbolicLink())
      throw new UnsafePathError(`${d} is a symbolic link inside routinely's state; refusing to follow it`);
    const why = folderRefusal(d, st);
    if (why) throw new UnsafePathError(why);
    checked.set(d, identity(st));
  }
  return true;
}

/** mkdir -p with mode 0700, bounded: refuses pseudo file systems, creates at most 32 levels,
 * one mkdir(2) per level (never Node's recursive mkdir); then checks the folder (checkFolder). */
export function ensureDir(dir: string): void {
  const abs = NORMAL_ABSOLUTE.test(dir) ? dir : resolve(dir);
  // still the folder checked before; gone (a folder below a root that was removed): made again
  if (checked.has(abs) && checkFolder(abs)) return;
  if (PSEUDO_FS.some((p) => abs === p || abs.startsWith(`${p}/`))) {
    throw new UnsafePathError(
      `${abs} is on /${abs.split('/')[1]}, a kernel pseudo file system; choose a real folder for state and locks`,
    );
  }
  const missing: string[] = [];
  for (let d = abs; ; d = dirname(d)) {
    const st = lstatQuiet(d);
    if (st) {
      if (!st.isDirectory() && !(st.isSymbolicLink() && safeIsDir(d))) {
        throw Object.assign(new Error(`${d} is not a directory`), { code: 'ENOTDIR' });
      }
      break;
    }
    missing.push(d);
    if (missing.length > MAX_NEW_LEVELS) {
      throw new UnsafePathError(`refusing to create more than ${MAX_NEW_LEVELS} levels of folders for ${abs}`);
    }
    if (dirname(d) === d) break;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d, { mode: 0o700 });
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
  }
  checkFolder(abs);
}

/** A symlinked folder above the state folder is allowed (the folders above may be links). */
function safeIsDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
