// A holder's heartbeat file, `<key>.beat.<lock_id>` (docs/lock.md "Files"): its record, how
// observers read it (checksummed: a read that meets a rewrite half done reads again) and how its
// holder writes it — created once at acquisition, then rewritten in place over the same block,
// so keeping a lease never needs new blocks or inodes (SPEC §4.15).

import { frameChecksummed, readChecksummed } from '../checksum.js';
import { UnsafePathError } from '../errors.js';
import { reuseFileAs, rewriteInPlace } from '../fs/durable.js';
import { LOCK_FILE_CAP, readFileChecked, writeNewFile } from '../fs/files.js';
import { beatPath, type LockPaths } from './paths.js';
import { isLockId } from '../lock/record.js';
import { isChildGroup, type ChildGroup, type LockOwner } from '../lock/record.js';

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
  /** Who holds the lease and what for: so that a holder whose slot record was damaged (zeroed
   * by a crash or a hand) is still known alive, and busy (SPEC §4 rule 4). */
  owner?: BeatOwner;
}

export type BeatOwner = Pick<LockOwner, 'pid' | 'host' | 'boot_id' | 'start_time' | 'command'> & {
  pid_ns?: string | null;
};

function isBeatOwner(v: unknown): v is BeatOwner {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return (
    Number.isSafeInteger(o.pid) &&
    (o.pid as number) > 0 &&
    typeof o.host === 'string' &&
    typeof o.command === 'string' &&
    (o.boot_id === null || typeof o.boot_id === 'string') &&
    (o.start_time === null || typeof o.start_time === 'string') &&
    (o.pid_ns === undefined || o.pid_ns === null || typeof o.pid_ns === 'string')
  );
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
  if (b.owner !== undefined && !isBeatOwner(b.owner)) return null;
  return b as unknown as Beat;
}

export function serializeBeat(b: Beat): string {
  return `${JSON.stringify(b)}\n`;
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

/** A heartbeat record is a few hundred bytes: written padded to one block, always the same one. */
const BEAT_BYTES = 4096;

/** Creates the heartbeat file (O_EXCL: only ever ours) with `beat`, padded to BEAT_BYTES; on a
 * failed write it is removed again and the error thrown. */
export function createBeatFile(file: string, beat: Beat): void {
  writeNewFile(file, frameChecksummed(serializeBeat(beat).trimEnd(), BEAT_BYTES));
}

/** Makes the heartbeat file `file` from `spare`, an earlier holder's heartbeat file (renamed,
 * then rewritten in place: the inode and block it has); false when no spare could be taken. */
export function reuseBeatFile(spare: string, file: string, beat: Beat): boolean {
  return reuseFileAs(spare, file, frameChecksummed(serializeBeat(beat).trimEnd(), BEAT_BYTES));
}

/** Rewrites the heartbeat file in place, over the blocks it has. */
export function rewriteBeatFile(file: string, beat: Beat): void {
  rewriteInPlace(file, frameChecksummed(serializeBeat(beat).trimEnd(), BEAT_BYTES));
}
