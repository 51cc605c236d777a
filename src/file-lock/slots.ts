// Reading the lock folder (docs/lock.md "Design"): its names, the slots and release marks, and
// the holder of one slot with its heartbeat (beat.ts). The `<key>.lock` view is view.ts. Nothing
// here writes.

import { UnsafePathError } from '../errors.js';
import { LOCK_FILE_CAP, namesIn, readFileChecked } from '../fs/files.js';
import { readBeat, type Beat } from './beat.js';
import { freeGeneration, slotGeneration, slotPath, type LockPaths } from './paths.js';
import { parseLockRecord, type LockRecord } from '../lock/record.js';

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

export function withBeat(rec: LockRecord, slotIno: number, beat: Beat | null): SlotHolder {
  if (!beat)
    return { generation: rec.generation, record: rec, slotIno, signature: `${rec.lock_id}@${rec.heartbeat_at}` };
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
