// A file-backend scheduler stopped for 12 s (SIGSTOP; a loaded machine or a paused VM does the
// same) — issue 50, item 3: every scheduled second around the stall is accounted for, fired or
// recorded as a skip that says the scheduler slept through it; none is passed over in silence.

import { describe, expect, it } from 'vitest';
import { eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

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
      const history = JSON.parse(
        (await runCli(['routine', 'history', 'tick', '--json', '--limit', '1000'], { cwd: project })).stdout,
      ) as { scheduled_at: string; result: string; reason: string | null }[];
      const seconds = history.map((h) => Date.parse(h.scheduled_at)).sort((a, b) => a - b);
      // from the first recorded second to the last, each second once
      const span = (seconds.at(-1)! - seconds[0]!) / 1000 + 1;
      expect(seconds.length).toBe(span);
      expect(new Set(seconds).size).toBe(seconds.length);
      expect(span).toBeGreaterThanOrEqual(15);
      expect(
        history.filter((h) => h.result === 'skipped' && /^missed: /.test(h.reason ?? '')).length,
      ).toBeGreaterThanOrEqual(8);
    },
  );
});
