// The history folder's stamp where the folder does not keep the value set: a file system of whole
// seconds (every stamp of a second would be the same), or a change by someone else between the
// setting and the reading back. No stamp then: readers look at every history.

import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { testdir } from '../helpers/testdir.js';

const kept = vi.hoisted(() => ({ as: (ns: bigint): bigint => ns, deny: false }));
vi.mock('../../src/fs/names.js', async (real) => {
  const mod = await real<typeof import('../../src/fs/names.js')>();
  return {
    ...mod,
    stampFolder: (dir: string, seconds: number) => {
      // a folder of another user's: only its owner may set its times
      if (kept.deny) throw Object.assign(new Error('EPERM: operation not permitted'), { code: 'EPERM' });
      const st = mod.stampFolder(dir, seconds);
      return { ...st, ino: st.ino, mtimeNs: kept.as(st.mtimeNs) };
    },
  };
});

const { beginAppend, currentStamp, endAppend, stampHistory } = await import('../../src/state/history-stamp.js');

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

  it("a writer that may not set the folder's times, whose mark was removed under it, still changes the folder when its append ends", () => {
    const dir = join(testdir(), 'history');
    mkdirSync(dir);
    kept.as = (ns) => ns;
    kept.deny = false;
    const made = beginAppend(dir)!;
    rmSync(made);
    const stamp = stampHistory(dir);
    expect(stamp).not.toBeNull();
    kept.deny = true;
    try {
      endAppend(dir, made);
    } finally {
      kept.deny = false;
    }
    expect(currentStamp(dir)).not.toBe(stamp);
  });
});
