// Which process `scheduler stop` may signal (SPEC §12): only one proven to be the scheduler its
// lock names. Over a fake process table; the real thing is in test/e2e/scheduler-control.test.ts.

import { describe, expect, it } from 'vitest';
import { systemProbe, type LivenessProbe } from '../../src/process/identity.js';
import type { LockRecord } from '../../src/lock/record.js';
import { unproven } from '../../src/control/control.js';
import type { SchedulerInstance } from '../../src/control/status.js';
import { fakeProbe } from '../lock/fake-probe.js';

function instance(owner: Partial<LockRecord['owner']> = {}): SchedulerInstance {
  const record: LockRecord = {
    version: 1,
    key: 'scheduler',
    lock_id: 'a'.repeat(32),
    generation: 1,
    created_at: 1,
    heartbeat_at: 1,
    expires_at: 2,
    owner: { pid: 4711, host: 'host-a', boot_id: 'boot-1', start_time: '1000', command: 'scheduler', ...owner },
  };
  return {
    key: 'scheduler',
    pid: record.owner.pid,
    host: 'host-a',
    since: '',
    heartbeat_age_s: 1,
    here: true,
    config: null,
    stopping: false,
    record,
  };
}

const alive = (startTime: string | null, uid?: number): LivenessProbe => ({
  ...fakeProbe({ 4711: { state: 'alive', startTime, pgid: 4711 } }),
  ...(uid !== undefined ? { ownerUid: () => uid } : {}),
});

const me = process.geteuid?.() ?? 0;

describe('unproven', () => {
  it.runIf(process.platform === 'linux')(
    'a live process of ours with the recorded start time is still refused unless it runs "scheduler start"',
    () => {
      const probe = systemProbe();
      const self = probe.inspect(process.pid);
      if (self.state !== 'alive') throw new Error('no start time for this process');
      expect(unproven(instance({ pid: process.pid, start_time: self.startTime }), probe)).toBe(
        `pid ${process.pid} does not run "scheduler start"`,
      );
    },
  );

  it('refuses pid 1, a lock not taken by a scheduler, an exited pid, a reused pid, an unknown start time, another user', () => {
    expect(unproven(instance({ pid: 1 }), alive('1000'))).toBe('its lock names pid 1');
    expect(unproven(instance({ command: 'lock run' }), alive('1000'))).toBe(
      'its lock was taken by "lock run", not by a scheduler',
    );
    expect(unproven(instance(), fakeProbe())).toBe('pid 4711 has exited');
    expect(unproven(instance(), alive('2000'))).toBe(
      'pid 4711 is another process now (started at 2000, the lock says 1000)',
    );
    expect(unproven(instance(), alive(null))).toBe('the start time of pid 4711 cannot be checked');
    expect(unproven(instance({ start_time: null }), alive('1000'))).toBe(
      'the start time of pid 4711 cannot be checked',
    );
    expect(unproven(instance(), alive('1000', me + 1))).toBe(
      `pid 4711 belongs to uid ${me + 1}, not to this user (uid ${me})`,
    );
  });
});
