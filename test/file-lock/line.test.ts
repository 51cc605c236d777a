// The waiting line of a lock (src/lock/line.ts): the order every process agrees on, a process's
// own place, and which tickets count — on a real folder, with the process table as data.

import { readdirSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { aheadOf, lineWhy, type LineEntry } from '../../src/lock/line.js';
import { fileWaitLine } from '../../src/file-lock/line.js';
import { fileLockBackend } from '../../src/file-lock/backend.js';
import { acquireLock } from '../../src/lock/named.js';
import { selfIdentity } from '../../src/process/identity.js';
import { fakeProbe } from '../lock/fake-probe.js';
import { testdir } from '../helpers/testdir.js';

const entry = (ticket: string, arrived: number, pid: number, host = 'h'): LineEntry => ({
  ticket,
  arrived,
  owner: { pid, host, boot_id: null, start_time: null, command: 'lock run' },
});

describe('the order of a line', () => {
  const self = { pid: 1, host: 'h' };
  const line = [
    entry('b', 20, 3),
    entry('a', 10, 2),
    entry('c', 20, 1),
    entry('d', 30, 4),
    entry('e', 5, 2, 'other-host'),
  ];

  it('a newcomer of a process with no ticket has every other waiter ahead, oldest first (arrival, then ticket)', () => {
    expect(
      aheadOf(
        line.filter((e) => e.owner.pid !== 1),
        self,
        null,
      ).map((e) => e.ticket),
    ).toEqual(['e', 'a', 'b', 'd']);
  });

  it('a ticket has those that came before it ahead; the same pid on another host is another process', () => {
    expect(aheadOf(line, { pid: 4, host: 'h' }, { arrived: 30, ticket: 'd' }).map((e) => e.ticket)).toEqual([
      'e',
      'a',
      'b',
      'c',
    ]);
    expect(aheadOf(line, { pid: 2, host: 'other-host' }, { arrived: 5, ticket: 'e' })).toEqual([]);
  });

  it('a process stands where its earliest ticket stands: a fire of it that waits later does not fall behind those its queued tick came before', () => {
    // pid 1 holds ticket c (20); a newcomer of pid 1 (no ticket of its own) stands at c
    expect(aheadOf(line, self, null).map((e) => e.ticket)).toEqual(['e', 'a', 'b']);
    // a later ticket of pid 1 also stands at c
    expect(aheadOf(line, self, { arrived: 40, ticket: 'z' }).map((e) => e.ticket)).toEqual(['e', 'a', 'b']);
  });

  it('says who is first, as read after "held by"', () => {
    expect(lineWhy([entry('a', 10, 2)])).toBe(
      'no one this moment, but a waiter that came first takes it next: lock run, pid 2 on h',
    );
    expect(lineWhy([entry('a', 10, 2), entry('b', 20, 3), entry('c', 30, 4)])).toBe(
      'no one this moment, but 3 waiters that came first take it next: lock run, pid 2 on h, and 2 more',
    );
  });
});

describe('a line in a folder', () => {
  const ttlMs = 10_000;
  /** A ticket file as another process writes it. */
  function foreign(lockDir: string, name: string, arrived: number, pid: number, mtimeAgoMs = 0, text?: string): string {
    const file = join(lockDir, 'line', `${name}.${String(arrived).padStart(15, '0')}.${'0'.repeat(15)}${pid % 10}`);
    writeFileSync(
      file,
      text ??
        JSON.stringify({
          version: 1,
          lock: name,
          owner: { pid, host: 'host-a', boot_id: 'boot-1', start_time: '100', command: 'lock run' },
        }),
      { mode: 0o600 },
    );
    const t = (Date.now() - mtimeAgoMs) / 1000;
    utimesSync(file, t, t);
    return file;
  }

  it('counts the live and fresh waiters of other processes; removes those of dead ones; passes over one not beaten for a TTL and a garbled one', async () => {
    const lockDir = testdir();
    const probe = fakeProbe({
      [process.pid]: { state: 'alive', startTime: '1', pgid: null },
      11: { state: 'alive', startTime: '100', pgid: null },
      13: { state: 'alive', startTime: '100', pgid: null },
      14: { state: 'alive', startTime: '999', pgid: null },
    });
    const line = fileWaitLine({ lockDir, ttlMs, refreshMs: 3_000, probe });
    const mine = await line.join('db', { command: 'test' });
    expect(readdirSync(join(lockDir, 'line'))).toHaveLength(1);
    foreign(lockDir, 'db', 1, 11); // alive, fresh: ahead
    const dead = foreign(lockDir, 'db', 2, 12); // no such process: removed
    foreign(lockDir, 'db', 3, 13, ttlMs + 5_000); // alive but not beaten for a TTL: passed over
    const reused = foreign(lockDir, 'db', 4, 14); // its pid now another process: removed
    foreign(lockDir, 'db', 5, 15, 0, '{"owner": 7'); // garbled, fresh: passed over, kept
    foreign(lockDir, 'cache', 1, 11); // another lock's line
    const ahead = await line.ahead('db', mine);
    expect(ahead.map((e) => e.owner.pid)).toEqual([11]);
    const names = readdirSync(join(lockDir, 'line'));
    expect(names).not.toContain(dead.split('/').pop());
    expect(names).not.toContain(reused.split('/').pop());
    expect(names).toHaveLength(5);
    // its own ticket is not ahead of itself, nor of a newcomer of its own process
    expect((await line.ahead('db', null)).map((e) => e.owner.pid)).toEqual([11]);
    // the views' list: every live waiter, its own included, oldest first (arrival 1 before its own)
    expect((await line.waiters('db')).map((e) => e.owner.pid)).toEqual([11, process.pid]);
    await mine.leave();
    expect(readdirSync(join(lockDir, 'line'))).toHaveLength(4);
    expect(selfIdentity(probe).pid).toBe(process.pid);
  });

  it('a free lock with a live waiter of another process ahead is busy to a newcomer, with why; once that waiter is gone, taken', async () => {
    const lockDir = testdir();
    const probe = fakeProbe({
      [process.pid]: { state: 'alive', startTime: '1', pgid: null },
      11: { state: 'alive', startTime: '100', pgid: null },
    });
    const lock = fileLockBackend({ lockDir, ttlMs, refreshMs: 3_000, probe });
    await lock.line!.join('db', { command: 'test' }).then((t) => t.leave()); // the folder exists
    const file = foreign(lockDir, 'db', 1, 11);
    const busy = await acquireLock(lock, 'db', 1, { command: 'test' }, { ifBusy: 'fail' });
    expect(busy).toMatchObject({
      ok: false,
      reason: 'LOCK_HELD',
      holder: null,
      why: 'no one this moment, but a waiter that came first takes it next: lock run, pid 11 on host-a',
    });
    expect(busy.ok === false && busy.ahead?.map((e) => e.owner.pid)).toEqual([11]);
    unlinkSync(file); // it left (took the lock elsewhere, or gave up)
    const got = await acquireLock(lock, 'db', 1, { command: 'test' }, { ifBusy: 'fail' });
    expect(got.ok).toBe(true);
    if (got.ok) await got.lease.release();
  });

  it('with slots, a waiter ahead holds up a newcomer only when no more slots are free than waiters ahead', async () => {
    const lockDir = testdir();
    const probe = fakeProbe({
      [process.pid]: { state: 'alive', startTime: '1', pgid: null },
      11: { state: 'alive', startTime: '100', pgid: null },
    });
    const lock = fileLockBackend({ lockDir, ttlMs, refreshMs: 3_000, probe });
    await lock.line!.join('agents', { command: 'test' }).then((t) => t.leave());
    foreign(lockDir, 'agents', 1, 11);
    // 3 slots, none held, one waiter ahead: a slot is left for the newcomer
    const a = await acquireLock(lock, 'agents', 3, { command: 'test' }, { ifBusy: 'fail' });
    const b = await acquireLock(lock, 'agents', 3, { command: 'test' }, { ifBusy: 'fail' });
    // 2 held now, 1 free: the waiter's
    const c = await acquireLock(lock, 'agents', 3, { command: 'test' }, { ifBusy: 'fail' });
    expect([a.ok, b.ok, c.ok]).toEqual([true, true, false]);
    expect(c.ok === false && c.ahead?.length).toBe(1);
    for (const r of [a, b]) if (r.ok) await r.lease.release();
  });
});
