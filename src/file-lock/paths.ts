// Where a key's lock files live (SPEC §3, §4; docs/lock.md "Files"). Every name below is either
// created exactly once (slots, stale copies, temp files: O_EXCL or link(2)) or written only by
// the one holder whose lock_id it carries (heartbeat, children journal). `<key>.lock` is a view:
// a hard link to the current holder's slot.

import { UsageError } from '../errors.js';
import { childPath } from '../fs/names.js';
import { isLockId } from '../lock/record.js';

/** Keys name files: an id's characters, never a path (the longest: a named lock's slot,
 * `named.<63 characters>.<slot>`). */
const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/;

/** Whether `key` can name a lock (it becomes file names: never a path, no '/', no '..'). */
export const isLockKey = (key: unknown): key is string =>
  typeof key === 'string' && KEY_PATTERN.test(key) && !key.includes('..');

export interface LockPaths {
  dir: string;
  key: string;
  /** `<key>.lock` — the current holder's record (a hard link to its slot). */
  lockName: string;
  lock: string;
  /** Prefix of `<key>.slot.<generation>`: one immutable record per acquisition. */
  slotPrefix: string;
  /** Prefix of `<key>.beat.<lock_id>`: a holder's heartbeat, run and children. */
  beatPrefix: string;
  /** Prefix of `<key>.free.<generation>`: the holder of that slot released it (a hard link to
   * the slot, made by the holder alone: one link(2), no data). */
  freePrefix: string;
  /** Prefix of `<key>.children.<lock_id>`: child groups appended by a holder as it starts them. */
  childrenPrefix: string;
  /** Prefix of `<key>.lock.stale.<ts>`: records of reclaimed holders, kept for forensics. */
  stalePrefix: string;
  /** Prefix of `<key>.tmp.<random>`: complete files about to be linked or renamed into place. */
  tmpPrefix: string;
  /** Prefix of `<key>.spare.<random>`: a released holder's heartbeat file, left for the next
   * holder to rename into its own (no new inode a lease). */
  sparePrefix: string;
}

export function lockPaths(dir: string, key: string): LockPaths {
  // Keys become file names: only the id pattern, never a path (no '/', no '..').
  if (!isLockKey(key))
    throw new UsageError(
      `invalid lock key ${JSON.stringify(key)} (letters, digits, ".", "_" and "-", at most 80 characters, no "..")`,
    );
  const lockName = `${key}.lock`;
  return {
    dir,
    key,
    lockName,
    lock: childPath(dir, lockName),
    slotPrefix: `${key}.slot.`,
    beatPrefix: `${key}.beat.`,
    freePrefix: `${key}.free.`,
    childrenPrefix: `${key}.children.`,
    stalePrefix: `${lockName}.stale.`,
    tmpPrefix: `${key}.tmp.`,
    sparePrefix: `${key}.spare.`,
  };
}

export const slotPath = (p: LockPaths, generation: number): string => childPath(p.dir, `${p.slotPrefix}${generation}`);
export const freePath = (p: LockPaths, generation: number): string => childPath(p.dir, `${p.freePrefix}${generation}`);

export function beatPath(p: LockPaths, lockId: string): string {
  if (!isLockId(lockId)) throw new Error(`invalid lock id ${JSON.stringify(lockId)}`);
  return childPath(p.dir, `${p.beatPrefix}${lockId}`);
}

export function journalPath(p: LockPaths, lockId: string): string {
  if (!isLockId(lockId)) throw new Error(`invalid lock id ${JSON.stringify(lockId)}`);
  return childPath(p.dir, `${p.childrenPrefix}${lockId}`);
}

// A key may contain dots (a routine id's history key), so another key's files can start with any
// of this key's prefixes (`history-a.spare.x.slot.1` starts with `history-a.spare.`): a name is
// this key's only when all of it is, to its last character.
const RANDOM_NAME = /^[0-9a-f]{16}$/;
const STALE_STAMP = /^[0-9]{1,16}(\.[0-9]+)?(-[0-9]{1,6})?$/;

/** Whether `name` is one of this key's spare heartbeat files, `<key>.spare.<16 hex digits>`. */
export const isSpareName = (p: LockPaths, name: string): boolean =>
  name.startsWith(p.sparePrefix) && RANDOM_NAME.test(name.slice(p.sparePrefix.length));

/** Whether `name` is one of this key's temp files, `<key>.tmp.<16 hex digits>`. */
export const isTempName = (p: LockPaths, name: string): boolean =>
  name.startsWith(p.tmpPrefix) && RANDOM_NAME.test(name.slice(p.tmpPrefix.length));

/** Whether `name` is one of this key's kept stale records, `<key>.lock.stale.<ms>[-<n>]`. */
export const isStaleName = (p: LockPaths, name: string): boolean =>
  name.startsWith(p.stalePrefix) && STALE_STAMP.test(name.slice(p.stalePrefix.length));

/** The lock id a heartbeat file or children journal of this key is named by, or null. */
export function holderFileOwner(p: LockPaths, name: string): string | null {
  const prefix = name.startsWith(p.beatPrefix)
    ? p.beatPrefix
    : name.startsWith(p.childrenPrefix)
      ? p.childrenPrefix
      : null;
  if (prefix === null) return null;
  const id = name.slice(prefix.length);
  return isLockId(id) ? id : null;
}

/** The generation a slot file name carries, or null for any other name. */
export function slotGeneration(p: LockPaths, name: string): number | null {
  return numberAfter(p.slotPrefix, name);
}

/** The generation a release mark carries, or null for any other name. */
export function freeGeneration(p: LockPaths, name: string): number | null {
  return numberAfter(p.freePrefix, name);
}

function numberAfter(prefix: string, name: string): number | null {
  if (!name.startsWith(prefix)) return null;
  const digits = name.slice(prefix.length);
  if (!/^[1-9][0-9]{0,15}$/.test(digits)) return null;
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : null;
}
