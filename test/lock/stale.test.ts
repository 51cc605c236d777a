import { describe, expect, it } from 'vitest';
import type { LockRecord } from '../../src/lock/record.js';
import { describeHolder, judgeLock } from '../../src/lock/stale.js';
import { fakeProbe } from './fake-probe.js';

const NOW = Date.UTC(2026, 10, 29, 19, 0, 0);
const s = NOW / 1000;

function lock(over: Partial<LockRecord['owner']> = {}, times: Partial<LockRecord> = {}): LockRecord {
  return {
    version: 1,
    key: 'exec-run',
    lock_id: 'a'.repeat(32),
    generation: 7,
    owner: { pid: 100, host: 'host-a', boot_id: 'boot-1', start_time: '555', command: 'exec run', ...over },
    created_at: s - 30,
    heartbeat_at: s - 5,
    expires_at: s + 55,
    ...times,
  };
}

const alive = { 100: { state: 'alive', startTime: '555', pgid: 100 } } as const;

describe('judgeLock (SPEC §4.4)', () => {
  it('keeps a live owner on this host with a fresh heartbeat', () => {
    expect(judgeLock(lock(), NOW, fakeProbe(alive))).toEqual({ stale: false, ownerCheck: 'alive' });
  });

  it('calls an unreadable record stale', () => {
    expect(judgeLock(null, NOW, fakeProbe(alive))).toMatchObject({ stale: true, reason: 'UNREADABLE' });
  });

  it('never calls a live owner on this host stale by the times in its record or a wall-clock step: only an observer that saw its heartbeat unchanged for a TTL does (a paused holder)', () => {
    // expired by its record (a clock jumped 2 h forward, or a row someone edited)
    const expired = lock({}, { heartbeat_at: s - 70, expires_at: s - 10 });
    expect(judgeLock(expired, NOW, fakeProbe(alive))).toEqual({ stale: false, ownerCheck: 'alive' });
    expect(judgeLock(expired, NOW + 7200_000, fakeProbe(alive))).toEqual({ stale: false, ownerCheck: 'alive' });
    expect(judgeLock(expired, NOW, fakeProbe(alive), { unchangedForMs: 59_000 })).toEqual({
      stale: false,
      ownerCheck: 'alive',
    });
    const v = judgeLock(expired, NOW, fakeProbe(alive), { unchangedForMs: 61_000 });
    expect(v).toMatchObject({ stale: true, reason: 'UNCHANGED' });
    expect(v.stale && v.why).toMatch(/no heartbeat seen for 61s on this host's clock \(TTL 60s\)/);
  });

  it("an implausible expiry (a hundred years ahead) is timed by the observer's own TTL, and on another host by a day at most", () => {
    const forever = lock({}, { heartbeat_at: s - 100, expires_at: s + 100 * 365 * 86400 });
    expect(judgeLock(forever, NOW, fakeProbe(alive), { unchangedForMs: 61_000, ttlMs: 60_000 })).toMatchObject({
      stale: true,
      reason: 'UNCHANGED',
    });
    expect(judgeLock(forever, NOW, fakeProbe(alive), { unchangedForMs: 59_000, ttlMs: 60_000 })).toMatchObject({
      stale: false,
    });
    const remote = lock({ host: 'host-b' }, { heartbeat_at: s - 86_401, expires_at: s + 100 * 365 * 86400 });
    const r = judgeLock(remote, NOW, fakeProbe(alive));
    expect(r).toMatchObject({ stale: true, reason: 'EXPIRED' });
    expect(r.stale && r.why).toMatch(/claims a TTL of .*more than the 86400s believed/);
    // a plausible TTL of another host is believed as it is
    expect(
      judgeLock(lock({ host: 'host-b' }, { heartbeat_at: s - 3000, expires_at: s + 600 }), NOW, fakeProbe(alive), {
        unchangedForMs: 0,
        ttlMs: 60_000,
      }),
    ).toMatchObject({ stale: false });
  });

  it('calls a dead owner on this host stale at once, before expiry', () => {
    expect(judgeLock(lock(), NOW, fakeProbe({}))).toMatchObject({ stale: true, reason: 'OWNER_DEAD' });
  });

  it('calls a zombie owner dead', () => {
    const v = judgeLock(lock(), NOW, fakeProbe({ 100: { state: 'dead', why: 'zombie' } }));
    expect(v).toMatchObject({ stale: true, reason: 'OWNER_DEAD' });
    expect(v.stale && v.why).toMatch(/zombie/);
  });

  it('detects pid reuse by start time', () => {
    const v = judgeLock(lock(), NOW, fakeProbe({ 100: { state: 'alive', startTime: '999', pgid: 100 } }));
    expect(v).toMatchObject({ stale: true, reason: 'PID_REUSED' });
  });

  it('detects a reboot by boot id', () => {
    const v = judgeLock(lock(), NOW, fakeProbe(alive, 'host-a', 'boot-2'));
    expect(v).toMatchObject({ stale: true, reason: 'REBOOTED' });
  });

  it('judges an owner on another host by expiry alone', () => {
    const remote = lock({ host: 'host-b' });
    // pid 100 is dead *here*, which says nothing about host-b
    expect(judgeLock(remote, NOW, fakeProbe({}))).toEqual({ stale: false, ownerCheck: 'remote' });
    const expired = lock({ host: 'host-b' }, { expires_at: s - 1 });
    expect(judgeLock(expired, NOW, fakeProbe({}))).toMatchObject({ stale: true, reason: 'EXPIRED' });
  });

  it('lets an observer distrust a remote clock: unchanged longer than the TTL on its own clock', () => {
    const remote = lock({ host: 'host-b' }, { heartbeat_at: s + 3600, expires_at: s + 3660 }); // clock an hour ahead
    expect(judgeLock(remote, NOW, fakeProbe({}), { unchangedForMs: 30_000 })).toMatchObject({ stale: false });
    expect(judgeLock(remote, NOW, fakeProbe({}), { unchangedForMs: 61_000 })).toMatchObject({
      stale: true,
      reason: 'UNCHANGED',
    });
  });

  it('falls back to expiry when the process table cannot tell', () => {
    const unknown = { 100: { state: 'unknown' } } as const;
    expect(judgeLock(lock(), NOW, fakeProbe(unknown))).toEqual({ stale: false, ownerCheck: 'unknown' });
    expect(judgeLock(lock({}, { expires_at: s - 1 }), NOW, fakeProbe(unknown))).toMatchObject({ reason: 'EXPIRED' });
  });

  it('describes the holder the way the busy message needs it', () => {
    const text = describeHolder(lock({ run_id: 'r-20261129T190000Z-7f3a', pid: 4711, host: 'build-01' }), NOW);
    expect(text).toBe('pid 4711 on build-01 (exec run, run r-20261129T190000Z-7f3a), heartbeat 5s ago');
    // a routine's fire: the routine once, never "routine, routine sync"
    expect(describeHolder(lock({ command: 'routine', routine: 'sync', run_id: 'r-20261129T190000Z-7f3a' }), NOW)).toBe(
      'pid 100 on host-a (routine sync, run r-20261129T190000Z-7f3a), heartbeat 5s ago',
    );
    expect(describeHolder(lock({ command: 'lock run', routine: 'sync' }), NOW)).toMatch(/\(lock run, routine sync\)/);
  });
});
