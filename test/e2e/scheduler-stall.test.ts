// A file-backend scheduler stopped for 12 s (SIGSTOP; a loaded machine or a paused VM does the
// same) — issue 50, item 3: every scheduled second around the stall is accounted for, fired or
// recorded as a skip that says the scheduler slept through it; none is passed over in silence.

import { describe, expect, it } from 'vitest';
import { eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

type Record = { scheduled_at: string; result: string; reason: string | null };

/** The routine's records, each second once from the first recorded one to the last. */
async function everySecondOnce(project: string): Promise<{ history: Record[]; span: number }> {
  const history = JSON.parse(
    (await runCli(['routine', 'history', 'tick', '--json', '--limit', '1000'], { cwd: project })).stdout,
  ) as Record[];
  const seconds = history.map((h) => Date.parse(h.scheduled_at)).sort((a, b) => a - b);
  const span = (seconds.at(-1)! - seconds[0]!) / 1000 + 1;
  expect(seconds.length).toBe(span);
  expect(new Set(seconds).size).toBe(seconds.length);
  return { history, span };
}

describe('a scheduler stopped for 12 s', () => {
  it(
    'every second of a per-second routine is fired or recorded: the first missed one fires late, the others are skips that say why',
    { timeout: 90_000 },
    async () => {
      const project = testProject({
        routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
      });
      const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 80_000 });
      const fired = (): number => (s.stdout().match(/\[routine\] succeeded tick/g) ?? []).length;
      await eventually(() => fired() >= 2, 30_000, 'two fires');
      s.child.kill('SIGSTOP');
      await sleep(12_000);
      s.child.kill('SIGCONT');
      const after = fired();
      await eventually(
        () => fired() >= after + 3,
        30_000,
        'fires after the stall',
        () => s.stdout(),
      );
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
      expect(s.stdout()).toMatch(
        /\[routine\] skipped tick: missed: the scheduler woke 1\ds late \(stopped, paused or overloaded\)/,
      );
      const { history, span } = await everySecondOnce(project);
      expect(span).toBeGreaterThanOrEqual(15);
      expect(
        history.filter((h) => h.result === 'skipped' && /^missed: /.test(h.reason ?? '')).length,
      ).toBeGreaterThanOrEqual(8);
    },
  );

  it(
    'stopped past its lock\'s TTL with nobody taking the lock: it stops, and records every second it slept through, the one that was to fire late as skipped (a fault pass found it unrecorded, and the others saying it "ran late")',
    { timeout: 90_000 },
    async () => {
      const project = testProject({
        lock: { ttlSeconds: 6 },
        routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
      });
      const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 80_000 });
      await s.waitFor(/\[routine\] succeeded tick/, 30_000);
      s.child.kill('SIGSTOP');
      await sleep(9_000);
      s.child.kill('SIGCONT');
      expect((await s.exited).code).toBe(1);
      expect(s.stdout() + s.stderr()).toMatch(/scheduler lock lost/);
      const { history } = await everySecondOnce(project);
      const missed = history.filter((h) => h.result === 'skipped' && /^missed: /.test(h.reason ?? ''));
      expect(missed.length).toBeGreaterThanOrEqual(5);
      const late = history.filter((h) => h.reason === 'scheduler lost its lock');
      expect(late).toHaveLength(1);
      expect(late[0]!.result).toBe('skipped');
      // the missed ones name it, and it is after each of them
      for (const m of missed) {
        expect(m.reason).toContain(`the tick of ${late[0]!.scheduled_at} took its place`);
        expect(Date.parse(m.scheduled_at)).toBeGreaterThan(Date.parse(late[0]!.scheduled_at));
      }
    },
  );
  it(
    "the same when its heartbeat notices the lost lock before the loop wakes (a routine every 5 s: the heartbeat's timer, due every second, comes first): the times slept through are still recorded (a fault pass found them lost)",
    { timeout: 90_000 },
    async () => {
      const project = testProject({
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [{ id: 'tick', schedule: '*/5 * * * * *', action: 'command', run: 'true' }],
      });
      const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 80_000 });
      await s.waitFor(/\[routine\] succeeded tick/, 30_000);
      s.child.kill('SIGSTOP');
      await sleep(16_000);
      s.child.kill('SIGCONT');
      expect((await s.exited).code).toBe(1);
      expect(s.stdout() + s.stderr()).toMatch(/scheduler lock lost/);
      const history = JSON.parse(
        (await runCli(['routine', 'history', 'tick', '--json', '--limit', '1000'], { cwd: project })).stdout,
      ) as Record[];
      const at = history.map((h) => Date.parse(h.scheduled_at)).sort((a, b) => a - b);
      // every 5 s from the first fire to the last record, each once: none of the 16 s lost
      expect(at.slice(1).map((t, i) => t - at[i]!)).toEqual(at.slice(1).map(() => 5000));
      expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(15_000);
      expect(history.filter((h) => h.reason === 'scheduler lost its lock')).toHaveLength(1);
    },
  );
});
