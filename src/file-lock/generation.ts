// The fencing token (SPEC §4.7, §4.12). The generation of a holder is the number of the slot it
// linked, `<key>.slot.<n>`: link(2) hands each number to exactly one process, and a new slot is
// always one above the highest that exists, so the counter cannot be garbled, truncated or
// rolled back by a full disk, a stall or a crash (there is no counter file to damage).
//
// When no slot survives (a new project, a wiped lock folder) the first slot goes above every
// value any surviving record shows: the kept stale locks, and what the caller knows from state
// (exec runs and the registry, routine history) through `floor` — and, as every next slot
// (look.ts), the highest release mark and a `<key>.lock` record.

import type { LockPaths } from './paths.js';
import { MAX_GENERATION } from '../lock/record.js';
import { highestStaleGeneration } from './reclaim.js';

/** The highest generation recorded anywhere but in slots; 0 when nothing shows one. */
export function generationFloor(paths: LockPaths, names: readonly string[], floor?: () => number): number {
  let max = highestStaleGeneration(paths, names);
  if (floor) {
    const fromState = floor();
    if (Number.isSafeInteger(fromState) && fromState > 0 && fromState <= MAX_GENERATION) max = Math.max(max, fromState);
  }
  return max;
}
