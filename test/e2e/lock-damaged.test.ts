// A lock record damaged under a live holder (issue 49, item 4; SPEC §4 rule 4): `: >` of
// `locks/exec-run.lock` zeroes the holder's slot (the view is a hard link to it). The lock is
// then judged by the holder's heartbeat, which names it: busy while it lives and beats, taken
// once it is dead or has not beaten for a TTL; the holder itself carries on and releases.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, processRuns, runCli, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const zero = (project: string): void => writeFileSync(join(project, '.routinely', 'locks', 'exec-run.lock'), '');

describe('a lock record zeroed under its holder', () => {
  it(
    'a live holder that beats is busy, named, not free; it runs to its end and releases (exit 0); then the lock is taken',
    { timeout: 60_000 },
    async () => {
      const project = testProject({});
      const holder = startCli(
        ['lock', 'run', '--', 'sh', '-c', 'echo holding; while [ ! -e go ]; do sleep 0.05; done; echo done'],
        { cwd: project, timeoutMs: 50_000 },
      );
      await holder.waitFor(/holding/);
      zero(project);
      const busy = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
      expect(busy.code, busy.stderr).toBe(75);
      expect(busy.stderr).toMatch(
        new RegExp(
          `^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\S+ ago; its lock record is unreadable \\(\\S+exec-run\\.slot\\.1 is not a valid lock record\\)`,
        ),
      );
      const status = await runCli(['lock', 'status', '--json'], { cwd: project });
      expect(JSON.parse(status.stdout)).toMatchObject({ state: 'held' });
      writeFileSync(join(project, 'go'), '');
      const end = await holder.exited;
      expect([end.code, holder.stderr()]).toEqual([0, '']);
      expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
    },
  );

  it(
    "a holder SIGKILLed: taken at once (its death is the evidence), and its command's group is ended first, found through its heartbeat",
    { timeout: 60_000 },
    async () => {
      const project = testProject({});
      const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo "holding $$"; sleep 60'], {
        cwd: project,
        timeoutMs: 50_000,
      });
      const childPid = Number((await holder.waitFor(/holding (\d+)/))[1]);
      zero(project);
      holder.child.kill('SIGKILL');
      await holder.exited;
      expect(processRuns(childPid)).toBe(true); // the orphan outlives its holder until a reclaim
      const next = await runCli(['lock', 'run', '--', 'echo', 'taken'], { cwd: project });
      expect([next.code, next.stdout]).toEqual([0, 'taken\n']);
      // ended before the takeover's command started (SPEC §4.4), not after
      expect(processRuns(childPid)).toBe(false);
    },
  );

  it(
    'a holder stopped (SIGSTOP): busy until its heartbeat is a TTL old, then a waiter takes it over',
    { timeout: 60_000 },
    async () => {
      const project = testProject({ lock: { ttlSeconds: 2, refreshSeconds: 0.5 } });
      const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 60'], {
        cwd: project,
        timeoutMs: 50_000,
      });
      await holder.waitFor(/holding/);
      zero(project);
      holder.child.kill('SIGSTOP');
      const waiter = await runCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '30', '--', 'echo', 'taken'], {
        cwd: project,
      });
      expect([waiter.code, waiter.stdout], waiter.stderr).toEqual([0, 'taken\n']);
      expect(waiter.stderr).toMatch(
        /^waiting for the exec lock, held by pid \d+ on \S+ \(lock run\), heartbeat \S+ ago; its lock record is unreadable/,
      );
      holder.child.kill('SIGKILL');
      await holder.exited;
    },
  );
});

describe('a holder whose record claims a longer TTL than the reader has (issue 49, item 5)', () => {
  /** A `lock run` with TTL 6 s, stopped until its heartbeat is past that TTL; then the project's
   * config says 2 s, as another checkout's might. */
  async function stalled(): Promise<{ project: string; holder: ReturnType<typeof startCli> }> {
    const project = testProject({ lock: { ttlSeconds: 6, refreshSeconds: 1 } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo holding; sleep 60'], {
      cwd: project,
      timeoutMs: 60_000,
    });
    await holder.waitFor(/holding/);
    holder.child.kill('SIGSTOP');
    await eventually(
      async () =>
        (
          JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout) as {
            heartbeat_age_s: number;
          }
        ).heartbeat_age_s > 6.5,
      30_000,
      'the heartbeat past its TTL',
    );
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ lock: { ttlSeconds: 2 } }));
    return { project, holder };
  }

  it(
    'lock status says what is true (alive, heartbeat past the TTL its record claims, which decides nothing here); lock break watches it for that TTL and breaks it',
    { timeout: 90_000 },
    async () => {
      const { project, holder } = await stalled();
      const status = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout) as {
        state: string;
        why: string;
      };
      expect(status.state).toBe('held');
      expect(status.why).toMatch(
        new RegExp(
          `^owner pid ${holder.pid} is alive; its heartbeat is \\d+(\\.\\d)?s old by its record, past the 6s TTL it claims — for a live owner on this host the record's times decide nothing`,
        ),
      );
      expect(status.why).not.toMatch(/fresh/);
      const broke = await runCli(['lock', 'break'], { cwd: project });
      expect(broke.code, broke.stderr).toBe(0);
      expect(broke.stderr).toMatch(/watching its heartbeat for up to 6s/);
      expect(broke.stdout).toMatch(
        /^broke the stale exec-run lock: no heartbeat seen for \S+ on this host's clock \(TTL 6s\)/,
      );
      holder.child.kill('SIGKILL');
      await holder.exited;
    },
  );

  it('a waiter takes it over once it saw the heartbeat unchanged for that TTL', { timeout: 90_000 }, async () => {
    const { project, holder } = await stalled();
    const waiter = await runCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '30', '--', 'echo', 'taken'], {
      cwd: project,
    });
    expect([waiter.code, waiter.stdout], waiter.stderr).toEqual([0, 'taken\n']);
    holder.child.kill('SIGKILL');
    await holder.exited;
  });
});
