// Reading the lock folder (docs/lock.md "Design"): the slots, the holder of the highest one with
// its heartbeat, and the `<key>.lock` view. Nothing here writes.

import { readChecksummed } from '../checksum.js';
import { UnsafePathError } from '../errors.js';
import { LOCK_FILE_CAP, namesIn, readFileChecked } from '../fs/files.js';
import { beatPath, freeGeneration, isLockId, slotGeneration, slotPath, type LockPaths } from './paths.js';
import { isChildGroup, parseLockRecord, type ChildGroup, type LockRecord } from './record.js';

/** What a holder rewrites while it holds (only its own file, `<key>.beat.<lock_id>`): the
 * heartbeat, what it is doing and the groups it started. */
export interface Beat {
  version: 1;
  lock_id: string;
  heartbeat_at: number;
  expires_at: number;
  run_id: string | null;
  routine: string | null;
  children: ChildGroup[];
  /** A scheduler that is shutting down (SPEC §6: `scheduler status` says `stopping`). */
  stopping?: true;
}

export function parseBeat(text: string, lockId: string): Beat | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const b = v as Record<string, unknown>;
  if (b.version !== 1 || b.lock_id !== lockId) return null;
  const num = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
  const strOrNull = (x: unknown): x is string | null => x === null || typeof x === 'string';
  if (!num(b.heartbeat_at) || !num(b.expires_at)) return null;
  if (!strOrNull(b.run_id) || !strOrNull(b.routine)) return null;
  if (!Array.isArray(b.children) || !b.children.every(isChildGroup)) return null;
  if (b.stopping !== undefined && b.stopping !== true) return null;
  return b as unknown as Beat;
}

export function serializeBeat(b: Beat): string {
  return `${JSON.stringify(b)}\n`;
}

/** Names in the lock folder; [] when it does not exist yet. */
export function listLockDir(paths: LockPaths): string[] {
  return namesIn(paths.dir);
}

export function highestSlot(paths: LockPaths, names: readonly string[]): number | null {
  let max: number | null = null;
  for (const n of names) {
    const g = slotGeneration(paths, n);
    if (g !== null && (max === null || g > max)) max = g;
  }
  return max;
}

/** The highest release mark: a floor for the next generation even if its slot was lost. */
export function highestFree(paths: LockPaths, names: readonly string[]): number {
  let max = 0;
  for (const n of names) {
    const g = freeGeneration(paths, n);
    if (g !== null && g > max) max = g;
  }
  return max;
}

/** The holder of one slot as observers see it: the immutable record with its latest heartbeat. */
export interface SlotHolder {
  generation: number;
  /** The record with heartbeat_at / expires_at / run_id / routine / children from the beat. */
  record: LockRecord;
  slotIno: number;
  /** Changes whenever the holder shows a sign of life (for observers timing it themselves). */
  signature: string;
}

export type SlotRead =
  | { kind: 'missing' }
  | { kind: 'bad'; why: string; /** its content, when it could be read (kept on takeover) */ text: string | null }
  | { kind: 'ok'; holder: SlotHolder };

/** Reads slot `generation` and the heartbeat of its holder. */
export function readSlot(paths: LockPaths, generation: number): SlotRead {
  const file = slotPath(paths, generation);
  let content;
  try {
    content = readFileChecked(file, LOCK_FILE_CAP);
  } catch (err) {
    if (err instanceof UnsafePathError) return { kind: 'bad', why: err.message, text: null };
    throw err;
  }
  if (content === null) return { kind: 'missing' };
  const rec = parseLockRecord(content.text);
  if (!rec || rec.key !== paths.key || rec.generation !== generation) {
    return { kind: 'bad', why: `${file} is not a valid lock record`, text: content.text };
  }
  const beat = readBeat(paths, rec.lock_id);
  return { kind: 'ok', holder: withBeat(rec, content.ino, beat) };
}

export function readBeat(paths: LockPaths, lockId: string): Beat | null {
  if (!isLockId(lockId)) return null;
  // Rewritten in place by its holder (SPEC §4.15): a read that meets the write half done sees a
  // checksum that does not match, and reads again; a beat torn for good (a crash mid-write) is
  // as good as none: the slot's record and the owner's liveness judge it.
  for (let attempt = 0; attempt < 3; attempt++) {
    let content;
    try {
      content = readFileChecked(beatPath(paths, lockId), LOCK_FILE_CAP);
    } catch (err) {
      if (err instanceof UnsafePathError) return null; // not trusted: judged by the record alone
      throw err;
    }
    if (!content) return null;
    const text = readChecksummed(content.text);
    if (text !== null) return parseBeat(text, lockId);
  }
  return null;
}

export function withBeat(rec: LockRecord, slotIno: number, beat: Beat | null): SlotHolder {
  if (!beat) return { generation: rec.generation, record: rec, slotIno, signature: `${rec.lock_id}@${rec.heartbeat_at}` };
  const record: LockRecord = {
    ...rec,
    heartbeat_at: beat.heartbeat_at,
    expires_at: beat.expires_at,
    owner: {
      ...rec.owner,
      run_id: beat.run_id ?? rec.owner.run_id ?? null,
      routine: beat.routine ?? rec.owner.routine ?? null,
      children: beat.children,
      ...(beat.stopping ? { stopping: true } : {}),
    },
  };
  return {
    generation: rec.generation,
    record,
    slotIno,
    signature: `${rec.lock_id}@${beat.heartbeat_at}`,
  };
}

/** `<key>.lock` as found: absent, unreadable, or a record with the inode it is linked to. */
export type ViewRead =
  | { kind: 'missing' }
  | { kind: 'unreadable'; ino: number; text: string }
  | { kind: 'ok'; record: LockRecord; ino: number; text: string };

/** Reads `<key>.lock`. A symlink, FIFO, device or oversized file there is refused (thrown):
 * nobody but the user can put it there, and it is nothing routinely wrote. */
export function readView(paths: LockPaths): ViewRead {
  const content = readFileChecked(paths.lock, LOCK_FILE_CAP);
  if (content === null) return { kind: 'missing' };
  const rec = parseLockRecord(content.text);
  if (!rec || rec.key !== paths.key) return { kind: 'unreadable', ino: content.ino, text: content.text };
  return { kind: 'ok', record: rec, ino: content.ino, text: content.text };
}



