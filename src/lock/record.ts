// The lock file format of SPEC §4. Parsed by hand, not with zod: this runs on every acquire,
// heartbeat and poll, and must stay in the tens of microseconds. Every field is checked before
// anything acts on it (SPEC §12): lock ids are 32 hex digits (they name files), generations are
// bounded, child pids are above 1 (a signal to group 0 or 1 reaches everything).

import { isObj } from '../is-object.js';

/** Far above any real count (a million acquisitions a second for 30 years), and far below where
 * float arithmetic on it stops being exact. */
export const MAX_GENERATION = 1e15;

/** A process group the holder started; the leader's start time proves identity (SPEC §4.4). */

const LOCK_ID = /^[0-9a-f]{32}$/;
/** Lock ids name files: only ever 32 lowercase hex digits (SPEC §12). */
export function isLockId(id: unknown): id is string {
  return typeof id === 'string' && LOCK_ID.test(id);
}

export interface ChildGroup {
  pid: number;
  start_time: string | null;
}

export interface LockOwner {
  pid: number;
  host: string;
  boot_id: string | null;
  start_time: string | null;
  command: string;
  run_id?: string | null;
  routine?: string | null;
  /** The config file a scheduler runs with (shown by `scheduler status`). */
  config?: string | null;
  children?: ChildGroup[];
  /** A scheduler that is shutting down (its lock is released once it has). */
  stopping?: boolean;
  /** Held for a scheduled tick of a routine (lease.ts LockOwnerInfo). */
  scheduled?: boolean;
  /** A scheduler's lease taken again after a stall: the lock id of its first lease, which its
   * claims of ticks name (a shared database; scheduler/claims.ts). */
  claimer?: string;
  /** Linux pid namespace of the owner; another namespace on the same host is judged like a
   * remote host (by expiry), since its pids mean nothing here. */
  pid_ns?: string | null;
}

export interface LockRecord {
  version: 1;
  key: string;
  lock_id: string;
  generation: number;
  owner: LockOwner;
  /** Epoch seconds (float). */
  created_at: number;
  heartbeat_at: number;
  expires_at: number;
}

const isStrOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';

/** Returns the record, or null when the text is not a well-formed lock (then it is stale, §4.4). */
export function parseLockRecord(text: string): LockRecord | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  return checkLockRecord(v);
}

/** `v` as a lock record when every field is in range (SPEC §12): a file's, or a database row's
 * taken as one (input either way); else null. */
export function checkLockRecord(v: unknown): LockRecord | null {
  if (!isObj(v) || v.version !== 1) return null;
  const { key, lock_id, generation, owner, created_at, heartbeat_at, expires_at } = v;
  if (typeof key !== 'string' || !isLockId(lock_id)) return null;
  if (!isGeneration(generation)) return null;
  for (const t of [created_at, heartbeat_at, expires_at]) {
    if (typeof t !== 'number' || !Number.isFinite(t)) return null;
  }
  if (!isOwner(owner)) return null;
  return v as unknown as LockRecord;
}

/** Whether `owner` is a lock owner with every field in range (SPEC §12). */
export function isOwner(owner: unknown): owner is LockOwner {
  if (!isObj(owner)) return false;
  if (!Number.isSafeInteger(owner.pid) || (owner.pid as number) < 1) return false;
  if (typeof owner.host !== 'string' || typeof owner.command !== 'string') return false;
  if (!isStrOrNull(owner.boot_id) || !isStrOrNull(owner.start_time)) return false;
  if (owner.children !== undefined) {
    if (!Array.isArray(owner.children)) return false;
    for (const c of owner.children) {
      if (!isChildGroup(c)) return false;
    }
  }
  return true;
}

export function isGeneration(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= MAX_GENERATION;
}

export function isChildGroup(c: unknown): c is ChildGroup {
  return isObj(c) && Number.isSafeInteger(c.pid) && (c.pid as number) > 1 && isStrOrNull(c.start_time);
}

export function serializeLockRecord(record: LockRecord): string {
  return `${JSON.stringify(record)}\n`;
}

/** Epoch seconds with millisecond precision, as stored in lock files. */
export const toEpochSeconds = (ms: number): number => Math.round(ms) / 1000;
