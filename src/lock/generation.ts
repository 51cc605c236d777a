// The fencing token (SPEC §4.7, §4.12). The generation of a holder is the number of the slot it
// linked, `<key>.slot.<n>`: link(2) hands each number to exactly one process, and a new slot is
// always one above the highest that exists, so the counter cannot be garbled, truncated or
// rolled back by a full disk, a stall or a crash (there is no counter file to damage).
//
// When no slot survives (a new project, a wiped lock folder, the first run after upgrading from
// a version that kept a `<key>.generation` counter) the first slot goes above every value any
// surviving record shows: that old counter if it still reads as a number, the kept stale locks,
// a `<key>.lock` of an earlier version, and what the caller knows from state (exec runs and the
// registry, routine history) through `floor`.

import { UnsafePathError } from '../errors.js';
import { LOCK_FILE_CAP, readFileChecked } from '../fs/files.js';
import type { LockPaths } from './paths.js';
import { MAX_GENERATION } from './record.js';
import { highestStaleGeneration } from './reclaim.js';

/** The highest generation recorded anywhere but in slots; 0 when nothing shows one. */
export function generationFloor(paths: LockPaths, names: readonly string[], floor?: () => number): number {
  let max = legacyCounter(paths);
  max = Math.max(max, highestStaleGeneration(paths, names));
  if (floor) {
    const fromState = floor();
    if (Number.isSafeInteger(fromState) && fromState > 0 && fromState <= MAX_GENERATION) max = Math.max(max, fromState);
  }
  return max;
}

/** `<key>.generation` as earlier versions wrote it; garbage, a symlink or a FIFO there counts 0. */
function legacyCounter(paths: LockPaths): number {
  let text: string | undefined;
  try {
    text = readFileChecked(paths.generation, LOCK_FILE_CAP)?.text;
  } catch (err) {
    if (err instanceof UnsafePathError) return 0;
    throw err;
  }
  if (text === undefined) return 0;
  const trimmed = text.trim();
  if (!/^[0-9]{1,16}$/.test(trimmed)) return 0;
  const n = Number(trimmed);
  return Number.isSafeInteger(n) && n <= MAX_GENERATION ? n : 0;
}
