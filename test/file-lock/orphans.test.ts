import { spawn } from 'node:child_process';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { LivenessProbe, ProcessState } from '../../src/process/identity.js';
import { endOrphanGroups, judgeGroup, lockMarker } from '../../src/file-lock/orphans.js';
import { OrphanBlockedError } from '../../src/errors.js';
import { systemProbe } from '../../src/process/identity.js';
import { processRuns, eventually } from '../helpers/cli.js';

const me = process.geteuid?.() ?? 0;
const LOCK = 'a'.repeat(32);

function probe(table: Record<number, ProcessState>, extra: Partial<LivenessProbe> = {}): LivenessProbe {
  return {
    host: 'h',
    bootId: 'b',
    inspect: (pid) => table[pid] ?? { state: 'dead', why: 'no-process' },
    groupMembers: () => [],
    ownerUid: () => me,
    environHas: () => false,
    ...extra,
  };
}

describe('which process groups may be signalled (SPEC §12)', () => {
  it('never pid 0 or 1, whatever the record says', () => {
    const p = probe({ 0: { state: 'alive', startTime: '1', pgid: 0 }, 1: { state: 'alive', startTime: '1', pgid: 1 } });
    expect(judgeGroup({ pid: 0, start_time: '1' }, LOCK, p)).toEqual({ kind: 'unverified' });
    expect(judgeGroup({ pid: 1, start_time: '1' }, LOCK, p)).toEqual({ kind: 'unverified' });
  });

  it('a live leader: only with the recorded start time, leading its group, as this user', () => {
    const p = probe({
      500: { state: 'alive', startTime: '77', pgid: 500 },
      600: { state: 'alive', startTime: '77', pgid: 1 },
    });
    expect(judgeGroup({ pid: 500, start_time: '77' }, LOCK, p)).toEqual({ kind: 'ours' });
    expect(judgeGroup({ pid: 500, start_time: '78' }, LOCK, p)).toEqual({ kind: 'unverified' });
    expect(judgeGroup({ pid: 500, start_time: null }, LOCK, p)).toEqual({ kind: 'unverified' });
    expect(judgeGroup({ pid: 600, start_time: '77' }, LOCK, p)).toEqual({ kind: 'unverified' });
    const other = probe({ 500: { state: 'alive', startTime: '77', pgid: 500 } }, { ownerUid: () => me + 1 });
    expect(judgeGroup({ pid: 500, start_time: '77' }, LOCK, other)).toEqual({ kind: 'foreign', uid: me + 1 });
  });

  it("a leader that exited: only when a member carries the holder's ROUTINELY_LOCK_ID", () => {
    const members = { groupMembers: () => [501, 502] };
    expect(judgeGroup({ pid: 500, start_time: '77' }, LOCK, probe({}, members))).toEqual({ kind: 'unverified' });
    const marked = probe({}, { ...members, environHas: (pid, entry) => pid === 502 && entry === lockMarker(LOCK) });
    expect(judgeGroup({ pid: 500, start_time: '77' }, LOCK, marked)).toEqual({ kind: 'ours' });
    expect(judgeGroup({ pid: 500, start_time: '77' }, 'b'.repeat(32), marked)).toEqual({ kind: 'unverified' });
    expect(judgeGroup({ pid: 500, start_time: '77' }, LOCK, probe({}))).toEqual({ kind: 'gone' });
  });

  it('a proven orphan running as another user stops the takeover with exit 75 and says what to do', async () => {
    const p = probe({ 500: { state: 'alive', startTime: '77', pgid: 500 } }, { ownerUid: () => 4242 });
    const err = await endOrphanGroups([{ pid: 500, start_time: '77' }], {
      lockId: LOCK,
      holderPid: 99,
      probe: p,
      clock: new ManualClock(),
      graceMs: 10,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OrphanBlockedError);
    expect((err as OrphanBlockedError).exitCode).toBe(75);
    expect(String(err)).toMatch(
      /cannot end process group 500, left running by the previous holder \(pid 99\): it runs as uid 4242.*kill -TERM -- -500/,
    );
  });

  it('finds a command by its ROUTINELY_LOCK_ID even when nothing recorded it', async () => {
    const lockId = 'c'.repeat(32);
    const child = spawn('sleep', ['60'], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, ROUTINELY_LOCK_ID: lockId },
    });
    onTestFinished(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    await eventually(
      () => (systemProbe().markedGroupLeaders?.(lockMarker(lockId)) ?? []).length === 1,
      5000,
      'marked leader found',
    );
    const found = systemProbe().markedGroupLeaders!(lockMarker(lockId));
    expect(found.map((f) => f.pid)).toEqual([child.pid]);
    expect(systemProbe().markedGroupLeaders!(lockMarker('d'.repeat(32)))).toEqual([]);
    const report = await endOrphanGroups(
      found.map((f) => ({ pid: f.pid, start_time: f.startTime })),
      { lockId, probe: systemProbe(), clock: new ManualClock(), graceMs: 0 },
    );
    expect(report.ended).toEqual([child.pid]);
    await eventually(() => !processRuns(child.pid!), 5000, 'ended');
  });
});
