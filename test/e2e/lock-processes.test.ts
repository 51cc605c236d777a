// The lock under real processes: contention, a stale lock met by many at once, generations
// across kills. Fixtures use the built library (dist/); `npm test` builds first.

import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attemptAcquire } from '../../src/file-lock/acquire.js';
import { systemProbe } from '../../src/process/identity.js';
import { serializeLockRecord } from '../../src/lock/record.js';
import { FIXTURES, start, type Spawned } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

/** A pid that existed a moment ago and has exited. */
function deadPid(): number {
  return Number(spawnSync('sh', ['-c', 'echo $$']).stdout.toString().trim());
}

type Outcome = { won: true; generation: number } | { won: false; reason: string };

async function outcome(p: Spawned): Promise<Outcome> {
  const m = await p.waitFor(/^\{"won".*\}$/m);
  return JSON.parse(m[0]) as Outcome;
}

/** Checks a critical-section log: strictly alternating S/E of the same holder, generations rising. */
function checkLog(text: string): { sections: number; holders: Set<string> } {
  const lines = text.trim().split('\n');
  let open: string | null = null;
  let lastGen = 0;
  let sections = 0;
  const holders = new Set<string>();
  for (const line of lines) {
    const [kind, pid, gen] = line.split(' ');
    if (kind === 'S') {
      expect(open, `overlap: ${pid} started while ${open} held the lock`).toBeNull();
      open = pid!;
      expect(Number(gen)).toBeGreaterThan(lastGen);
      lastGen = Number(gen);
      holders.add(pid!);
    } else {
      expect(open).toBe(pid);
      open = null;
      sections++;
    }
  }
  expect(open).toBeNull();
  return { sections, holders };
}

describe('the exec lock under real processes', () => {
  it('4 processes x 50 contended cycles: no overlap, generations strictly increasing', async () => {
    const dir = testdir();
    const lockDir = join(dir, 'locks');
    const log = join(dir, 'log');
    const barrier = join(dir, 'go');
    writeFileSync(log, '');
    const workers = Array.from({ length: 4 }, () =>
      start(join(FIXTURES, 'lock-worker.mjs'), [lockDir, '50', log, barrier]),
    );
    writeFileSync(barrier, '');
    const codes = await Promise.all(workers.map((w) => w.exited));
    expect(codes.map((c) => c.code)).toEqual([0, 0, 0, 0]);
    const { sections, holders } = checkLog(readFileSync(log, 'utf8'));
    expect(sections).toBe(200);
    expect(holders.size).toBe(4);
  });

  it('8 processes meeting one stale lock at once: exactly one winner, every round', async () => {
    for (let round = 0; round < 5; round++) {
      const dir = testdir();
      const barrier = join(dir, 'go');
      const probe = systemProbe();
      const now = Date.now() / 1000;
      writeFileSync(
        join(dir, 'exec-run.lock'),
        serializeLockRecord({
          version: 1,
          key: 'exec-run',
          lock_id: `${round}`.repeat(32),
          generation: 10 + round,
          owner: { pid: deadPid(), host: probe.host, boot_id: probe.bootId, start_time: '1', command: 'exec run' },
          created_at: now - 5,
          heartbeat_at: now - 1,
          expires_at: now + 59,
        }),
      );
      const racers = Array.from({ length: 8 }, () =>
        start(join(FIXTURES, 'lock-holder.mjs'), [dir, 'fail', '2000', barrier]),
      );
      await Promise.all(racers.map((r) => r.waitFor(/"ready"/)));
      writeFileSync(barrier, '');
      const outcomes = await Promise.all(racers.map(outcome));
      const winners = outcomes.filter((o) => o.won);
      expect(winners, `round ${round}: ${JSON.stringify(outcomes)}`).toHaveLength(1);
      expect(winners[0]).toMatchObject({ generation: 11 + round });
      expect(outcomes.filter((o) => !o.won && o.reason === 'LOCK_HELD')).toHaveLength(7);
      await Promise.all(racers.map((r) => r.exited));
    }
  });

  it('generation strictly increases over 100 acquisitions, a quarter of them ended by SIGKILL', async () => {
    const dir = testdir();
    const generations: number[] = [];
    const opts = { lockDir: dir, key: 'exec-run', ttlMs: 10_000, refreshMs: 3_000, owner: { command: 'test' } };
    for (let i = 0; i < 100; i++) {
      if (i % 4 === 0) {
        const holder = start(join(FIXTURES, 'lock-holder.mjs'), [dir, 'wait', '0']);
        const o = await outcome(holder);
        expect(o.won).toBe(true);
        if (o.won) generations.push(o.generation);
        holder.child.kill('SIGKILL');
        await holder.exited;
      } else {
        const r = await attemptAcquire(opts);
        if (!r.ok) throw new Error(`acquisition ${i}: ${r.reason} ${r.why}`);
        generations.push(r.lease.generation);
        await r.lease.release();
      }
    }
    expect(generations).toHaveLength(100);
    for (let i = 1; i < generations.length; i++) expect(generations[i]).toBeGreaterThan(generations[i - 1]!);
  });
});
