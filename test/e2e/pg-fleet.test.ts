// Schedulers sharing a database as a fleet runs them: all stalled at once (SIGSTOP, as a loaded
// machine does), and rolling restarts. Every per-second tick is recorded exactly once.

import { describe, expect, it } from 'vitest';
import { sleep, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { nextSecond, perSecond, schedulers, secondsAgo, stopAll, tickAccount } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

suite('rolling restarts of schedulers sharing a database', () => {
  it(
    'every scheduler stalled at once for 3 s (SIGSTOP, as a loaded machine does): each tick it slept through is claimed and recorded once',
    { timeout: 120_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const { ids, routines } = perSecond(10);
      const project = testProject({ project: 'app', backend: { type: 'postgres' }, routines });
      const env = { ROUTINELY_DATABASE_URL: url };
      const all = await schedulers(['h1', 'h2'], project, env, 110_000);
      const from = nextSecond();
      for (let round = 0; round < 2; round++) {
        await sleep(3000);
        for (const s of all) s.child.kill('SIGSTOP');
        await sleep(3000);
        for (const s of all) s.child.kill('SIGCONT');
      }
      await sleep(3000);
      const to = secondsAgo(2);
      await stopAll(all);
      const a = await tickAccount(url, ids, from, to);
      console.log(
        `stalled schedulers: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`,
      );
      expect(a, a.gaps.slice(0, 60).join(' ')).toMatchObject({
        recorded: a.expected,
        twice: 0,
        claimedLost: 0,
        unclaimed: 0,
      });
    },
  );

  it(
    '3 schedulers x 20 per-second routines, one restarted by SIGTERM every 6 s: every tick recorded exactly once',
    { timeout: 180_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const ids = Array.from({ length: 20 }, (_, i) => `r${String(i).padStart(2, '0')}`);
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        routines: ids.map((id) => ({ id, schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false })),
      });
      const env = { ROUTINELY_DATABASE_URL: url };
      const start = async (host: string) => {
        const s = startCli(['scheduler', 'start'], {
          cwd: project,
          env: { ...env, ROUTINELY_HOST_ID: host },
          timeoutMs: 170_000,
        });
        await s.waitFor(/\[scheduler\] started/);
        return s;
      };
      const hosts = ['h1', 'h2', 'h3'];
      const running = await Promise.all(hosts.map(start));
      const stopped: typeof running = [];
      const from = Math.ceil(Date.now() / 1000) * 1000 + 1000;
      for (let round = 0; round < 4; round++) {
        await sleep(6000);
        const i = round % 3;
        running[i]!.child.kill('SIGTERM');
        expect((await running[i]!.exited).code, running[i]!.stderr()).toBe(0);
        stopped.push(running[i]!);
        running[i] = await start(hosts[i]!);
      }
      await sleep(3000);
      const to = Math.floor(Date.now() / 1000) * 1000 - 2000;
      for (const s of running) s.child.kill('SIGTERM');
      for (const s of running) expect((await s.exited).code, s.stderr()).toBe(0);
      expect((to - from) / 1000 + 1).toBeGreaterThan(20);
      const a = await tickAccount(url, ids, from, to);
      console.log(
        `rolling restarts: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`,
      );
      // what went wrong where, should it: the ticks, and what the schedulers said about them
      const said = [...stopped, ...running]
        .map((s) =>
          s
            .stdout()
            .split('\n')
            .filter((l) => /warning|skipped|lost|late|step/.test(l))
            .slice(-20)
            .join('\n'),
        )
        .join('\n--\n');
      expect(a, `${a.gaps.slice(0, 60).join(' ')}\n${said}`).toMatchObject({
        recorded: a.expected,
        twice: 0,
        claimedLost: 0,
        unclaimed: 0,
      });
    },
  );
});
