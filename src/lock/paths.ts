// Where a key's lock files live (SPEC §3): `<lockDir>/<key>.lock` plus its helpers.

import { join } from 'node:path';

const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface LockPaths {
  dir: string;
  key: string;
  /** `<key>.lock` — the lock itself. */
  lockName: string;
  lock: string;
  /** `<key>.generation` — the last generation handed out (fencing counter, SPEC §4.7). */
  generation: string;
  /** `<key>.lock.reclaim` — serializes reclaimers (SPEC §4.5). */
  guard: string;
  /** Prefix of `<key>.children.<lock_id>`: child groups appended by a holder as it starts them. */
  childrenPrefix: string;
}

export function lockPaths(dir: string, key: string): LockPaths {
  // Keys become file names: only the id pattern, never a path (no '/', no '..').
  if (!KEY_PATTERN.test(key) || key.includes('..')) throw new Error(`invalid lock key ${JSON.stringify(key)}`);
  const lockName = `${key}.lock`;
  return {
    dir,
    key,
    lockName,
    lock: join(dir, lockName),
    generation: join(dir, `${key}.generation`),
    guard: join(dir, `${lockName}.reclaim`),
    childrenPrefix: `${key}.children.`,
  };
}
