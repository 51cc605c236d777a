// The fencing counter (SPEC §4.7). The lock file is removed on release, so the last generation
// handed out is kept beside it in `<key>.generation`. Only the current holder writes it (and a
// reclaimer under the guard, raising it to the stale lock's generation); acquirers re-read it
// after winning the lock, so an acquirer that read an old value before someone else's whole
// acquire/release cycle still ends up strictly above every earlier holder.

import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readNoFollow, replaceFile } from './files.js';
import type { LockPaths } from './paths.js';
import { parseLockRecord } from './record.js';

export function readGeneration(paths: LockPaths): number {
  let raw: string | null = null;
  try {
    raw = readNoFollow(paths.generation);
  } catch {
    raw = null;
  }
  const n = raw === null ? Number.NaN : Number(raw.trim());
  if (Number.isSafeInteger(n) && n >= 0) return n;
  // Missing or damaged counter: recover the floor from the reclaimed locks kept for forensics.
  return highestStaleGeneration(paths);
}

export function writeGeneration(paths: LockPaths, generation: number): void {
  replaceFile(paths.generation, `${generation}\n`);
}

function highestStaleGeneration(paths: LockPaths): number {
  let max = 0;
  let names: string[];
  try {
    names = readdirSync(paths.dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    if (!name.startsWith(`${paths.lockName}.stale.`)) continue;
    try {
      const rec = parseLockRecord(readNoFollow(join(paths.dir, name)) ?? '');
      if (rec && rec.generation > max) max = rec.generation;
    } catch {
      // unreadable: contributes nothing
    }
  }
  return max;
}
