// The history folder's stamp where the folder does not keep the value set: a file system of whole
// seconds (every stamp of a second would be the same), or a change by someone else between the
// setting and the reading back. No stamp then: readers look at every history.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { testdir } from '../helpers/testdir.js';

const kept = vi.hoisted(() => ({ as: (ns: bigint): bigint => ns }));
vi.mock('../../src/fs/names.js', async (real) => {
  const mod = await real<typeof import('../../src/fs/names.js')>();
  return {
    ...mod,
    stampFolder: (dir: string, seconds: number) => {
      const st = mod.stampFolder(dir, seconds);
      return { ...st, ino: st.ino, mtimeNs: kept.as(st.mtimeNs) };
    },
  };
});

const { stampHistory } = await import('../../src/state/history-stamp.js');

describe('the history folder stamp, where the folder does not keep it', () => {
  it('is none on a file system of whole seconds, or after a change between the set and the look', () => {
    const dir = join(testdir(), 'history');
    mkdirSync(dir);
    kept.as = (ns) => ns;
    expect(stampHistory(dir)).not.toBeNull();
    kept.as = (ns) => (ns / 1_000_000_000n) * 1_000_000_000n;
    expect(stampHistory(dir)).toBeNull();
    kept.as = () => BigInt(Date.now()) * 1_000_000n;
    expect(stampHistory(dir)).toBeNull();
  });
});
