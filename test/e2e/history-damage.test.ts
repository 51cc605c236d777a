// A history line damaged under a running scheduler (issue 49, item 3), with the built CLI: the
// close record of an old fire overwritten and routine-state.json garbled. The old fire never
// shows as running, and after a restart it is never the last result: the views agree with
// routine history.

import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

interface Row {
  last_result: string | null;
  running_since: string | null;
  consecutive_failures: number;
  counts: { success: number; failure: number };
}

describe('a damaged history line', () => {
  it(
    'the close of an old fire overwritten while the scheduler runs: no phantom running fire, no false failure after a restart',
    { timeout: 90_000 },
    async () => {
      const project = testProject({
        routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }],
      });
      const history = join(project, '.routinely', 'history', 'tick.jsonl');
      const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 80_000 });
      const succeeded = (): number => (s.stdout().match(/\[routine\] succeeded tick/g) ?? []).length;
      await eventually(() => succeeded() >= 2, 30_000, 'two fires');
      // the first fire's close record (line 2) overwritten in place, the state garbled
      const lines = readFileSync(history, 'utf8').split('\n');
      const first = JSON.parse(lines[0]!) as { event: string; started_at: string };
      expect(first.event).toBe('open');
      // in place (a rewrite of the whole file would drop a line the scheduler appends meanwhile)
      const fd = openSync(history, 'r+');
      writeSync(fd, '#'.repeat(Buffer.byteLength(lines[1]!)), Buffer.byteLength(lines[0]!) + 1);
      closeSync(fd);
      writeFileSync(join(project, '.routinely', 'routine-state.json'), 'garbage{\n');
      const seen = succeeded();
      await eventually(() => succeeded() >= seen + 2, 30_000, 'two more fires');
      const during = (JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as Row[])[0]!;
      expect(during.running_since, 'the old fire is not running').not.toBe(first.started_at);
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);

      // a restart that fires nothing: it reconciles what is open
      writeFileSync(
        join(project, 'routinely.json'),
        JSON.stringify({ routines: [{ id: 'tick', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] }),
      );
      const again = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 30_000 });
      await again.waitFor(/\[scheduler\] started/);
      again.child.kill('SIGTERM');
      expect((await again.exited).code).toBe(0);
      expect(again.stdout()).not.toMatch(/interrupted/);
      const after = (JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as Row[])[0]!;
      expect(after).toMatchObject({
        last_result: 'success',
        running_since: null,
        consecutive_failures: 0,
        counts: { failure: 0 },
      });
      // routine history says the same: every fire it shows succeeded, the newest first
      const shown = JSON.parse((await runCli(['routine', 'history', 'tick', '--json'], { cwd: project })).stdout) as {
        result: string;
      }[];
      expect(shown.length).toBe(after.counts.success);
      expect(shown.every((h) => h.result === 'success')).toBe(true);
      const check = await runCli(['routine', 'list', '--check'], { cwd: project });
      expect(check.stderr).not.toMatch(/failed routine/);
    },
  );
});

describe('a torn line said once', () => {
  it('routine history and a scheduler start, each folding the history more than once, say a torn line once', async () => {
    const project = testProject({
      routines: [{ id: 'a', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
    });
    const history = join(project, '.routinely', 'history', 'a.jsonl');
    expect((await runCli(['routine', 'run', 'a'], { cwd: project })).code).toBe(0);
    writeFileSync(history, `${readFileSync(history, 'utf8')}{"event":"fi\n`);
    expect((await runCli(['routine', 'run', 'a'], { cwd: project })).code).toBe(0);
    // nothing kept to fold from: every reader folds the whole file
    const indexes = () => {
      rmSync(join(project, '.routinely', 'history', 'a.index'), { force: true });
      rmSync(join(project, '.routinely', 'routine-state.json'), { force: true });
    };
    const torn = /a\.jsonl: line 3 could not be read \(torn or corrupt\) and was skipped/g;
    indexes();
    const h = await runCli(['routine', 'history', 'a'], { cwd: project });
    expect(h.code).toBe(0);
    expect(h.stderr.match(torn)).toHaveLength(1);
    indexes();
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 30_000 });
    await s.waitFor(/\[scheduler\] started/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(`${s.stdout()}${s.stderr()}`.match(torn)).toHaveLength(1);
  });
});
