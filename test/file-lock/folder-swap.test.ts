// A state folder swapped under a holder (SPEC §12) says nothing about who holds the lock: the
// holder's checks must not call the lock lost because its slot "vanished" behind a swapped
// path, even when the swap lands between the folder check and the slot reads.

import { mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkFolder, trustRoot } from '../../src/fs/files.js';
import { fileLockBackend } from '../../src/file-lock/backend.js';
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
      lockDir,
      ttlMs: 60_000,
      refreshMs: 60_000,
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
    expect(got.lease.confirm()).toBe(true);
  });
});

describe('a holder whose state folder moves away or is swapped at the view check', () => {
  const setup = async (swap: (root: string, state: string, other: string) => void, at: string) => {
    const root = testdir();
    const state = join(root, '.routinely');
    const lockDir = join(state, 'locks');
    mkdirSync(lockDir, { recursive: true, mode: 0o700 });
    const other = join(root, 'other');
    mkdirSync(join(other, 'locks'), { recursive: true, mode: 0o700 });
    trustRoot(state);
    trustRoot(lockDir);
    let armed = false;
    const lock = fileLockBackend({
      lockDir,
      ttlMs: 60_000,
      refreshMs: 60_000,
      hooks: {
        step: (name) => {
          if (armed && name === at) {
            armed = false;
            swap(root, state, other);
          }
        },
      },
    });
    const got = await lock.acquire('exec-run', { command: 'test' });
    if (!got.ok) throw new Error('not acquired');
    checkFolder(state);
    armed = true;
    return got.lease;
  };

  it('moved away (before the link to another folder exists): not lost', async () => {
    const lease = await setup((root, state) => renameSync(state, join(root, 'real')), 'verify:slots');
    expect(lease.verify()).toEqual({ ok: true });
  });

  it('swapped at the view step to a folder with a lock view of its own: not lost', async () => {
    const lease = await setup((root, state, other) => {
      // the other folder carries a view that claims a later generation
      const view = readFileSync(join(state, 'locks', 'exec-run.lock'), 'utf8');
      const forged = view
        .replace(/"lock_id":"[0-9a-f]+"/, `"lock_id":"${'f'.repeat(32)}"`)
        .replace('"generation":1', '"generation":2');
      expect(forged).not.toBe(view);
      writeFileSync(join(other, 'locks', 'exec-run.lock'), forged);
      renameSync(state, join(root, 'real'));
      symlinkSync(other, state);
    }, 'verify:view');
    expect(lease.verify()).toEqual({ ok: true });
  });
});
