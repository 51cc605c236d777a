// A state folder swapped under a holder (SPEC §12) says nothing about who holds the lock: the
// holder's checks must not call the lock lost because its slot "vanished" behind a swapped
// path, even when the swap lands between the folder check and the slot reads.

import { mkdirSync, renameSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkFolder, trustRoot } from '../../src/fs/files.js';
import { fileLockBackend } from '../../src/lock/backend.js';
import { testdir } from '../helpers/testdir.js';

describe('a holder whose state folder is swapped mid-check', () => {
  it('verify() keeps the lease (expiry decides), and says lost only for what the slots say', async () => {
    const root = testdir();
    const state = join(root, '.routinely');
    const lockDir = join(state, 'locks');
    mkdirSync(lockDir, { recursive: true, mode: 0o700 });
    const other = join(root, 'other');
    mkdirSync(other, { mode: 0o700 });
    trustRoot(state);
    trustRoot(lockDir);
    let swapAt: string | null = null;
    const lock = fileLockBackend({
      lockDir, ttlMs: 60_000, refreshMs: 60_000,
      hooks: {
        step: (name) => {
          if (name !== swapAt) return;
          swapAt = null;
          // the swap lands right after the folder check, before the slots are read
          renameSync(state, join(root, 'real'));
          symlinkSync(other, state);
        },
      },
    });
    const got = await lock.acquire('exec-run', { command: 'test' });
    expect(got.ok).toBe(true);
    if (!got.ok) return;
    // the state folder is checked (and pinned) by every state write, as a scheduler's fires do
    checkFolder(state);
    swapAt = 'verify:slots';
    expect(got.lease.verify()).toEqual({ ok: true });
    expect(got.lease.held()).toBe(true);
  });
});
