// Named locks over the lock backend (src/lock/named.ts): their keys, and taking a free slot —
// at once, or waiting on every slot together — with the file backend on a real folder.

import { describe, expect, it } from 'vitest';
import { fileLockBackend } from '../../src/file-lock/backend.js';
import { acquireLock, lockKey, lockOfKey, slotKeys, slotsOf } from '../../src/lock/named.js';
import { eventually } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const backend = () => fileLockBackend({ lockDir: testdir(), ttlMs: 10_000, refreshMs: 3_000 });
const owner = { command: 'test' };

describe('named lock keys', () => {
  it('the exec lock is exec-run; a named lock has one key per slot, and each key tells its lock back', () => {
    expect(lockKey('exec')).toBe('exec-run');
    expect(slotKeys('exec', 5)).toEqual(['exec-run']);
    expect(slotKeys('agents', 3)).toEqual(['named.agents.1', 'named.agents.2', 'named.agents.3']);
    expect(lockOfKey('named.agents.3')).toEqual({ name: 'agents', slot: 3 });
    expect(lockOfKey('exec-run')).toEqual({ name: 'exec', slot: 1 });
    for (const other of ['scheduler', 'routine-state', 'named.Agents.1', 'named.a.0', 'named.a', 'named..1'])
      expect(lockOfKey(other), other).toBeNull();
    const longest = 'a'.repeat(63);
    expect(lockOfKey(lockKey(longest, 64))).toEqual({ name: longest, slot: 64 });
  });

  it('slots: as declared; an undeclared name has one, the exec lock one', () => {
    const locks = { agents: { slots: 3 } };
    expect([slotsOf(locks, 'agents'), slotsOf(locks, 'db'), slotsOf(locks, 'exec')]).toEqual([3, 1, 1]);
  });
});

describe('acquireLock', () => {
  it('takes the first free slot; all held: busy naming every holder, skip the same', async () => {
    const lock = backend();
    const a = await acquireLock(lock, 'agents', 2, owner, { ifBusy: 'fail' });
    const b = await acquireLock(lock, 'agents', 2, owner, { ifBusy: 'fail' });
    expect([a.ok && a.slot, b.ok && b.slot]).toEqual([1, 2]);
    const c = await acquireLock(lock, 'agents', 2, owner, { ifBusy: 'skip' });
    expect(c).toMatchObject({
      ok: false,
      reason: 'LOCK_HELD',
      why: expect.stringMatching(/^pid \d+ .*, and pid \d+ .* \(all 2 slots\)$/),
    });
    if (a.ok) await a.lease.release();
    const d = await acquireLock(lock, 'agents', 2, owner, { ifBusy: 'fail' });
    expect(d.ok && d.slot).toBe(1);
    for (const r of [b, d]) if (r.ok) await r.lease.release();
  });

  it('wait: told once whom it waits for; gets whichever slot frees first, and holds only that one', async () => {
    const lock = backend();
    const held = await Promise.all([1, 2].map(() => acquireLock(lock, 'agents', 2, owner, { ifBusy: 'fail' })));
    const told: string[] = [];
    const waiting = acquireLock(lock, 'agents', 2, owner, { ifBusy: 'wait', waitTimeoutMs: 30_000 }, (why) =>
      told.push(why),
    );
    await eventually(() => told.length > 0, 10_000, 'told whom it waits for');
    expect(told).toHaveLength(1);
    const second = held[1]!;
    if (second.ok) await second.lease.release();
    const got = await waiting;
    expect(got.ok && got.slot).toBe(2);
    // slot 1 is still the first holder's, slot 2 the waiter's, and nothing else
    const status = await Promise.all(slotKeys('agents', 2).map((k) => lock.status(k)));
    expect(status.map((s) => s.state)).toEqual(['held', 'held']);
    for (const r of [held[0]!, got]) if (r.ok) await r.lease.release();
  });

  it('wait with a time-out: every slot still held, WAIT_TIMEOUT naming the holders', async () => {
    const lock = backend();
    const held = await Promise.all([1, 2].map(() => acquireLock(lock, 'agents', 2, owner, { ifBusy: 'fail' })));
    const r = await acquireLock(lock, 'agents', 2, owner, { ifBusy: 'wait', waitTimeoutMs: 300 });
    expect(r).toMatchObject({ ok: false, reason: 'WAIT_TIMEOUT', why: expect.stringMatching(/\(all 2 slots\)$/) });
    for (const h of held) if (h.ok) await h.lease.release();
  });
});
