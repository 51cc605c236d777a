// Small synchronous file primitives for lock files. Synchronous on purpose: a lock cycle is a
// handful of syscalls (≈ 20 µs), while each fs.promises call is a thread-pool round trip
// (FACTS). No fsync: a lock only has to survive process crashes, which the kernel's page cache
// does; after a power loss every lock is stale anyway (its owner is gone, boot id changed).

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  linkSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { UnsafePathError, errnoCode } from '../errors.js';

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** Reads a file without following a symlink at its name. null when it does not exist. */
export function readNoFollow(path: string): string | null {
  let fd: number;
  try {
    fd = openSync(path, READ_FLAGS);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw new UnsafePathError(`${path} is a symbolic link; refusing to use it as a lock or state file`);
    throw err;
  }
  try {
    return readAll(fd);
  } finally {
    closeSync(fd);
  }
}

const chunk = Buffer.allocUnsafe(8192);

/** Reads a small file with as few read(2) calls as possible: a short read is the end. */
function readAll(fd: number): string {
  let n = readSync(fd, chunk, 0, chunk.length, 0);
  if (n < chunk.length) return chunk.toString('utf8', 0, n);
  const parts = [Buffer.from(chunk)];
  let pos = n;
  while ((n = readSync(fd, chunk, 0, chunk.length, pos)) > 0) {
    parts.push(Buffer.from(chunk.subarray(0, n)));
    pos += n;
  }
  return Buffer.concat(parts).toString('utf8');
}

// One randomBytes() call per 4 KiB of lock ids: the call itself costs ≈ 15 µs, more than a
// whole lock cycle's other syscalls.
let pool = Buffer.alloc(0);
let poolOffset = 0;

export function randomHex(bytes: number): string {
  if (poolOffset + bytes > pool.length) {
    pool = randomBytes(4096);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return hex;
}

/** Creates `path` exclusively (never through a symlink) with `data`, mode 0600. */
export function writeNewFile(path: string, data: string): void {
  const fd = openSync(path, CREATE_FLAGS, 0o600);
  try {
    writeSync(fd, data);
  } catch (err) {
    closeSync(fd);
    unlinkQuiet(path);
    throw err;
  }
  closeSync(fd);
}

/** Writes a complete temp file beside `path`, then renames it over `path` (atomic replace). */
export function replaceFile(path: string, data: string): void {
  const tmp = `${path}.${randomHex(6)}.tmp`;
  writeNewFile(tmp, data);
  try {
    renameSync(tmp, path);
  } catch (err) {
    unlinkQuiet(tmp);
    throw err;
  }
}

/** Publishes a complete temp file under `name` with link(2), which fails if `name` exists:
 * there is never a moment when `name` holds a half-written file (SPEC §4.1). */
export function linkNew(tmp: string, name: string): boolean {
  try {
    linkSync(tmp, name);
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

/** mkdir -p with mode 0700 for the folders we create. */
export function ensureDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}
