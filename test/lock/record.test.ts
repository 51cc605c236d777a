import { describe, expect, it } from 'vitest';
import { parseLockRecord, serializeLockRecord, type LockRecord } from '../../src/lock/record.js';

const good: LockRecord = {
  version: 1,
  key: 'exec-run',
  lock_id: 'f'.repeat(32),
  generation: 42,
  owner: {
    pid: 4711,
    host: 'build-01',
    boot_id: 'b',
    start_time: '1',
    command: 'exec run',
    run_id: 'r-1',
    routine: 'auto',
    children: [{ pid: 4712, start_time: '2' }],
  },
  created_at: 1795978800.123,
  heartbeat_at: 1795978820.125,
  expires_at: 1795978880.125,
};

describe('lock record', () => {
  it('round-trips the SPEC §4 format', () => {
    expect(parseLockRecord(serializeLockRecord(good))).toEqual(good);
  });

  it.each([
    ['empty', ''],
    ['truncated', serializeLockRecord(good).slice(0, 40)],
    ['not an object', '[]'],
    ['wrong version', JSON.stringify({ ...good, version: 2 })],
    ['generation 0', JSON.stringify({ ...good, generation: 0 })],
    ['no owner pid', JSON.stringify({ ...good, owner: { ...good.owner, pid: 'x' } })],
    ['bad children', JSON.stringify({ ...good, owner: { ...good.owner, children: [{ pid: -1.5 }] } })],
    ['expiry not a number', JSON.stringify({ ...good, expires_at: 'soon' })],
  ])('rejects %s', (_name, text) => {
    expect(parseLockRecord(text)).toBeNull();
  });
});
